"""The queue's front door: enqueue a job and make sure one background worker is alive to run it.

Kept free of the HTTP stack so `deep --async` returns in a fraction of a second.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gsd_research.core.config import home
from gsd_research.deep.store import JobStore, file_lock, read_json

LOG_MAX_BYTES = 5_000_000
_SPAWNED: list = []  # keep Popen objects alive for the life of this process


def lock_path() -> Path:
    return home() / "jobs" / "worker.lock"


def info_path() -> Path:
    return home() / "jobs" / "worker.json"


def log_path() -> Path:
    return home() / "logs" / "worker.log"


def worker_alive() -> dict | None:
    """The live worker's record, or None. The worker holds an flock the kernel drops when it dies."""
    with file_lock(lock_path(), blocking=False) as free:
        if free:
            return None
    return read_json(info_path()) or {"pid": None}


def spawn_worker() -> int:
    """Start `jobs worker` detached: own session, stdio to the log under the home, outliving the caller."""
    import subprocess

    path = log_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size > LOG_MAX_BYTES:
            os.replace(path, path.with_suffix(".log.1"))  # keep one old log
    except OSError:
        pass
    from gsd_research.core.private import open_private

    with os.fdopen(open_private(path), "ab") as log:  # never through a planted symlink
        proc = subprocess.Popen(
            [sys.executable, "-m", "gsd_research", "jobs", "worker"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True, start_new_session=True,
            cwd=str(home()), env=dict(os.environ),
        )
    _SPAWNED.append(proc)
    return proc.pid


def ensure_worker(autostart: bool = True) -> dict:
    """{"running": bool, "pid": …, "started": bool}: start a worker when none is alive."""
    alive = worker_alive()
    if alive is not None:
        return {"running": True, "pid": alive.get("pid"), "started": False}
    if not autostart:
        return {"running": False, "pid": None, "started": False}
    return {"running": True, "pid": spawn_worker(), "started": True}


def worker_state(store: JobStore, autostart: bool) -> dict:
    """Whether the queue's worker runs, the one answer `jobs list`, `status` and `wait` give: {"running",
    "pid", "started", "needed"}. A worker is started when queued jobs wait for one (a killed runner's jobs
    resume); `needed` says jobs wait for one that is not running (deep.autostart is off)."""
    alive = worker_alive()
    if alive is not None:
        return {"running": True, "pid": alive.get("pid"), "started": False, "needed": False}
    if not store.claimable():
        return {"running": False, "pid": None, "started": False, "needed": False}
    return {**ensure_worker(autostart), "needed": not autostart}


def enqueue(query: str, params: dict, priority: int, *, autostart: bool = True,
            key: str | None = None) -> tuple[str, dict, dict]:
    """Queue a job (job.json written last) and then check for a worker; returns (id, status, worker).
    `key` lets a later call asking the same question attach to this job."""
    store = JobStore()
    job_id, status = store.create(query, params, priority=priority, enqueue=True, key=key)
    return job_id, status, ensure_worker(autostart)
