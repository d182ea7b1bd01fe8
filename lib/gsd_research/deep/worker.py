"""The background worker: one per home (flock), best job first, retries with backoff, crash recovery.

A job's life: pending → running → completed | failed | cancelled. Whoever runs a job (this worker, or
a blocking `deep` call in the foreground) holds its run lock (`JobStore.claim`); a job found `running`
with a free run lock lost its runner and is picked up again, resuming its remote request by the id in
status.json instead of paying twice. The commit point of a run is the assistant message written into
conversation.json; a runner that finds one already there only finishes the bookkeeping.

Retries never buy the same question twice: a retry resumes the remote request (its id, or its
idempotency key when the submit's answer was lost); only a run the provider itself ended (failed,
unknown) is submitted anew, and an Agent API submit that may have been taken (no idempotency key
exists there) is never sent again: the job fails saying so.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from gsd_research.core.errors import GsdError, InternalError, TimeoutError_
from gsd_research.deep import accounting, failures, joblog, queue, result_cache
from gsd_research.deep.guard import check_budget
from gsd_research.deep.perplexity import RemoteRunFailed
from gsd_research.deep.render import message_from
from gsd_research.deep.research import DeepResearch
from gsd_research.deep.settings import DeepSettings
from gsd_research.deep.signals import Interrupted
from gsd_research.deep.store import JobStore, RunLock, due_at, file_lock, now_iso, write_json


class JobCancelled(Exception):
    """The job was cancelled while it ran."""


class HandOver(Exception):  # noqa: N818 - an outcome, not an error
    """A blocking caller stops waiting before the attempt's own deadline: the job goes on without it."""


class JobHooks:
    """What an attempt persists as it goes: the idempotency key before a paid submit, the remote id after."""

    def __init__(self, store: JobStore, job: dict, mode: str, stop_at: float | None = None) -> None:
        self.store, self.job, self.mode, self.stop_at = store, job, mode, stop_at
        self.job_id = job["id"]

    def check(self) -> None:
        current = self.store.read_status(self.job_id) or {}
        if current.get("status") == "cancelled":
            raise JobCancelled(self.job_id)
        if self.stop_at is not None and time.monotonic() >= self.stop_at:
            raise HandOver(self.job_id)

    def submitting(self, key: str | None, api: str) -> None:
        with self.store.lock(self.job_id):
            self.check()
            if key:
                self.store.update_status(self.job_id, submitKey=key)
            else:
                self.store.update_status(self.job_id, agentSubmittedAt=now_iso())

    def remote(self, remote_id: str, api: str) -> None:
        with self.store.lock(self.job_id):
            self.store.update_status(self.job_id, remoteId=remote_id, remoteApi=api)

    def warn(self, started: float, timeout: float) -> None:
        used = time.monotonic() - started
        joblog.warn(f"deep research job {self.job_id} nears its timeout: {used:.0f} s of {timeout:g} s used",
                    conversation_id=self.job_id, mode=self.mode)


def log(message: str) -> None:
    from gsd_research.core.secrets import scrub

    sys.stderr.write(scrub(f"{now_iso()} worker[{os.getpid()}] {message}") + "\n")
    sys.stderr.flush()


class Worker:
    """Drains the queue of one home while holding its worker lock."""

    def __init__(self, rt, settings: DeepSettings, *, once: bool = False, store: JobStore | None = None,
                 command: str = "jobs worker") -> None:
        self.rt = rt
        self.quiet = command != "jobs worker"  # a blocking call keeps stderr for warnings
        self.s = settings
        self.once = once
        self.store = store or JobStore()
        self.command = command
        self.counts = {"completed": 0, "failed": 0, "retried": 0, "cancelled": 0, "recovered": 0}
        self._local = threading.local()
        self._counts_lock = threading.Lock()

    def log(self, message: str) -> None:
        if not self.quiet:
            log(message)

    @property
    def research(self) -> DeepResearch:
        """This thread's client: each thread gets its own HTTP session (sessions are not thread-safe)."""
        research = getattr(self._local, "research", None)
        if research is None:
            http = None
            if threading.current_thread() is not threading.main_thread():
                from gsd_research.core.http import HttpClient

                http = HttpClient(self.rt.config, no_cache=self.rt.no_cache)
            research = self._local.research = DeepResearch(self.rt, self.s, http=http)
        return research

    def count(self, key: str) -> None:
        with self._counts_lock:
            self.counts[key] += 1

    # -- lifecycle -----------------------------------------------------------------------------
    def serve(self) -> dict:
        """Run until the queue stays empty; returns what was done. Exits at once if a worker is alive."""
        ran = False
        while True:
            with file_lock(queue.lock_path(), blocking=False) as got:
                if not got:
                    break
                ran = True
                write_json(queue.info_path(), {"pid": os.getpid(), "startedAt": now_iso()})
                self.log("started")
                self.recover()
                self.drain()
            # A job enqueued while we were deciding to leave saw the lock held and started no worker.
            if not self.store.claimable():
                break
        self.log(f"exiting {self.counts}")
        return {"ran": ran, **self.counts}

    def recover(self) -> None:
        """Enqueues cut short before the job was queued are failed (or removed when not even their status
        was written). Jobs left `running` by a dead runner are taken over by `start` (free run lock)."""
        self.fail_abandoned()

    def fail_abandoned(self) -> None:
        for job_id in self.store.abandoned():
            path = self.store.dir(job_id)
            with self.store.lock(job_id):
                if (path / "job.json").exists():  # queued after all (a slow disk): leave it to the queue
                    continue
                if not (path / "status.json").exists():
                    shutil.rmtree(path, ignore_errors=True)
                    self.log(f"removed {job_id}: enqueue interrupted before its status was written")
                    continue
                err = {"code": InternalError.code,
                       "message": "The process queueing this job died before the job was queued; run the research again"}
                self.store.finish(job_id, "failed", error=err)
                self.counts["failed"] += 1
                self.log(f"failed {job_id}: enqueue interrupted")

    def drain(self) -> None:
        """Start ready jobs best first, up to deep.concurrency at a time, until the queue stays empty.
        Jobs another process runs (a blocking call in the foreground) are left to it."""
        if self.s.concurrency > 1:
            _ = self.rt.http.session  # import the HTTP stack here: module imports race in threads
        with ThreadPoolExecutor(max_workers=self.s.concurrency, thread_name_prefix="deep-job") as pool:
            running: dict = {}
            idle_since = time.monotonic()
            while True:
                self._reap(running)
                jobs = [js for js in self.store.queued() if js[0]["id"] not in running]
                now, cap = time.time(), self.s.retry_backoff_max
                later = [due_at(js[1], cap) for js in jobs if due_at(js[1], cap) > now]
                for job, status in (js for js in jobs if due_at(js[1], cap) <= now):
                    if len(running) >= self.s.concurrency:
                        break
                    started = self.start(job, status)
                    if started is not None:
                        running[job["id"]] = pool.submit(self.execute, job, *started)
                if running:
                    wait(list(running.values()), timeout=self.s.poll_interval, return_when=FIRST_COMPLETED)
                    idle_since = time.monotonic()
                    continue
                if later:  # jobs waiting out a backoff
                    time.sleep(max(0.01, min(min(later) - now, self.s.poll_interval)))
                    idle_since = time.monotonic()
                    continue
                idle = time.monotonic() - idle_since
                if self.once or idle >= self.s.idle_exit:
                    return
                time.sleep(max(0.01, min(self.s.poll_interval, self.s.idle_exit - idle)))

    def _reap(self, running: dict) -> None:
        for job_id in [j for j, future in running.items() if future.done()]:
            exc = running.pop(job_id).exception()
            if exc is not None:  # bookkeeping itself failed (disk full…): the job stays queued
                self.log(f"job {job_id} crashed: {exc.__class__.__name__}: {exc}")

    # -- one job -------------------------------------------------------------------------------
    def process(self, job: dict, status: dict) -> None:
        """Run one job to its next state in this thread."""
        started = self.start(job, status)
        if started is not None:
            self.execute(job, *started)

    def start(self, job: dict, status: dict, lock: RunLock | None = None) -> tuple[dict, RunLock] | None:
        """Claim a job and mark it running: (status, run lock), or None when there is nothing to run
        (another process runs it; finished, cancelled, or already committed)."""
        job_id = job["id"]
        lock = lock or self.store.claim(job_id)
        if lock is None:
            return None
        try:
            with self.store.lock(job_id):
                self.store.sweep_temp_files(job_id)  # left by a killed runner
                status = self._begin(job, self.store.read_status(job_id) or status)
        except BaseException:
            lock.release()
            raise
        if status is None:
            lock.release()
            return None
        self.log(f"running {job_id} (attempt {int(status.get('attempts') or 0) + 1}, priority {job.get('priority')})")
        return status, lock

    def _begin(self, job: dict, status: dict) -> dict | None:
        job_id = job["id"]
        if status.get("status") in ("completed", "failed", "cancelled") or self.store.job(job_id) is None:
            return None
        answer = self.store.has_answer(job_id)
        if answer is not None:  # committed before a crash: finish the bookkeeping only
            self._account(job_id, status, answer)
            self.store.finish(job_id, "completed", usage=answer.get("usage"), cost=answer.get("cost"), error=None,
                              ledgerRecorded=True)
            self.count("completed")
            return None
        changes = {"status": "running", "workerPid": os.getpid(), "startedAt": status.get("startedAt") or now_iso(),
                   "attemptStartedAt": now_iso()}
        if status.get("status") == "running":  # its runner died mid-attempt
            died = int(status.get("interruptions") or 0) + 1
            if died > self.s.max_interruptions:
                err = {"code": InternalError.code, "message": f"The job's runner died {died} times running it"}
                self.store.finish(job_id, "failed", error=err, interruptions=died)
                accounting.record_unreported(self.rt.config, job_id, status, self.command, "runner died")
                self.count("failed")
                return None
            changes["interruptions"] = died
            self.count("recovered")
            self.log(f"recovered {job_id} (interruption {died})")
        return self.store.update_status(job_id, durable=False, **changes)

    def execute(self, job: dict, status: dict, lock: RunLock, *, stop_at: float | None = None,
                discard_untaken: bool = False) -> tuple[str, object]:
        """Run one attempt of a claimed job and record its outcome; releases the run lock.

        Returns (state, value): ("completed", result), ("pending" | "failed" | "ended" | "discarded", error),
        ("cancelled", None) or ("handed_over", None). `stop_at` and `discard_untaken` serve a blocking
        caller: stop waiting then (the job goes on without it), and remove a job it created when the
        provider certainly took nothing."""
        mode = "blocking" if discard_untaken or stop_at is not None else str(status.get("mode") or "async")
        try:
            state, value = self._attempt(job, status, JobHooks(self.store, job, mode, stop_at), discard_untaken)
            if state == "completed":  # committed while the run lock is still held
                self.completed(job["id"], job, value)
            return state, value
        finally:
            lock.release()

    def _attempt(self, job: dict, status: dict, hooks: JobHooks, discard_untaken: bool) -> tuple[str, object]:
        job_id, started = job["id"], time.monotonic()
        try:
            try:
                return "completed", self.run(job, status, hooks, hooks.stop_at)
            except TimeoutError_ as exc:
                if hooks.stop_at is None or time.monotonic() < hooks.stop_at:
                    raise
                raise HandOver(job_id) from exc
        except JobCancelled:
            self.unreported(job_id, "cancelled")
            self.count("cancelled")
            self.log(f"cancelled {job_id}")
            return "cancelled", None
        except HandOver:
            self.interrupted(job_id, count=False)
            return "handed_over", None
        except (Interrupted, KeyboardInterrupt):
            self.interrupted(job_id)
            raise
        except GsdError as exc:
            joblog.failure(job, self.store.read_status(job_id) or status, exc, mode=hooks.mode,
                           elapsed=time.monotonic() - started)
            if discard_untaken and self._untaken(job_id, exc):
                self.store.discard(job_id)
                return "discarded", exc
            return self.failed(job_id, exc), exc
        except Exception as exc:  # noqa: BLE001 - a bug in one job must not kill the queue
            self.log("".join(traceback.format_exception(exc)))
            joblog.event("internal_error", conversation_id=job_id, trace="".join(traceback.format_exception(exc)))
            err = InternalError(f"Unexpected {exc.__class__.__name__}: {str(exc)[:200]}")
            return self.failed(job_id, err), err

    def run(self, job: dict, status: dict, hooks: JobHooks, stop_at: float | None = None) -> dict:
        query, effort, model = job["query"], job.get("effort") or "medium", job.get("model") or self.s.model
        if not job.get("no_cache"):
            cached = result_cache.get(query, effort, model, self.rt.config.ttl("deep"))
            if cached is not None:
                return dict(cached, cache_hit=True)
        if not accounting.may_be_taken(status):  # resuming a request the provider may hold spends nothing more
            check_budget(self.s, self.research.table, effort, model, job["id"])
        return self.research.priced(self.research.resumable(job, status, hooks, stop_at))

    def _untaken(self, job_id: str, exc: GsdError) -> bool:
        """True when the provider certainly took nothing for this job (no remote id, a clear refusal)."""
        status = self.store.read_status(job_id) or {}
        return not status.get("remoteId") and not exc.details.get("maybe_accepted") and not isinstance(
            exc, RemoteRunFailed)

    def _account(self, job_id: str, status: dict, message: dict) -> None:
        """The ledger line of a committed answer (once: its ref is the job and its remote request)."""
        if message.get("cacheHit") or status.get("ledgerRecorded"):
            return
        result = dict(message, cost=message.get("cost") or {"usd": 0.0, "source": "unknown"})
        self.research.record(result, self.command, ref=f"{job_id}:{status.get('remoteId') or status.get('attempts')}")

    def completed(self, job_id: str, job: dict, result: dict) -> None:
        message = message_from(result)
        with self.store.lock(job_id):
            current = self.store.read_status(job_id) or {}
            if current.get("status") == "cancelled":  # paid for all the same: its ledger line, real cost
                self._account(job_id, current, message)
                self.count("cancelled")
                return
            self.store.commit_answer(job_id, message)  # the commit point
            self._account(job_id, current, message)
            self.store.finish(job_id, "completed", usage=message["usage"], cost=message["cost"], error=None,
                              attempts=int(current.get("attempts") or 0) + 1, ledgerRecorded=True)
        if not result.get("cache_hit"):
            result_cache.put(job["query"], job.get("effort") or "medium", job.get("model") or self.s.model, result,
                             conversation_id=job_id)
        self.count("completed")
        self.log(f"completed {job_id}")
        from gsd_research.memory.api import record_deep

        record_deep(self.rt.config, query=job["query"], job_id=job_id, message=message).finish()

    def interrupted(self, job_id: str, count: bool = True) -> None:
        """The runner stops mid-attempt (SIGTERM, or a blocking caller stops waiting): back to the queue
        with its remote request, for the next runner to resume."""
        with self.store.lock(job_id):
            current = self.store.read_status(job_id) or {}
            if current.get("status") != "running":
                return
            changes = {"status": "pending"}
            if count:
                changes["interruptions"] = int(current.get("interruptions") or 0) + 1
            self.store.update_status(job_id, **changes)
        self.log(f"{job_id} handed over to the queue")

    def failed(self, job_id: str, exc: GsdError) -> str:
        """Record a failed attempt: retried after a backoff ("pending") or finally "failed"."""
        state = failures.record(self.store, self.s, self.rt.config, job_id, exc, self.command)
        if state in ("failed", "ended"):
            self.count("failed")
            self.log(f"failed {job_id}: {exc.code}")
        elif state == "pending":
            self.count("retried")
            self.log(f"attempt of {job_id} failed ({exc.code}); retry after backoff")
        return state

    def unreported(self, job_id: str, reason: str) -> None:
        """The ledger line of the job's accepted request that ends without a report (written once)."""
        status = self.store.read_status(job_id) or {}
        accounting.record_unreported(self.rt.config, job_id, status, self.command, reason)
