"""The background worker: one per home (flock), best job first, retries with backoff, crash recovery.

A job's life: pending → running → completed | failed | cancelled. The commit point of a run is the
assistant message written into conversation.json; a worker that finds one already there (its
predecessor died just after committing) only finishes the bookkeeping, so no job completes twice.
A job found `running` when a worker takes the lock lost its worker and is picked up again; its
async request id in status.json lets the new worker resume polling instead of paying twice.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from gsd_research.core.errors import GsdError
from gsd_research.deep import queue, result_cache
from gsd_research.deep.guard import check_budget
from gsd_research.deep.render import message_from
from gsd_research.deep.research import DeepResearch
from gsd_research.deep.settings import DeepSettings
from gsd_research.deep.store import JobStore, file_lock, now_iso, parse_iso, read_json, write_json

PERMANENT = frozenset({"USAGE_ERROR", "MISSING_API_KEY", "BUDGET_EXCEEDED"})


class JobCancelled(Exception):
    """The job was cancelled while it ran."""


def log(message: str) -> None:
    from gsd_research.core.secrets import scrub

    sys.stderr.write(scrub(f"{now_iso()} worker[{os.getpid()}] {message}") + "\n")
    sys.stderr.flush()


class Worker:
    """Drains the queue of one home while holding its worker lock."""

    def __init__(self, rt, settings: DeepSettings, *, once: bool = False, store: JobStore | None = None) -> None:
        self.rt = rt
        self.s = settings
        self.once = once
        self.store = store or JobStore()
        self.counts = {"completed": 0, "failed": 0, "retried": 0, "cancelled": 0, "recovered": 0}
        self._local = threading.local()
        self._counts_lock = threading.Lock()

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
                log("started")
                self.recover()
                self.drain()
            # A job enqueued while we were deciding to leave saw the lock held and started no worker.
            if not self.store.queued():
                break
        log(f"exiting {self.counts}")
        return {"ran": ran, **self.counts}

    def recover(self) -> None:
        """Jobs left `running` by a dead worker go back to pending (their remote request kept); enqueues cut
        short before the job was queued are failed (or removed when not even their status was written)."""
        self.fail_abandoned()
        for job, status in self.store.queued():
            if status.get("status") != "running":
                continue
            job_id = job["id"]
            with self.store.lock(job_id):
                self.store.sweep_temp_files(job_id)
                died = int(status.get("interruptions") or 0) + 1
                if died > self.s.max_interruptions:
                    err = {"code": "INTERNAL_ERROR", "message": f"The worker died {died} times running this job"}
                    self.store.finish(job_id, "failed", error=err, interruptions=died)
                    self.counts["failed"] += 1
                    continue
                self.store.update_status(job_id, status="pending", interruptions=died)
                self.counts["recovered"] += 1
                log(f"recovered {job_id} (interruption {died})")

    def fail_abandoned(self) -> None:
        for job_id in self.store.abandoned():
            path = self.store.dir(job_id)
            with self.store.lock(job_id):
                if (path / "job.json").exists():  # queued after all (a slow disk): leave it to the queue
                    continue
                if not (path / "status.json").exists():
                    shutil.rmtree(path, ignore_errors=True)
                    log(f"removed {job_id}: enqueue interrupted before its status was written")
                    continue
                err = {"code": "INTERNAL_ERROR",
                       "message": "The process queueing this job died before the job was queued; run the research again"}
                self.store.finish(job_id, "failed", error=err)
                self.counts["failed"] += 1
                log(f"failed {job_id}: enqueue interrupted")

    def drain(self) -> None:
        """Start ready jobs best first, up to deep.concurrency at a time, until the queue stays empty."""
        if self.s.concurrency > 1:
            _ = self.rt.http.session  # import the HTTP stack here: module imports race in threads
        with ThreadPoolExecutor(max_workers=self.s.concurrency, thread_name_prefix="deep-job") as pool:
            running: dict = {}
            idle_since = time.monotonic()
            while True:
                self._reap(running)
                jobs = [js for js in self.store.queued() if js[0]["id"] not in running]
                now = time.time()
                ready = [js for js in jobs if (parse_iso(js[1].get("retryAt")) or 0) <= now]
                while ready and len(running) < self.s.concurrency:
                    job, status = ready.pop(0)
                    started = self.start(job, status)
                    if started is not None:
                        running[job["id"]] = pool.submit(self.execute, job, started)
                if running:
                    wait(list(running.values()), timeout=self.s.poll_interval, return_when=FIRST_COMPLETED)
                    idle_since = time.monotonic()
                    continue
                if jobs:  # only jobs waiting out a backoff
                    wake = min(parse_iso(js[1].get("retryAt")) or now for js in jobs)
                    time.sleep(max(0.01, min(wake - now, self.s.poll_interval)))
                    idle_since = time.monotonic()
                    continue
                idle = time.monotonic() - idle_since
                if self.once or idle >= self.s.idle_exit:
                    return
                time.sleep(max(0.01, min(self.s.poll_interval, self.s.idle_exit - idle)))

    @staticmethod
    def _reap(running: dict) -> None:
        for job_id in [j for j, future in running.items() if future.done()]:
            exc = running.pop(job_id).exception()
            if exc is not None:  # bookkeeping itself failed (disk full…): the job stays queued
                log(f"job {job_id} crashed: {exc.__class__.__name__}: {exc}")

    # -- one job -------------------------------------------------------------------------------
    def process(self, job: dict, status: dict) -> None:
        """Run one job to its next state in this thread."""
        started = self.start(job, status)
        if started is not None:
            self.execute(job, started)

    def start(self, job: dict, status: dict) -> dict | None:
        """Mark a job running (None when there is nothing to run: finished, cancelled, or already committed)."""
        job_id = job["id"]
        with self.store.lock(job_id):
            status = read_json(self.store.dir(job_id) / "status.json") or status
            if status.get("status") in ("completed", "failed", "cancelled") or self.store.job(job_id) is None:
                return None
            answer = self.store.has_answer(job_id)
            if answer is not None:  # committed before a crash: finish the bookkeeping only
                self.store.finish(job_id, "completed", usage=answer.get("usage"), cost=answer.get("cost"), error=None)
                self.count("completed")
                return None
            status = self.store.update_status(job_id, durable=False, status="running", workerPid=os.getpid(),
                                              startedAt=status.get("startedAt") or now_iso(),
                                              attemptStartedAt=now_iso())
        log(f"running {job_id} (attempt {int(status.get('attempts') or 0) + 1}, priority {job.get('priority')})")
        return status

    def execute(self, job: dict, status: dict) -> None:
        job_id = job["id"]
        try:
            result = self.run(job, status)
        except JobCancelled:
            self.count("cancelled")
            log(f"cancelled {job_id}")
            return
        except GsdError as exc:
            self.failed(job_id, exc.code, exc.message, exc.retry_after)
            return
        except Exception as exc:  # noqa: BLE001 - a bug in one job must not kill the queue
            log("".join(traceback.format_exception(exc)))
            self.failed(job_id, "INTERNAL_ERROR", f"Unexpected {exc.__class__.__name__}: {str(exc)[:200]}")
            return
        self.completed(job_id, job, status, result)

    def run(self, job: dict, status: dict) -> dict:
        query, effort, model = job["query"], job.get("effort") or "medium", job.get("model") or self.s.model
        if not job.get("no_cache"):
            cached = result_cache.get(query, effort, model, self.rt.config.ttl("deep"))
            if cached is not None:
                return dict(cached, cache_hit=True)
        check_budget(self.s)
        job_id = job["id"]

        def check() -> None:
            current = read_json(self.store.dir(job_id) / "status.json") or {}
            if current.get("status") == "cancelled":
                raise JobCancelled(job_id)

        def on_remote(remote_id: str, api: str) -> None:
            with self.store.lock(job_id):
                check()
                self.store.update_status(job_id, durable=False, remoteId=remote_id, remoteApi=api)

        result = self.research.resumable(job, status, check=check, on_remote=on_remote)
        return self.research.priced(result)

    def completed(self, job_id: str, job: dict, status: dict, result: dict) -> None:
        cached = bool(result.get("cache_hit"))
        if not cached:
            self.research.record(result, "jobs worker", ref=f"{job_id}:{result.get('remote_id') or status.get('attempts')}")
        message = message_from(result)
        with self.store.lock(job_id):
            current = read_json(self.store.dir(job_id) / "status.json") or {}
            if current.get("status") == "cancelled":
                self.count("cancelled")
                return
            self.store.commit_answer(job_id, message)
            self.store.finish(job_id, "completed", usage=message["usage"], cost=message["cost"], error=None,
                              attempts=int(current.get("attempts") or 0) + 1)
        if not cached:
            result_cache.put(job["query"], job.get("effort") or "medium", job.get("model") or self.s.model, result)
        self.count("completed")
        log(f"completed {job_id}")

    def failed(self, job_id: str, code: str, message: str, retry_after: float | None = None) -> None:
        with self.store.lock(job_id):
            current = read_json(self.store.dir(job_id) / "status.json") or {}
            if current.get("status") == "cancelled":
                return
            attempts = int(current.get("attempts") or 0) + 1
            error = {"code": code, "message": message, "at": now_iso(), "attempt": attempts}
            history = list(current.get("errors") or [])[-9:] + [error]
            if attempts >= self.s.max_attempts or code in PERMANENT:
                self.store.finish(job_id, "failed", attempts=attempts, error=error, errors=history)
                self.count("failed")
                log(f"failed {job_id}: {code} after {attempts} attempt(s)")
                return
            retry_at = time.time() + max(self.s.backoff(attempts), float(retry_after or 0))
            self.store.update_status(job_id, status="pending", attempts=attempts, error=error, errors=history,
                                     remoteId=None, remoteApi=None,
                                     retryAt=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(retry_at))
                                     + f".{int(retry_at % 1 * 1000):03d}Z")
            self.count("retried")
            log(f"attempt {attempts} of {job_id} failed ({code}); retry after backoff")
