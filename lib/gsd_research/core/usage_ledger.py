"""An append-only usage ledger under GSD_RESEARCH_HOME: one JSON line per paid provider call.

Any command may call `record(...)`; `summarize(...)` totals spend and tokens per provider and day.
Lines are appended under an exclusive lock in one write, so concurrent writers never interleave;
a line left unreadable by a crash is skipped. An entry whose `ref` is already in the ledger is not
written again (checked under the same lock: a write retried after a crash stays one line), and
entries carrying the same `ref` count once anyway.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from gsd_research.core.config import home


def ledger_path() -> Path:
    return home() / "usage" / "ledger.jsonl"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def record(provider: str, model: str | None, tokens_in: int, tokens_out: int, cost: float, command: str, *,
           cost_source: str = "api", ref: str | None = None, extra: dict | None = None,
           when: datetime | None = None) -> dict:
    """Append one call to the ledger and return the entry (keys never reach it); with a `ref` already
    recorded nothing is written."""
    import fcntl

    from gsd_research.core.secrets import scrub

    stamp = (when or _now()).astimezone(timezone.utc)
    entry: dict[str, Any] = {
        "ts": stamp.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "day": stamp.date().isoformat(),
        "provider": provider,
        "model": model,
        "command": command,
        "tokens_in": int(tokens_in or 0),
        "tokens_out": int(tokens_out or 0),
        "cost_usd": round(float(cost or 0.0), 6),
        "cost_source": cost_source,
    }
    if ref:
        entry["ref"] = ref
    if extra:
        entry.update({k: v for k, v in extra.items() if k not in entry})
    line = scrub(json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)) + "\n"
    path = ledger_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    from gsd_research.core.private import open_private

    fd = open_private(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)  # never through a planted symlink
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if ref and _holds(fd, scrub(json.dumps({"ref": ref}, ensure_ascii=False, separators=(",", ":")))[1:-1]):
            return entry
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)  # closing releases the lock
    return entry


def _holds(fd: int, fragment: str) -> bool:
    """True when the ledger open at `fd` already has a line with this exact `"ref":"…"` fragment."""
    needle = fragment.encode("utf-8")
    size = os.fstat(fd).st_size
    chunk, offset, tail = 1 << 20, 0, b""
    while offset < size:
        data = tail + os.pread(fd, chunk, offset)
        if needle in data:
            return True
        offset += chunk
        tail = data[-len(needle):]
    return False


def entries(since: date | None = None, path: Path | None = None) -> Iterator[dict]:
    """Ledger entries in order (from `since`, a UTC day, on), unreadable lines and repeated refs skipped."""
    path = path or ledger_path()
    if not path.is_file():
        return
    seen: set[str] = set()
    low = since.isoformat() if since else ""
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                entry = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if not isinstance(entry, dict) or str(entry.get("day", "")) < low:
                continue
            ref = entry.get("ref")
            if ref:
                if ref in seen:
                    continue
                seen.add(ref)
            yield entry


def _bucket() -> dict:
    return {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0}


def _add(bucket: dict, entry: dict) -> None:
    bucket["calls"] += 1
    bucket["tokens_in"] += int(entry.get("tokens_in") or 0)
    bucket["tokens_out"] += int(entry.get("tokens_out") or 0)
    bucket["cost_usd"] += float(entry.get("cost_usd") or 0.0)


def _rounded(bucket: dict) -> dict:
    return dict(bucket, cost_usd=round(bucket["cost_usd"], 6))


def summarize(since: date | None = None, path: Path | None = None) -> dict:
    """Totals overall, per provider and per day (newest day first)."""
    total, providers, days = _bucket(), {}, {}
    estimated = 0
    for entry in entries(since, path):
        provider = str(entry.get("provider") or "unknown")
        day = str(entry.get("day") or "unknown")
        _add(total, entry)
        _add(providers.setdefault(provider, _bucket()), entry)
        day_bucket = days.setdefault(day, dict(_bucket(), providers={}))
        _add(day_bucket, entry)
        _add(day_bucket["providers"].setdefault(provider, _bucket()), entry)
        estimated += entry.get("cost_source") != "api"
    return {
        "totals": dict(_rounded(total), estimated_calls=estimated),
        "providers": [{"provider": p, **_rounded(b)} for p, b in sorted(providers.items())],
        "days": [{"date": d, **_rounded(b), "providers": {p: _rounded(x) for p, x in sorted(b["providers"].items())}}
                 for d, b in sorted(days.items(), reverse=True)],
    }


def spent_on(day: date | None = None, provider: str | None = None) -> float:
    """Dollars recorded on one UTC day (today by default), optionally for one provider."""
    day = day or _now().date()
    total = 0.0
    for entry in entries(day):
        if entry.get("day") == day.isoformat() and (provider is None or entry.get("provider") == provider):
            total += float(entry.get("cost_usd") or 0.0)
    return round(total, 6)
