"""Blocking `deep`: a foreground wait on the same persisted, crash-safe job `--async` queues.

The call creates the job (or attaches to the one already asking the same question), takes its run lock
and runs its attempt itself; the idempotency key and then the remote id are in status.json before any
waiting. Killed with SIGTERM (the Bash tool's timeout), it hands the job back to the queue and starts
the background worker; killed with kill -9, its run lock dies with it and the next `jobs list|status|
wait` or the same `deep` call takes the job over. Either way the request already paid for is resumed,
never bought again. A job another process runs is waited on, and taken over if that process dies.
"""

from __future__ import annotations

import signal
import time

from gsd_research.core.errors import CallInterrupted, GsdError, JobRunning, TimeoutError_
from gsd_research.deep.perplexity import shown_id
from gsd_research.deep.signals import NOTHING_SENT, Interrupted, deferred_signals
from gsd_research.deep.store import TERMINAL, JobStore, due_at
from gsd_research.deep.worker import Worker

WAIT_STEP = 0.25  # seconds between looks at a job another process runs


def attempt_here(rt, settings, store: JobStore, job_id: str, lock, until: float, *, stop_at: float | None,
                 discard_untaken: bool = False, command: str = "deep") -> tuple[str, object] | None:
    """One attempt of a queued job in this process, holding its run `lock` (always released): (state,
    value) as `Worker.execute` gives them, or None when there was nothing to run: finished, or waiting out
    a backoff that ends after the monotonic `until` (left to the worker)."""
    job = store.job(job_id)
    status = store.read_status(job_id) or {}
    retry_at = due_at(status, settings.retry_backoff_max, caller_waits=command == "deep")
    if job is None or time.time() + max(0.0, until - time.monotonic()) < retry_at:
        lock.release()
        return None
    time.sleep(max(0.0, retry_at - time.time()))
    worker = Worker(rt, settings, once=True, store=store, command=command)
    started = worker.start(job, status, lock=lock)
    if started is None:
        return None
    return worker.execute(job, *started, stop_at=stop_at, discard_untaken=discard_untaken)


class Foreground:
    """Runs or waits on one job for a blocking caller, within its wait (`--timeout`, else the job's own
    attempt timeout). The wait never shortens the job's attempts: when it ends first, the attempt is
    handed over to the background and goes on with its own deadline."""

    def __init__(self, rt, ctx: dict, render) -> None:
        self.rt, self.ctx, self.render = rt, ctx, render
        self.s = ctx["settings"]
        self.store = JobStore()
        self.job_id: str | None = None
        self.lock = None
        self.wait = float(ctx.get("wait") or ctx["timeout"])
        self.until = time.monotonic() + self.wait

    def run(self, find_or_create) -> dict:
        """`find_or_create()` gives (created, job id, status, run lock); it runs with interrupts deferred,
        so an interrupt always knows whether a job exists. SIGTERM raises Interrupted (the caller runs
        this under `signals.sigterm_interrupts`)."""
        try:
            with deferred_signals():
                created, self.job_id, status, self.lock = find_or_create()
            if status.get("status") == "completed":
                return self._finished(status, created)
            if not created:
                self.lock = self.store.claim(self.job_id)
            return self._run(created)
        except Interrupted:
            return self._interrupted(signal.SIGTERM)
        except KeyboardInterrupt:
            return self._interrupted(signal.SIGINT)

    def _run(self, created: bool) -> dict:
        while True:
            if self.lock is not None:
                outcome = self._attempt(self.lock, created)
                if outcome is not None:
                    return outcome
            status = self.store.status(self.job_id)
            if status.get("status") in TERMINAL:
                return self._finished(status, created)
            if time.monotonic() >= self.until:
                raise self._still_running(status, "the wait ended")
            time.sleep(min(WAIT_STEP, max(0.0, self.until - time.monotonic())))
            self.lock = self.store.claim(self.job_id)  # its runner died: take the job over

    def _attempt(self, lock, created: bool) -> dict | None:
        """One attempt in this process; None when there was nothing to run (the caller looks at the status)."""
        # The caller's own --timeout (or an attached caller's wait) ends the wait, not the attempt.
        stop_at = self.until if self.ctx.get("wait") or not created else None
        ran = attempt_here(self.rt, self.s, self.store, self.job_id, lock, self.until, stop_at=stop_at,
                           discard_untaken=created, command="deep")
        if ran is None:
            return None
        state, value = ran
        if state in ("completed", "failed"):
            return self._finished(self.store.status(self.job_id), created)
        if state == "cancelled":
            return None  # the status says cancelled: _finished reports it
        if state == "handed_over":
            raise self._still_running(self.store.status(self.job_id), "the wait ended")
        raise self._error(value, state)

    # -- answers and errors ----------------------------------------------------------------------
    def _finished(self, status: dict, created: bool) -> dict:
        state = status.get("status")
        if state == "completed":
            message = self.store.has_answer(self.job_id)
            if message is not None:
                meta = {} if created else {"attached_to_job": self.job_id}
                return self.render(self.job_id, message, meta)
        from gsd_research.deep.render import terminal_error

        raise terminal_error(self.store, self.job_id, status)

    def _error(self, exc: GsdError, state: str) -> GsdError:
        """The attempt's own error, saying what became of the job."""
        if state == "discarded":
            return exc
        if state == "ended":
            exc.details.update(conversation_id=self.job_id)
            exc.message += (". Perplexity gave no request id, so nothing waits in the background: asking the same "
                            "question again retries at once (under the same idempotency key: never paid twice)")
            return exc
        exc.details.update(conversation_id=self.job_id)
        exc.message += f". The job keeps its request and retries in the background ({self._where()})"
        exc.suggestions = [f"gsd-research jobs wait {self.job_id} --timeout 100",
                           f"gsd-research jobs cancel {self.job_id}", *exc.suggestions]
        if isinstance(exc, TimeoutError_):
            exc.suggestions = [*exc.suggestions[:2], *TIMEOUT_TIPS]
        return exc

    def _still_running(self, status: dict, why: str) -> TimeoutError_:
        return TimeoutError_(
            f"Deep research job {self.job_id} is still {status.get('status')} after {self.wait:g} s "
            f"({why}); its request is kept ({self._where()})",
            suggestions=[f"gsd-research jobs wait {self.job_id} --timeout 100", *TIMEOUT_TIPS],
            details={"conversation_id": self.job_id, "status": status.get("status"),
                     "attempts": status.get("attempts", 0), "remote_id": shown_id(status.get("remoteId"))})

    def _interrupted(self, signum: int) -> dict:
        if self.lock is not None:
            self.lock.release()  # (already released when the attempt had started)
        if self.job_id is None:
            raise CallInterrupted(signum, NOTHING_SENT)
        status = self.store.read_status(self.job_id) or {}
        if status.get("status") in TERMINAL:  # the report, or why there is none
            return self._finished(status, created=True)
        raise JobRunning(
            f"Interrupted: deep research job {self.job_id} goes on in the background ({self._where()}); "
            "its request is kept, nothing is paid twice",
            suggestions=[f"gsd-research jobs wait {self.job_id} --timeout 100"],
            details={"conversation_id": self.job_id, "status": status.get("status"),
                     "remote_id": shown_id(status.get("remoteId"))})

    def _where(self) -> str:
        """Who finishes the job now: another process, the background worker (started if needed), or nobody."""
        from gsd_research.deep.queue import ensure_worker

        if self.store.held(self.job_id):
            return "another process runs it"
        if ensure_worker(self.s.autostart)["running"]:
            return "the background worker runs it"
        return "no worker runs (deep.autostart is off): run gsd-research jobs worker"


TIMEOUT_TIPS = ["For long questions use deep --async, then gsd-research jobs wait ID",
                "Or wait longer: --timeout SECONDS (default deep.timeout / PERPLEXITY_POLLING_TIMEOUT_MS, 600 s)"]
