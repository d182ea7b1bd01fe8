"""`gsd-research jobs list|status|result|wait|cancel|worker`: the deep research job queue."""

from __future__ import annotations

import time

import click

from gsd_research.core.errors import JobRunning
from gsd_research.core.runtime import Runtime, agent_command
from gsd_research.deep.render import quoted, terminal_error
from gsd_research.deep.settings import load
from gsd_research.deep.store import STATUSES, TERMINAL, JobStore

STATUS_KEYS = ("status", "attempts", "priority", "effort", "model", "query", "createdAt", "startedAt", "completedAt",
               "failedAt", "cancelledAt", "retryAt", "error", "errors", "interruptions", "cost", "usage")
SUBCOMMANDS = "list, status ID, result ID, wait ID, cancel ID, worker"


class JobsGroup(click.Group):
    """`jobs` names itself in the envelope and answers a missing subcommand with a usage error."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.ensure_object(Runtime).command = "jobs"
        if not args:
            raise click.UsageError(f"jobs needs a subcommand: {SUBCOMMANDS}", ctx)
        return super().parse_args(ctx, args)


@click.group("jobs", cls=JobsGroup)
def jobs():
    """List, inspect, wait for and cancel deep research jobs; run the worker."""


def _worker(rt, store: JobStore) -> dict:
    from gsd_research.deep.queue import worker_state

    return worker_state(store, load(rt.config).autostart)


def _status_view(job_id: str, status: dict) -> dict:
    view = {"conversation_id": job_id}
    view.update({k: status[k] for k in STATUS_KEYS if status.get(k) not in (None, "", [], {})})
    return view


@agent_command("list")
@click.option("--status", "only", type=click.Choice((*STATUSES, "damaged")), default=None,
              help="Only jobs in this state.")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
def list_jobs(rt, only: str | None, limit: int):
    """Jobs newest first, with counts per status and the worker's state; damaged jobs with their fix."""
    from gsd_research.core.output import document_tokens

    store = JobStore()
    rows, counts = [], dict.fromkeys((*STATUSES, "damaged"), 0)
    for job_id in store.ids():
        row = _list_row(store, job_id)
        if row is None:
            continue
        counts[row["status"]] = counts.get(row["status"], 0) + 1
        if (only is None or row["status"] == only) and len(rows) < limit:
            rows.append(row)
    rows.sort(key=lambda r: (str(r.get("createdAt") or ""), r["conversation_id"]), reverse=True)
    doc = {"jobs": rows, "counts": counts, "worker": _worker(rt, store),
           "metadata": {"returned": len(rows), "total_available": sum(counts.values()) if only is None
                        else counts.get(only, 0), "max_tokens": rt.max_tokens, "truncated": False,
                        "tokens_used": rt.max_tokens}}  # counted at its widest: the real figure is never longer
    while document_tokens(doc) > rt.max_tokens and doc["jobs"]:
        doc["jobs"].pop()
        doc["metadata"].update(returned=len(doc["jobs"]), truncated=True)
    doc["metadata"]["tokens_used"] = document_tokens(doc)
    return doc


def _list_row(store: JobStore, job_id: str) -> dict | None:
    """One job's row; a damaged job (a job file that is not valid, nothing able to run it) says so and how
    to fix it. None for a folder still being created (no status.json, under a minute old)."""
    folder = store.logs / job_id
    problem = store.problem(job_id)
    status = store.read_status(job_id) if problem is None else None
    if status is not None:
        row = {k: status.get(k) for k in ("status", "priority", "effort", "attempts", "createdAt") if k in status}
        return {"conversation_id": job_id, **row, "query": str(status.get("query") or "")[:120]}
    try:
        age = time.time() - folder.stat().st_mtime
    except OSError:
        return None
    if not (folder / "status.json").exists() and age < 60:
        return None
    return {"conversation_id": job_id, "status": "damaged", **damaged_fix(store, job_id, problem)}


def damaged_fix(store: JobStore, job_id: str, problem: str) -> dict:
    """The query, problem and fix of a damaged job."""
    folder = store.logs / job_id
    messages = store.conversation(job_id).get("messages") or [{}]
    query = str(messages[0].get("content") or "")
    again = f"gsd-research deep {quoted({'query': query})} --async" if query else "run the research again"
    return {"query": query[:120], "problem": problem, "fix": f"rm -r {folder} ; then {again}"}


@agent_command("status")
@click.argument("job_id")
def job_status(rt, job_id: str):
    """The state of one job: attempts, errors, timestamps, queue position."""
    store = JobStore()
    status = store.status(job_id)
    doc = _status_view(job_id, status)
    if status.get("status") not in TERMINAL:
        queued = [job["id"] for job, _ in store.queued()]
        if job_id in queued:
            doc["position"] = queued.index(job_id) + 1
        doc["worker"] = _worker(rt, store)
        doc["in_progress"] = store.held(job_id)  # a process (the worker, a blocking call) runs it now
        doc["next"] = f"gsd-research jobs wait {job_id} --timeout 100"
    elif status.get("status") == "completed":
        doc["next"] = f"gsd-research jobs result {job_id}"
    return doc


def _result(rt, store: JobStore, job_id: str, status: dict) -> dict:
    from gsd_research.deep.render import answer_payload

    state = status.get("status")
    message = store.has_answer(job_id) if state == "completed" else None
    if message is not None:
        messages = store.conversation(job_id).get("messages") or [{}]
        query = str(messages[0].get("content") or status.get("query") or "")
        return answer_payload(query, job_id, message, rt.max_tokens,
                              extra_meta={"effort": status.get("effort"), "attempts": status.get("attempts")})
    if state in TERMINAL:
        raise terminal_error(store, job_id, status)
    doc = _status_view(job_id, status)
    doc.update(ready=False, next=f"gsd-research jobs wait {job_id} --timeout 100")
    return doc


@agent_command("result")
@click.argument("job_id")
def job_result(rt, job_id: str):
    """The report of a completed job (or its state while it runs; its error when it failed)."""
    store = JobStore()
    return _result(rt, store, job_id, store.status(job_id))


WAIT_HELP = """Wait for a job to finish and return its report.

\b
Outcomes, by exit status and error.code (never by message text):
  exit 0                           completed: the report is in the answer
  exit 6, error.code JOB_RUNNING   still running: run the same jobs wait again
  exit 5, error.code JOB_FAILED    failed for good: the cause is in error.message and
                                   error.details (cause, attempts, remote_id); stop
  exit 1, error.code JOB_CANCELLED cancelled: stop
"""


@agent_command("wait", help=WAIT_HELP)
@click.argument("job_id")
@click.option("--timeout", type=click.FloatRange(min=0), default=100.0, show_default=True,
              help="Seconds to wait (keep it under the Bash tool's timeout; run wait again after).")
def job_wait(rt, job_id: str, timeout: float):
    store = JobStore()
    settings = load(rt.config)
    interval = max(0.02, min(0.5, settings.poll_interval))
    deadline = time.monotonic() + timeout
    next_revive = 0.0
    while True:
        status = store.status(job_id)
        if status.get("status") in TERMINAL:
            return _result(rt, store, job_id, status)
        if time.monotonic() >= next_revive:
            worker = _worker(rt, store)
            next_revive = time.monotonic() + 5.0
            if worker["needed"]:  # deep.autostart is off and no worker runs
                _run_here(rt, settings, store, job_id, deadline)
                continue
        if time.monotonic() >= deadline:
            raise _still_running(store, job_id, status, timeout, worker)
        time.sleep(interval)


def _run_here(rt, settings, store: JobStore, job_id: str, deadline: float) -> None:
    """Run the job's attempt in this process until the wait ends (nothing else would run it)."""
    from gsd_research.deep.foreground import attempt_here
    from gsd_research.deep.signals import Interrupted, sigterm_interrupts

    lock = store.claim(job_id)
    if lock is None:
        return
    try:
        with sigterm_interrupts():
            attempt_here(rt, settings, store, job_id, lock, deadline, stop_at=deadline, command="jobs wait")
    except (Interrupted, KeyboardInterrupt):
        raise JobRunning(f"Interrupted: job {job_id} is queued again with its request kept; wait on it again",
                         suggestions=[f"gsd-research jobs wait {job_id} --timeout 100"],
                         details={"conversation_id": job_id}) from None


def _still_running(store: JobStore, job_id: str, status: dict, timeout: float, worker: dict) -> JobRunning:
    message = f"Job {job_id} is still {status.get('status')} after {timeout:g} s: wait again"
    details = {"conversation_id": job_id, "status": status.get("status"), "attempts": status.get("attempts", 0)}
    suggestions = [f"gsd-research jobs wait {job_id} --timeout 100"]
    if worker["needed"] and not store.held(job_id):
        message += (" (no worker runs the queue: deep.autostart is off, so the job advances only while "
                    "jobs wait runs it; start one with: gsd-research jobs worker)")
        details["worker"] = worker
        suggestions.append("gsd-research jobs worker")
    return JobRunning(message, suggestions=suggestions, details=details)


@agent_command("cancel")
@click.argument("job_id")
def job_cancel(rt, job_id: str):
    """Cancel a pending or running job (a running request's answer is discarded)."""
    store = JobStore()
    store.status(job_id)
    with store.lock(job_id):
        status = store.read_status(job_id) or {}
        before = status.get("status")
        if before in TERMINAL:
            return {"conversation_id": job_id, "cancelled": False, "status": before,
                    "note": f"The job is already {before}"}
        store.finish(job_id, "cancelled")
    from gsd_research.deep.accounting import record_unreported

    record_unreported(rt.config, job_id, status, "jobs cancel", "cancelled")  # its accepted request was paid
    return {"conversation_id": job_id, "cancelled": True, "status": "cancelled", "was": before}


@agent_command("worker")
@click.option("--once", is_flag=True, help="Exit as soon as the queue is empty instead of idling.")
def job_worker(rt, once: bool):
    """Run the queue's worker in the foreground (normally started in the background by deep --async)."""
    from gsd_research.deep.queue import worker_alive
    from gsd_research.deep.worker import Worker

    settings = load(rt.config)
    summary = Worker(rt, settings, once=once).serve()
    if not summary.pop("ran"):
        alive = worker_alive() or {}
        return {"worker": "already running", "pid": alive.get("pid"), "processed": 0}
    return {"worker": "finished", **summary}


for _cmd in (list_jobs, job_status, job_result, job_wait, job_cancel, job_worker):
    jobs.add_command(_cmd)
