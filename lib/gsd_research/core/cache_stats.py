"""Hit/miss counters of the HTTP cache, shared by every process using one GSD_RESEARCH_HOME."""

from __future__ import annotations

import json
import os
import time

from gsd_research.core.config import home


def stats_file():
    return home() / "cache" / "stats.json"


def read_cache_stats() -> dict:
    """Hit/miss counters of every process that used this home (zeros when none were recorded)."""
    try:
        data = json.loads(stats_file().read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return {k: data.get(k, 0) for k in ("hits", "misses", "refreshes")} | {"since": data.get("since")}
    except (OSError, ValueError, RecursionError):
        pass
    return {"hits": 0, "misses": 0, "refreshes": 0, "since": None}


def record_cache_event(kind: str, reset: bool = False) -> None:
    """Add one hit, miss or refresh to the counters file, under a lock so parallel calls add up."""
    try:
        path = stats_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(path.with_name("stats.lock")):
            data = {"hits": 0, "misses": 0, "refreshes": 0, "since": None} if reset else read_cache_stats()
            if kind:
                data[kind] = int(data.get(kind) or 0) + 1
            data["since"] = data.get("since") or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            tmp = path.with_name(f".stats.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, path)
    except OSError:  # statistics must never break a call
        pass


class exclusive_lock:
    """An exclusive advisory lock on a file, held for a `with` block (a no-op where fcntl does not exist)."""

    def __init__(self, path) -> None:
        self.path = path
        self.fd = None

    def __enter__(self):
        from gsd_research.core.private import open_private

        self.fd = open_private(self.path, os.O_RDWR | os.O_CREAT)
        try:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except ImportError:
            pass
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # closing releases the lock
