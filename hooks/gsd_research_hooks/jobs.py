"""Deep research jobs that finished since the last announcement (SessionStart and UserPromptSubmit).

Reads the job layout (`conversation-logs/<id>/status.json`) directly; remembers what it announced in
GSD_RESEARCH_HOME/hooks-state.json (common.load_state; when it cannot be written, it announces again)."""

from __future__ import annotations

import json
import os

from gsd_research_hooks.common import gsd_home, load_state, save_state, unsafe_home

FINISHED = ("completed", "failed", "cancelled")
MAX_LISTED = 5


def _status(entry) -> tuple[float, str] | None:
    try:
        with open(os.path.join(entry.path, "status.json"), encoding="utf-8") as fh:
            status = json.load(fh)
        mtime = os.stat(os.path.join(entry.path, "status.json")).st_mtime
    except (OSError, ValueError):
        return None
    return mtime, str(status.get("status", "")) if isinstance(status, dict) else ""


def finished_jobs(announced: set) -> tuple[list[tuple[str, str]], set]:
    """(id, status) of finished jobs not announced yet, oldest first; and the ids that still exist (none when
    the home is unsafe: its folder names would reach the model as they are)."""
    if unsafe_home():
        return [], set()
    try:
        entries = list(os.scandir(os.path.join(gsd_home(), "conversation-logs")))
    except OSError:
        return [], set()
    found, existing = [], set()
    for entry in entries:
        existing.add(entry.name)
        if entry.name in announced or not entry.is_dir():
            continue
        status = _status(entry)
        if status and status[1] in FINISHED:
            found.append((status[0], entry.name, status[1]))
    found.sort()
    return [(name, state) for _, name, state in found], existing


def announce_jobs() -> str:
    """One sentence about deep research jobs that finished since the last announcement ('' when none)."""
    state = load_state()
    announced = set(state.get("announced") if isinstance(state.get("announced"), list) else [])
    jobs, existing = finished_jobs(announced)
    if not jobs:
        return ""
    state["announced"] = sorted((announced & existing) | {name for name, _ in jobs})
    save_state(state)
    listed = ", ".join(f"{name} ({status})" for name, status in jobs[:MAX_LISTED])
    more = f" and {len(jobs) - MAX_LISTED} more (gsd-research jobs list)" if len(jobs) > MAX_LISTED else ""
    return (f"Deep research finished: {listed}{more}. "
            f"Read a result with `gsd-research jobs result {jobs[0][0]}`.")
