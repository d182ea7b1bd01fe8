"""Routing by task: a configurable chain of backends, skipping unconfigured or unhealthy ones."""

from __future__ import annotations

import os
from collections.abc import Callable

from gsd_research.core.errors import GsdError, MissingApiKey, NoBackend, UsageError
from gsd_research.llm.base import Backend, BackendUnavailable, Generation

# summarize text: Ollama first (local, cheap); analyze (reasoning): OpenAI first; a URL summary: Gemini
# first; images: Ollama's vision model first (Gemini and OpenAI see too); web: only Gemini grounds.
DEFAULT_CHAINS: dict[str, list[str]] = {
    "summarize": ["ollama", "gemini", "openai"],
    "analyze": ["openai", "gemini"],
    "url": ["gemini", "ollama", "openai"],
    "image": ["ollama", "gemini", "openai"],
    "web": ["gemini"],
    "verify": ["openai", "gemini", "ollama"],  # does a cited passage support a claim (verify)
}
DEFAULT_MODELS = {"gemini": "gemini-2.5-flash", "ollama": "qwen3-vl:8b", "openai": "gpt-4o-mini"}
BACKENDS = ("gemini", "ollama", "openai")


def model_for(config, name: str) -> str:
    if name == "ollama" and os.environ.get("OLLAMA_MODEL", "").strip():
        return os.environ["OLLAMA_MODEL"].strip()
    return str(config.get(f"llm.models.{name}") or DEFAULT_MODELS[name])


def make_backend(rt, name: str) -> Backend:
    if name == "gemini":
        from gsd_research.llm.gemini import GeminiBackend as cls
    elif name == "ollama":
        from gsd_research.llm.ollama import OllamaBackend as cls
    elif name == "openai":
        from gsd_research.llm.openai import OpenAIBackend as cls
    else:
        raise UsageError(f"Unknown model backend '{name}'", suggestions=[f"Use one of: {', '.join(BACKENDS)}"])
    return cls(rt, model_for(rt.config, name))


def chain_for(config, task: str) -> list[str]:
    raw = config.get(f"llm.chains.{task}")
    if raw is None:
        return list(DEFAULT_CHAINS[task])
    names = [n.strip().lower() for n in (raw.split(",") if isinstance(raw, str) else raw) if str(n).strip()]
    bad = [n for n in names if n not in BACKENDS]
    if bad:
        raise UsageError(f"llm.chains.{task} names unknown backend(s): {', '.join(bad)}",
                         suggestions=[f"gsd-research config set llm.chains.{task} "
                                      f"'[{', '.join(DEFAULT_CHAINS[task])}]'"])
    return names


class Router:
    """Runs a call on the first backend of a task's chain that can serve it; records what was tried."""

    def __init__(self, rt) -> None:
        self.rt = rt
        self.tried: list[dict] = []
        self.errors: list[GsdError] = []

    def run(self, task: str, call: Callable[[Backend], Generation], *, need: str | None = None,
            before: Callable[[Backend], None] | None = None) -> Generation:
        """`call` on the chain's first backend that serves it; `before(backend)` runs just before a backend is
        called (paid), and what it raises ends the run there."""
        self.tried, self.errors = [], []
        for name in chain_for(self.rt.config, task):
            backend = make_backend(self.rt, name)
            ok, why = backend.configured()
            if ok and need and not getattr(backend, need, False):
                ok, why = False, f"no {need} support"
            if not ok:
                self.tried.append({"backend": name, "status": "skipped", "reason": why})
                continue
            ok, why = backend.health()
            if not ok:
                self.tried.append({"backend": name, "status": "unhealthy", "reason": why})
                continue
            if before is not None:
                before(backend)
            try:
                generation = call(backend)
            except GsdError as exc:
                self.tried.append({"backend": name, "model": backend.model, "status": "failed",
                                   "code": exc.code, "reason": exc.message[:200]})
                self.errors.append(exc)
                continue
            self.tried.append({"backend": name, "model": generation.model, "status": "served"})
            return generation
        raise self.no_backend(task)

    def no_backend(self, task: str) -> GsdError:
        chain = chain_for(self.rt.config, task)
        errors = getattr(self, "errors", [])
        if len(errors) == 1 and all(t["status"] != "unhealthy" for t in self.tried):
            only = errors[0]  # the one backend that could be tried failed: its error is the answer
            return type(only)(f"{only.message} (no other backend of the {task} chain is configured)",
                            suggestions=[*only.suggestions, "gsd-research doctor"], retry_after=only.retry_after,
                            details={"tried": self.tried})
        if self.tried and all(t["status"] == "skipped" and "not set" in t.get("reason", "") for t in self.tried):
            hint = {"gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY", "ollama": "OLLAMA_HOST"}
            unset = MissingApiKey if task == "web" else NoBackend
            return unset(f"No model backend is configured for {task} (chain: {' -> '.join(chain)})",
                            suggestions=[f"Set {hint[n]}" for n in chain] + ["gsd-research doctor"],
                            details={"tried": self.tried})
        return BackendUnavailable(
            f"No model backend could serve {task} (chain: {' -> '.join(chain)})",
            suggestions=["Check the backends with gsd-research doctor",
                         f"Change the order with gsd-research config set llm.chains.{task} '[...]'"],
            details={"tried": self.tried})
