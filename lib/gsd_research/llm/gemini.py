"""Gemini `generateContent`, with Google Search grounding and inline images."""

from __future__ import annotations

import base64

from gsd_research.llm.base import Backend, Generation, malformed

KEY_HINT = "GEMINI_API_KEY (or GOOGLE_API_KEY)"


class GeminiBackend(Backend):
    name = provider = "gemini"
    vision = True
    grounding = True

    def configured(self) -> tuple[bool, str]:
        return (True, "") if self.key else (False, "GEMINI_API_KEY is not set")

    def _post(self, url, body, headers=None, key_hint=None):
        """Gemini says 400 (not 401) for a bad key: map that to INVALID_API_KEY."""
        from gsd_research.core.errors import InvalidApiKey, ProviderError

        try:
            return super()._post(url, body, headers, key_hint)
        except ProviderError as exc:
            said = str(exc.details.get("provider_message") or "").lower()  # Gemini's own (fenced) words
            if exc.details.get("status") == 400 and ("api key" in said or "api_key" in said):
                raise InvalidApiKey("Gemini rejected the API key (HTTP 400)",
                                    suggestions=[f"Check {KEY_HINT}"], details=exc.details) from None
            raise

    def _call(self, parts: list[dict], *, system, max_output_tokens, search, thinking: int = 0) -> Generation:
        config: dict = {"maxOutputTokens": max_output_tokens, "temperature": 0.2}
        if thinking and "2.5" in self.model:  # thinking tokens count against maxOutputTokens: add them
            config.update(maxOutputTokens=max_output_tokens + thinking, thinkingConfig={"thinkingBudget": thinking})
        elif "flash" in self.model and "2.5" in self.model:
            config["thinkingConfig"] = {"thinkingBudget": 0}  # thinking would eat the output budget
        body: dict = {"contents": [{"role": "user", "parts": parts}], "generationConfig": config}
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if search:
            body["tools"] = [{"google_search": {}}]
        url = f"{self.base_url}/v1beta/models/{self.model}:generateContent"
        data = self._post(url, body, {"x-goog-api-key": self.key or ""}, KEY_HINT)
        candidates = data.get("candidates") if isinstance(data, dict) else None
        if not candidates:
            reason = (data.get("promptFeedback") or {}).get("blockReason") if isinstance(data, dict) else None
            raise malformed(self.provider, f"no candidates{', blocked: ' + _enum(reason) if reason else ''}")
        first = candidates[0] or {}
        texts = [p.get("text", "") for p in (first.get("content") or {}).get("parts") or []
                 if isinstance(p, dict) and not p.get("thought")]
        text = "".join(texts).strip()
        if not text:
            raise malformed(self.provider, f"empty answer, finishReason {_enum(first.get('finishReason'))}")
        usage = data.get("usageMetadata") or {}
        return Generation(text, self.name, str(data.get("modelVersion") or self.model),
                          {"input_tokens": usage.get("promptTokenCount"),
                           "output_tokens": usage.get("candidatesTokenCount")},
                          first.get("groundingMetadata"))

    def _generate(self, prompt, *, system, max_output_tokens, search, thinking: int = 0) -> Generation:
        return self._call([{"text": prompt}], system=system, max_output_tokens=max_output_tokens, search=search,
                          thinking=thinking)

    def _image(self, image, mime, question, *, system, max_output_tokens) -> Generation:
        parts = [{"inlineData": {"mimeType": mime, "data": base64.b64encode(image).decode("ascii")}},
                 {"text": question}]
        return self._call(parts, system=system, max_output_tokens=max_output_tokens, search=False)


def _enum(value) -> str:
    """An enumeration value of Gemini's (SAFETY, MAX_TOKENS) as an identifier: never free text in a message."""
    return "".join(c for c in str(value or "") if c.isascii() and (c.isalnum() or c == "_"))[:40] or "unknown"
