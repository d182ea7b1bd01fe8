"""The deep research log: one JSON line per failed attempt or warning, with its full context, never a key.

GSD_RESEARCH_HOME/logs/deep.log (0600): conversation id, mode, query, effort, model, API, remote id, attempt,
seconds into the attempt, error code, message and details. Warnings also go to stderr (the worker's
stderr is its log file). Logging never raises.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from gsd_research.core.config import home

LOG_MAX_BYTES = 5_000_000


def log_path() -> Path:
    return home() / "logs" / "deep.log"


def event(kind: str, **fields) -> None:
    """Append one entry (keys scrubbed) to the deep research log."""
    from gsd_research.core.secrets import scrub
    from gsd_research.deep.store import now_iso

    try:
        line = scrub(json.dumps({"ts": now_iso(), "event": kind, **fields}, ensure_ascii=False, default=str))
        path = log_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.stat().st_size > LOG_MAX_BYTES:
                os.replace(path, path.with_suffix(".log.1"))  # keep one old log
        except OSError:
            pass
        from gsd_research.core.private import open_private

        fd = open_private(path)  # never through a planted symlink
        try:
            os.write(fd, (line + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    except Exception:  # noqa: BLE001 - a log that cannot be written must not fail the research
        pass


def warn(message: str, **fields) -> None:
    """A warning on stderr and in the log."""
    from gsd_research.core.secrets import scrub

    try:
        sys.stderr.write(scrub(f"gsd-research: warning: {message}") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    event("warning", message=message, **fields)


def failure(job: dict, status: dict, exc, *, mode: str, elapsed: float) -> None:
    """A failed attempt with everything needed to understand it later."""
    event("error", conversation_id=job.get("id"), mode=mode, query=str(job.get("query") or "")[:500],
          effort=job.get("effort"), model=job.get("model"), api=status.get("remoteApi"),
          remote_id=status.get("remoteId") or exc.details.get("remote_id"),
          attempt=int(status.get("attempts") or 0) + 1, elapsed_s=round(elapsed, 3), code=exc.code,
          message=exc.message, details=exc.details)
