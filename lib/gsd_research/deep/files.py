"""Files of the job store: atomic JSON documents, flocks, ids and timestamps."""

from __future__ import annotations

import contextlib
import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

TMP_SUFFIX = ".tmp"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
STATUSES = ("pending", "running", "completed", "failed", "cancelled")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def new_id() -> str:
    """A unique, time-sortable conversation id such as dr-20261122-042614123-9f3c2a1b (UTC, milliseconds)."""
    now = time.time()
    return f"dr-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}{int(now % 1 * 1000):03d}-{os.urandom(4).hex()}"


def write_json(path: Path, doc: Any, durable: bool = True) -> None:
    """Replace `path` with `doc` as JSON in one rename; known keys scrubbed out first.

    The rename makes it atomic for readers and against a killed writer; `durable` adds an fsync so
    the new content also survives a power loss (skipped for transient states that can be redone).
    """
    from gsd_research.core.secrets import scrub

    text = scrub(json.dumps(doc, ensure_ascii=False, indent=1, default=str))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(3).hex()}{TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _no_constant(name: str):
    raise ValueError(f"non-finite number {name}")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"non-finite number {text[:20]}")
    return value


def parse(text: str | bytes) -> Any:
    """Strict JSON: NaN, Infinity and numbers too large for a float (1e999) are refused, never read as inf."""
    return json.loads(text, parse_constant=_no_constant, parse_float=_finite)


def read_json(path: Path) -> dict | None:
    """A JSON object, or None when it is missing or unreadable (job files: `records.load`, which says why)."""
    try:
        doc = parse(path.read_bytes())
    except (OSError, ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None
    return doc if isinstance(doc, dict) else None


def due_at(status: dict, max_wait: float, caller_waits: bool = False) -> float:
    """When a pending job's next attempt may start (epoch seconds). A `retryAt` further ahead than any
    backoff can be (`max_wait`) comes from a clock set back or a damaged file: due now. A caller waiting
    on a request the provider accepted resumes it at once (a poll costs nothing): only the provider's own
    Retry-After holds it back."""
    field = "providerRetryAt" if caller_waits and status.get("remoteId") else "retryAt"
    retry_at = parse_iso(status.get(field)) or 0.0
    return 0.0 if retry_at - time.time() > max_wait + 5 else retry_at


def file_lock(path: Path, blocking: bool = True):
    """An exclusive flock on `path`; yields False (without waiting) when not blocking and it is held. A
    symlink in its place is refused (STATE_UNSAFE), never followed."""
    from gsd_research.core.private import flock

    return flock(path, blocking)
