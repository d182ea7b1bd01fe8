"""UserPromptSubmit: gsd-research's environment once it is ready (when the session was told it was being
prepared), and deep research jobs that finished since the last prompt."""

from __future__ import annotations

from gsd_research_hooks.common import context, load_state
from gsd_research_hooks.jobs import announce_jobs


def environment_notice(session_id: str) -> str:
    if "env_pending" not in load_state():  # no session waits for a build: skip the imports (start-up time)
        return ""
    from gsd_research_hooks.env_context import pending_notice

    return pending_notice(session_id)


def handle(event: dict) -> dict | None:
    parts = [environment_notice(str(event.get("session_id") or "")), announce_jobs()]
    text = " ".join(p for p in parts if p)
    return context("UserPromptSubmit", "gsd-research: " + text) if text else None
