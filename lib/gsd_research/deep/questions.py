"""The same question asked again: one job per question, found or created atomically.

jobs/by-question/<key>.json names the latest job that asked the question with this key (see
result_cache.key); jobs/by-question/<key>.lock serialises every process asking it, so identical calls
made at once attach to one job and one payment. A job that failed or was cancelled while the request it
paid for may still finish at Perplexity is revived (resumed by its remote id) instead of buying the
question again.
"""

from __future__ import annotations

import contextlib
import time

from gsd_research.deep.perplexity import shown_id
from gsd_research.deep.store import JobStore, file_lock, now_iso, parse_iso, write_json

REVIVE_WINDOW = 86400.0  # seconds after it ended that a job's remote request is looked up again


@contextlib.contextmanager
def question_lock(store: JobStore, key: str):
    """Held while one process decides between attaching to the question's job and creating one."""
    with file_lock(store.control / "by-question" / f"{key}.lock"):
        yield


def revivable(status: dict) -> bool:
    """True when a job ended without a report while the request it sent may still answer: failed or
    cancelled, recently, with a remote id (resumed by it) or a Sonar idempotency key whose answer never
    came (re-sent under the same key: never paid twice), and not ended or forgotten by the provider."""
    if status.get("status") not in ("failed", "cancelled") or status.get("remoteDone"):
        return False
    if not status.get("remoteId") and not (status.get("submitKey") and not status.get("agentSubmittedAt")):
        return False
    ended = parse_iso(status.get("failedAt") or status.get("cancelledAt")) or 0
    return time.time() - ended <= REVIVE_WINDOW


def resume_hint(status: dict) -> str:
    """What asking the question again does for this ended job."""
    if not revivable(status):
        return "Ask again (a new, paid request)"
    if status.get("remoteId"):
        remote = shown_id(status["remoteId"])
        return f"Ask again to fetch the report of Perplexity request {remote or '(malformed id)'} (nothing is paid twice)"
    return "Ask again: its request is sent again under the same idempotency key (never paid twice)"


def find(store: JobStore, key: str, ttl: float, *, finished_too: bool, params: dict,
         mode: str) -> tuple[str, dict] | None:
    """The job already asking this question (call it under `question_lock`): queued or running; completed
    within `ttl` seconds with its report readable (with `finished_too`); or ended without a report while
    its paid remote request may still answer (revived: queued again to resume it). None: create one."""
    job_id = store.lookup(key)
    # job.json before status.json: a job finishing in between (status written, then job.json removed) is
    # seen completed, never as a queued job without its job.json (which made a second job and paid twice)
    job = store.job(job_id) if job_id else None
    status = store.read_status(job_id) if job_id else None
    if status is None or status.get("key") != key:
        return None
    state = status.get("status")
    if state in ("pending", "running") and job is not None:
        return job_id, status
    if state == "completed" and finished_too and store.has_answer(job_id) is not None:
        if time.time() - (parse_iso(status.get("completedAt")) or 0) <= ttl:
            return job_id, status
    if revivable(status):
        revived = revive(store, job_id, params, mode)
        if revived is not None:
            return job_id, revived
    return None


def revive(store: JobStore, job_id: str, params: dict, mode: str) -> dict | None:
    """Queue an ended job again to resume its remote request: status `pending` with fresh attempts (its
    remote id, API and idempotency key kept), then job.json. None when it changed in the meantime."""
    with store.lock(job_id):
        path = store.dir(job_id)
        status = store.read_status(job_id) or {}
        if not revivable(status):
            return None
        messages = store.conversation(job_id).get("messages") or [{}]
        query = str((messages[0] if isinstance(messages[0], dict) else {}).get("content") or status.get("query"))
        seq = store.next_seq()
        now = now_iso()
        history = list(status.get("errors") or [])
        updated = store.update_status(
            job_id, status="pending", attempts=0, error=None, retryAt=None, providerRetryAt=None, failedAt=None,
            cancelledAt=None,
            revivals=int(status.get("revivals") or 0) + 1, revivedAt=now, mode=mode, seq=seq, errors=history)
        job = dict(params, id=job_id, query=query, priority=int(status.get("priority") or 0), seq=seq, createdAt=now,
                   effort=status.get("effort") or params.get("effort"), model=status.get("model") or params.get("model"))
        write_json(path / "job.json", job)
    return updated

