"""UserPromptSubmit: announce deep research jobs that finished since the last prompt."""

from __future__ import annotations

from gsd_research_hooks.common import context
from gsd_research_hooks.jobs import announce_jobs


def handle(event: dict) -> dict | None:
    text = announce_jobs()
    return context("UserPromptSubmit", "gsd-research: " + text) if text else None
