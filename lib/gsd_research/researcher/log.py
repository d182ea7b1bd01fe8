"""Structured logging: one JSON object per event in GSD_RESEARCH_HOME/logs/researcher.log."""

from __future__ import annotations

import json
import time


def event(name: str, **fields) -> None:
    """Append one structured event; logging never raises."""
    try:
        from gsd_research.core.config import home
        from gsd_research.core.secrets import scrub

        path = home() / "logs" / "researcher.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"ts": round(time.time(), 3), "event": name, **fields}
        with path.open("a", encoding="utf-8") as fh:
            fh.write(scrub(json.dumps(record, default=str, ensure_ascii=False)) + "\n")
    except Exception:  # noqa: BLE001 - logging must never break the command
        pass
