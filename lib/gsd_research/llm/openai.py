"""OpenAI `/chat/completions`, images as data URLs."""

from __future__ import annotations

import base64

from gsd_research.llm.base import Backend, Generation, malformed

KEY_HINT = "OPENAI_API_KEY"


class OpenAIBackend(Backend):
    name = provider = "openai"
    vision = True

    def configured(self) -> tuple[bool, str]:
        return (True, "") if self.key else (False, "OPENAI_API_KEY is not set")

    def _chat(self, content, *, system, max_output_tokens) -> Generation:
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        body = {"model": self.model, "messages": messages, "max_completion_tokens": max_output_tokens}
        data = self._post(f"{self.base_url}/chat/completions", body,
                          {"Authorization": f"Bearer {self.key or ''}"}, KEY_HINT)
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise malformed(self.provider, "no choices") from None
        text = str(message.get("content") or "").strip()
        if not text:
            raise malformed(self.provider, "empty answer" + (" (refused)" if message.get("refusal") else ""))
        usage = data.get("usage") or {}
        return Generation(text, self.name, str(data.get("model") or self.model),
                          {"input_tokens": usage.get("prompt_tokens"), "output_tokens": usage.get("completion_tokens")})

    def _generate(self, prompt, *, system, max_output_tokens, search) -> Generation:
        return self._chat(prompt, system=system, max_output_tokens=max_output_tokens)

    def _image(self, image, mime, question, *, system, max_output_tokens) -> Generation:
        url = f"data:{mime};base64,{base64.b64encode(image).decode('ascii')}"
        content = [{"type": "text", "text": question}, {"type": "image_url", "image_url": {"url": url}}]
        return self._chat(content, system=system, max_output_tokens=max_output_tokens)
