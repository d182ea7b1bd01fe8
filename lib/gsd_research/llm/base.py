"""The one backend interface: configured?, health check, generate, analyze an image."""

from __future__ import annotations

from dataclasses import dataclass, field

from gsd_research.core.errors import GsdError, NoBackend

BackendUnavailable = NoBackend  # a backend that cannot serve this call; the class lives with the other codes


@dataclass
class Generation:
    """A model's answer and where it came from."""

    text: str
    backend: str
    model: str
    usage: dict = field(default_factory=dict)
    grounding: dict | None = None


class Backend:
    """Subclasses set `name`, `provider` and implement `_generate` (and `_image` when they see)."""

    name = "backend"
    provider = "backend"
    vision = False
    grounding = False

    def __init__(self, rt, model: str) -> None:
        self.rt = rt
        self.model = model
        self.base_url = rt.config.base_url(self.provider)
        self.key = rt.config.api_key(self.provider)

    # -- health --------------------------------------------------------------------------------
    def configured(self) -> tuple[bool, str]:
        """Whether the backend can be tried at all (a key or a URL), with a reason when not."""
        return True, ""

    def health(self) -> tuple[bool, str]:
        """A cheap reachability check; cloud backends are healthy when configured."""
        return self.configured()

    # -- work ----------------------------------------------------------------------------------
    def generate(self, prompt: str, *, system: str | None = None, max_output_tokens: int = 1024,
                 search: bool = False, thinking: int = 0) -> Generation:
        """`thinking`: tokens the model may reason with before it answers (grounded backends; others ignore it)."""
        if search and not self.grounding:
            raise BackendUnavailable(f"{self.name} has no web-search grounding")
        extra = {"thinking": thinking} if thinking and self.grounding else {}
        return self._generate(prompt, system=system, max_output_tokens=max_output_tokens, search=search, **extra)

    def analyze_image(self, image: bytes, mime: str, question: str, *, system: str | None = None,
                      max_output_tokens: int = 1024) -> Generation:
        if not self.vision:
            raise BackendUnavailable(f"{self.name} cannot analyze images")
        return self._image(image, mime, question, system=system, max_output_tokens=max_output_tokens)

    def _generate(self, prompt, *, system, max_output_tokens, search) -> Generation:  # pragma: no cover
        raise NotImplementedError

    def _image(self, image, mime, question, *, system, max_output_tokens) -> Generation:  # pragma: no cover
        raise NotImplementedError

    def _post(self, url: str, body: dict, headers: dict | None = None, key_hint: str | None = None):
        from gsd_research.core.http import parse_json
        from gsd_research.core.http_cache import cache_backend_name

        # a prompt holding the user's local file stays out of a cache the team shares (Redis); SQLite is private
        shared = cache_backend_name(self.rt.config) == "redis"
        resp = self.rt.http.request(self.provider, "POST", url, json=body, headers=headers or {},
                                    ttl=self.rt.config.ttl("llm"), key_hint=key_hint,
                                    cache=not (shared and self.rt.private_input))
        return parse_json(self.provider, resp)


def malformed(provider: str, what: str) -> GsdError:
    from gsd_research.core.errors import ProviderError

    return ProviderError(f"{provider.capitalize()} sent a malformed answer ({what})",
                         suggestions=["Retry later; if it persists the provider's API may have changed"],
                         details={"provider": provider})
