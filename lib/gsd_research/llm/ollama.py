"""Ollama `/api/chat` (stream false), health from `/api/tags`, images for vision models."""

from __future__ import annotations

import base64
import re

from gsd_research.core.errors import GsdError
from gsd_research.llm.base import Backend, Generation, malformed

_THINK = re.compile(r"<think>.*?</think>", re.S)


class OllamaBackend(Backend):
    name = provider = "ollama"
    vision = True

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def configured(self) -> tuple[bool, str]:
        return (True, "") if self.base_url else (False, "OLLAMA_HOST is not set")

    def health(self) -> tuple[bool, str]:
        """Reachable and the model pulled; a short timeout and no retries (it is only a probe)."""
        try:
            resp = self.rt.http.request(self.provider, "GET", f"{self.base_url}/api/tags", cache=False,
                                        timeout=(2, 5), retries=0, headers=self._headers())
            models = (resp.json() or {}).get("models") or []
        except GsdError as exc:
            return False, f"unreachable: {exc.message[:120]}"
        except ValueError:
            return False, "unreachable: /api/tags did not answer JSON"
        names = {str(m.get("name") or m.get("model") or "") for m in models if isinstance(m, dict)}
        wanted = self.model if ":" in self.model else self.model + ":latest"
        if self.model not in names and wanted not in names:
            return False, f"model {self.model} is not pulled (ollama pull {self.model})"
        return True, ""

    def _chat(self, message: dict, *, system, max_output_tokens) -> Generation:
        messages = ([{"role": "system", "content": system}] if system else []) + [message]
        body = {"model": self.model, "messages": messages, "stream": False, "think": False,
                "options": {"temperature": 0.2, "num_predict": max_output_tokens}}
        data = self._post(f"{self.base_url}/api/chat", body, self._headers(), "OLLAMA_HOST")
        if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
            raise malformed(self.provider, "no message")
        text = _THINK.sub("", str(data["message"].get("content") or "")).strip()
        if not text:
            raise malformed(self.provider, "empty answer")
        return Generation(text, self.name, str(data.get("model") or self.model),
                          {"input_tokens": data.get("prompt_eval_count"), "output_tokens": data.get("eval_count")})

    def _generate(self, prompt, *, system, max_output_tokens, search) -> Generation:
        return self._chat({"role": "user", "content": prompt}, system=system, max_output_tokens=max_output_tokens)

    def _image(self, image, mime, question, *, system, max_output_tokens) -> Generation:
        message = {"role": "user", "content": question, "images": [base64.b64encode(image).decode("ascii")]}
        return self._chat(message, system=system, max_output_tokens=max_output_tokens)
