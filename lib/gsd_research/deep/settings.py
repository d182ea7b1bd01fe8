"""Deep research settings: defaults here, `deep.<key>` in config.yaml, environment variables on top."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from gsd_research.core.errors import UsageError

EFFORTS = ("low", "medium", "high")
APIS = ("auto", "sonar", "agent")

DEFAULTS = {
    "model": "sonar-deep-research",
    "api": "auto",  # auto: Sonar, falling back to the Agent API when Sonar is gone; sonar; agent
    "agent_presets": {"low": "medium", "medium": "high", "high": "xhigh"},
    "timeout": 600.0,  # seconds; PERPLEXITY_POLLING_TIMEOUT_MS wins
    "max_attempts": 3,  # tries per job before it is marked failed
    "retry_backoff": 30.0,  # seconds before the 2nd try, doubled for each later one
    "retry_backoff_max": 600.0,
    "concurrency": 2,  # jobs a worker runs at the same time (each is one async request being polled)
    "poll_interval": 10.0,  # seconds between status polls of a running async request
    "idle_exit": 30.0,  # seconds an idle background worker waits for new jobs before exiting
    "max_interruptions": 20,  # worker deaths a job survives before it is marked failed
    "autostart": True,  # start a background worker when a job is enqueued
    "daily_budget_usd": None,  # admit a call only while its typical cost fits (deep.guard)
    "cost_warning_usd": 1.0,  # warn when a call is likely to cost more
}


def _truthy(value: str | None) -> bool:
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass
class DeepSettings:
    model: str = DEFAULTS["model"]
    api: str = DEFAULTS["api"]
    agent_presets: dict = field(default_factory=lambda: dict(DEFAULTS["agent_presets"]))
    timeout: float = DEFAULTS["timeout"]
    max_attempts: int = DEFAULTS["max_attempts"]
    retry_backoff: float = DEFAULTS["retry_backoff"]
    retry_backoff_max: float = DEFAULTS["retry_backoff_max"]
    concurrency: int = DEFAULTS["concurrency"]
    poll_interval: float = DEFAULTS["poll_interval"]
    idle_exit: float = DEFAULTS["idle_exit"]
    max_interruptions: int = DEFAULTS["max_interruptions"]
    autostart: bool = DEFAULTS["autostart"]
    daily_budget_usd: float | None = None
    cost_warning_usd: float = DEFAULTS["cost_warning_usd"]
    async_default: bool = False

    def backoff(self, attempts: int) -> float:
        """Seconds to wait after the `attempts`-th failed try."""
        return min(self.retry_backoff_max, self.retry_backoff * (2 ** max(0, attempts - 1)))

    def preset(self, effort: str) -> str:
        return str(self.agent_presets.get(effort) or DEFAULTS["agent_presets"].get(effort, "high"))


def disclaimer_enabled() -> bool:
    """PERPLEXITY_ENABLE_SECURITY_DISCLAIMER: show the security disclaimer in deep's help and answers."""
    return _truthy(os.environ.get("PERPLEXITY_ENABLE_SECURITY_DISCLAIMER"))


def _timeout_from_env() -> float | None:
    raw = os.environ.get("PERPLEXITY_POLLING_TIMEOUT_MS", "").strip()
    if not raw:
        return None
    try:
        value = float(raw) / 1000.0
    except ValueError:
        raise UsageError(f"PERPLEXITY_POLLING_TIMEOUT_MS must be milliseconds, got '{raw}'",
                         suggestions=["export PERPLEXITY_POLLING_TIMEOUT_MS=600000"]) from None
    if value <= 0:
        raise UsageError("PERPLEXITY_POLLING_TIMEOUT_MS must be positive")
    return value


def load(config) -> DeepSettings:
    """Settings from `config` (a gsd_research.core.config.Config) and the environment."""
    def get(key):
        return config.get(f"deep.{key}", DEFAULTS[key])

    try:
        s = DeepSettings(
            model=str(get("model")), api=str(get("api")).lower(),
            agent_presets=dict(get("agent_presets") or {}),
            timeout=float(get("timeout")), max_attempts=max(1, int(get("max_attempts"))),
            retry_backoff=max(0.0, float(get("retry_backoff"))),
            retry_backoff_max=max(0.0, float(get("retry_backoff_max"))),
            poll_interval=max(0.01, float(get("poll_interval"))), idle_exit=max(0.0, float(get("idle_exit"))),
            concurrency=min(16, max(1, int(get("concurrency")))),
            max_interruptions=max(1, int(get("max_interruptions"))), autostart=bool(get("autostart")),
            daily_budget_usd=None if get("daily_budget_usd") is None else float(get("daily_budget_usd")),
            cost_warning_usd=float(get("cost_warning_usd")),
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"Invalid deep research setting in config.yaml ({exc})",
                         suggestions=["gsd-research config show"]) from None
    if s.api not in APIS:
        raise UsageError(f"deep.api must be one of {', '.join(APIS)}, not '{s.api}'")
    s.timeout = _timeout_from_env() or s.timeout
    s.async_default = _truthy(os.environ.get("PERPLEXITY_ENABLE_ASYNC_DEEP_RESEARCH"))
    return s
