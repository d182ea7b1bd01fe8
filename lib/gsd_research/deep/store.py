"""The on-disk job store: conversation-logs/<id>/{conversation,status,job}.json, written atomically.

Every file is replaced in one rename (readers see the old or the new document, never half of one);
status transitions of one job happen under that job's lock; the enqueue sequence number that gives
FIFO order within a priority comes from a counter under a lock shared by every process of the home.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from pathlib import Path
from typing import Any

from gsd_research.core.config import home
from gsd_research.core.errors import JobNotFound, UsageError
from gsd_research.core.private import open_lock
from gsd_research.deep.files import (  # noqa: F401 - re-exported: the store's callers import them from here
    STATUSES,
    TERMINAL,
    TMP_SUFFIX,
    due_at,
    file_lock,
    new_id,
    now_iso,
    parse_iso,
    read_json,
    write_json,
)
from gsd_research.deep.records import Damaged, load

ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{2,80}\Z")
SEQ_WIDTH = 20


class RunLock:
    """The right to run one job: an flock on its `.run` file, held for as long as one process runs it.
    The kernel drops it when that process dies (kill -9 included), which is how others see an orphan."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class JobStore:
    """Conversation directories of one GSD_RESEARCH_HOME."""

    def __init__(self, root: Path | None = None) -> None:
        base = root or home()
        self.logs = base / "conversation-logs"
        self.control = base / "jobs"

    # -- paths and reading ---------------------------------------------------------------------
    def dir(self, job_id: str) -> Path:
        if not ID_PATTERN.match(job_id or ""):
            raise UsageError(f"'{job_id}' is not a job id", suggestions=["gsd-research jobs list"])
        return self.logs / job_id

    def existing_dir(self, job_id: str) -> Path:
        path = self.dir(job_id)
        if not (path / "status.json").is_file():
            raise JobNotFound(f"No deep research job '{job_id}'", suggestions=["gsd-research jobs list"])
        return path

    def status(self, job_id: str) -> dict:
        """The job's status document; JOB_NOT_FOUND naming the damage (and its fix) when it is unusable."""
        self.existing_dir(job_id)
        problem = self.problem(job_id)
        if problem:
            raise JobNotFound(f"Job '{job_id}' is damaged: {problem}", details={"conversation_id": job_id,
                                                                               "damaged": True},
                              suggestions=[f"rm -r {self.dir(job_id)}", "then run the research again",
                                           "gsd-research jobs list"])
        return self.read_status(job_id) or {"id": job_id, "status": "pending"}

    def _load(self, job_id: str, name: str) -> dict | None:
        """A job file validated (records.load); None when it is missing or damaged (`problem` says how)."""
        try:
            return load(self.logs / job_id, name)
        except Damaged:
            return None

    def read_status(self, job_id: str) -> dict | None:
        return self._load(job_id, "status.json")

    def problem(self, job_id: str) -> str | None:
        """What makes a job folder unusable, or None: a damaged status.json or job.json (named with the field),
        or a status nothing can ever finish. Such a folder is listed with its fix and never run."""
        folder = self.logs / job_id
        try:
            status = load(folder, "status.json")
            load(folder, "job.json")
        except Damaged as exc:
            return str(exc)
        if status is None:
            return "status.json is missing"
        return self.orphaned(job_id, status)

    def orphaned(self, job_id: str, status: dict, grace: float = 60.0) -> str | None:
        """Why a job nobody can ever run is stuck, or None: `running` (or `pending` for over `grace`
        seconds) with no job.json and no runner. A live enqueue writes job.json milliseconds after
        status.json; a job is `running` only while queued."""
        state = status.get("status")
        if state not in ("pending", "running") or (self.dir(job_id) / "job.json").exists():
            return None
        since = parse_iso(status.get("revivedAt") or status.get("createdAt")) or 0
        if state == "pending" and time.time() - since < grace:
            return None
        if self.held(job_id):
            return None
        if (self.dir(job_id) / "job.json").exists():  # queued in the meantime
            return None
        if (self.read_status(job_id) or {}).get("status") != state:  # finished meanwhile (status before job.json)
            return None
        return f"status.json says {state} but the job has no job.json: nothing can ever run it"

    def conversation(self, job_id: str) -> dict:
        return self._load(self.dir(job_id).name, "conversation.json") or {"id": job_id, "messages": []}

    def job(self, job_id: str) -> dict | None:
        return self._load(self.dir(job_id).name, "job.json")

    def ids(self) -> list[str]:
        """Every job id, newest first."""
        try:
            names = [p.name for p in self.logs.iterdir() if ID_PATTERN.match(p.name)]
        except FileNotFoundError:
            return []
        return sorted(names, reverse=True)

    def lock(self, job_id: str):
        return file_lock(self.dir(job_id) / ".lock")

    def claim(self, job_id: str) -> RunLock | None:
        """The job's run lock, or None when another process (worker or blocking call) runs it."""
        try:
            fd = open_lock(self.dir(job_id) / ".run")  # a planted symlink: STATE_UNSAFE
        except FileNotFoundError:  # the job folder is gone
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return RunLock(fd)

    def held(self, job_id: str) -> bool:
        """True while some process runs the job."""
        lock = self.claim(job_id)
        if lock is None:
            return True
        lock.release()
        return False

    def claimable(self) -> list[tuple[dict, dict]]:
        """Queued jobs nobody runs right now (what a worker could take)."""
        return [js for js in self.queued() if not self.held(js[0]["id"])]

    # -- the same question asked again ------------------------------------------------------------
    def _index_path(self, key: str) -> Path:
        return self.control / "by-question" / f"{key}.json"

    def lookup(self, key: str) -> str | None:
        """The id of the latest job that asked the question with this key (see result_cache.key)."""
        doc = read_json(self._index_path(key)) or {}
        job_id = str(doc.get("id") or "")
        return job_id if ID_PATTERN.match(job_id) else None

    def point(self, key: str, job_id: str, at: str) -> None:
        """Make `job_id` the job a later call asking the question with this key finds."""
        self._index_path(key).parent.mkdir(parents=True, exist_ok=True)
        write_json(self._index_path(key), {"id": job_id, "at": at}, durable=False)

    # -- enqueue -------------------------------------------------------------------------------
    def next_seq(self) -> int:
        """The next enqueue number of this home, strictly increasing across processes."""
        path = self.control / "seq"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = open_lock(path)  # it is written: never through a planted symlink
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, SEQ_WIDTH, 0).strip()
            current = int(raw) if raw.isdigit() else self._max_seq()
            value = current + 1
            os.pwrite(fd, str(value).rjust(SEQ_WIDTH).encode(), 0)
            return value
        finally:
            os.close(fd)

    def _max_seq(self) -> int:
        """The highest sequence number on disk (when the counter file is lost)."""
        best = 0
        for job_id in self.ids():
            st = self.read_status(job_id) or {}
            best = max(best, int(st.get("seq") or 0))
        return best

    def create(self, query: str, params: dict, *, priority: int = 0, enqueue: bool = True,
               answer: dict | None = None, mode: str | None = None, key: str | None = None) -> tuple[str, dict]:
        """A new conversation directory: conversation.json, status.json, then job.json (which queues it).

        With `answer` (a finished call served from the result cache) the conversation is written complete,
        never queued. With `key` the job is the one a later call asking the same question attaches to.
        """
        job_id, status, _ = self._create(query, params, priority, enqueue, answer, mode, key, claim=False)
        return job_id, status

    def create_claimed(self, query: str, params: dict, *, priority: int = 0, mode: str = "blocking",
                       key: str | None = None) -> tuple[str, dict, RunLock]:
        """A queued job that this process runs itself: its run lock is taken before any file exists,
        so no worker starts it, and a worker takes it over once this process dies."""
        job_id, status, lock = self._create(query, params, priority, True, None, mode, key, claim=True)
        assert lock is not None
        return job_id, status, lock

    def _allocate(self) -> str:
        for _ in range(10):
            job_id = new_id()
            try:
                (self.logs / job_id).mkdir()
                return job_id
            except FileExistsError:
                continue
        raise UsageError("Could not allocate a job id")  # pragma: no cover - 32 random bits colliding ten times

    def _create(self, query: str, params: dict, priority: int, enqueue: bool, answer: dict | None,
                mode: str | None, key: str | None, *, claim: bool) -> tuple[str, dict, RunLock | None]:
        enqueue = enqueue and answer is None
        self.logs.mkdir(parents=True, exist_ok=True)
        seq = self.next_seq() if enqueue else 0
        job_id = self._allocate()
        lock = self.claim(job_id) if claim else None
        created = now_iso()
        path = self.logs / job_id
        conversation = {"id": job_id, "createdAt": created, "model": params.get("model"),
                        "effort": params.get("effort"),
                        "messages": [{"role": "user", "content": query, "timestamp": created}]}
        status = {"id": job_id, "status": "pending", "attempts": 0, "interruptions": 0, "priority": priority,
                  "seq": seq, "createdAt": created, "updatedAt": created, "model": params.get("model"),
                  "effort": params.get("effort"), "query": query[:200], "error": None,
                  "mode": mode or ("async" if enqueue else "blocking")}
        if key:
            status["key"] = key
        if answer is not None:
            conversation["messages"].append(answer)
            conversation["completedAt"] = answer.get("timestamp")
            status.update(status="completed", attempts=1, startedAt=created, completedAt=answer.get("timestamp"),
                          usage=answer.get("usage"), cost=answer.get("cost"))
        write_json(path / "conversation.json", conversation)
        write_json(path / "status.json", status)
        if key:  # before job.json: once the job can run (and pay), the same question finds it
            self.point(key, job_id, created)
        if enqueue:
            write_json(path / "job.json", dict(params, id=job_id, query=query, priority=priority, seq=seq,
                                               createdAt=created))
        return job_id, status, lock

    # -- transitions ---------------------------------------------------------------------------
    def update_status(self, job_id: str, durable: bool = True, **changes: Any) -> dict:
        """Merge `changes` into status.json (caller holds the job lock)."""
        path = self.dir(job_id) / "status.json"
        status = self.read_status(job_id) or {"id": job_id}
        status.update(changes)
        status["updatedAt"] = now_iso()
        write_json(path, status, durable)
        return status

    def has_answer(self, job_id: str) -> dict | None:
        """The assistant message already committed to conversation.json, if any."""
        conv = self._load(self.dir(job_id).name, "conversation.json") or {}
        for msg in reversed(conv.get("messages") or []):
            if isinstance(msg, dict) and msg.get("role") == "assistant":
                return msg
        return None

    def commit_answer(self, job_id: str, message: dict) -> None:
        """Append the assistant message to conversation.json: the commit point of a job."""
        path = self.dir(job_id) / "conversation.json"
        conv = self._load(job_id, "conversation.json") or {"id": job_id, "messages": []}
        conv.setdefault("messages", []).append(message)
        conv["completedAt"] = message.get("timestamp")
        write_json(path, conv)

    def finish(self, job_id: str, status: str, **changes: Any) -> dict:
        """Write a terminal status, then remove job.json (caller holds the job lock)."""
        stamp = now_iso()
        key = {"completed": "completedAt", "failed": "failedAt", "cancelled": "cancelledAt"}[status]
        result = self.update_status(job_id, status=status, **{key: stamp}, **changes)
        with contextlib.suppress(FileNotFoundError):
            (self.dir(job_id) / "job.json").unlink()
        return result

    def discard(self, job_id: str) -> None:
        """Remove a job the provider took nothing for (a blocking call refused at once): no trace, as if it
        had never been asked (caller holds its run lock)."""
        import shutil

        status = self.read_status(self.dir(job_id).name) or {}
        key = status.get("key")
        if key and self.lookup(key) == job_id:
            with contextlib.suppress(OSError):
                self._index_path(key).unlink()
        shutil.rmtree(self.dir(job_id), ignore_errors=True)

    def queued(self) -> list[tuple[dict, dict]]:
        """(job, status) of every queued job, best first: higher priority, then lower seq (FIFO). A damaged
        folder is skipped (`jobs list` names it with its fix)."""
        out = []
        for job_id in self.ids():
            try:
                job = load(self.logs / job_id, "job.json")
                status = load(self.logs / job_id, "status.json") if job is not None else None
            except Damaged:
                continue
            if job is None:
                continue
            status = status or {"id": job_id, "status": "pending"}
            if status.get("status") in TERMINAL:  # a transition cut short: finish removing job.json
                with contextlib.suppress(FileNotFoundError):
                    (self.logs / job_id / "job.json").unlink()
                continue
            out.append((job, status))
        out.sort(key=lambda js: (-int(js[0].get("priority") or 0), int(js[0].get("seq") or 0), js[0]["id"]))
        return out

    def abandoned(self, older_than: float = 60.0) -> list[str]:
        """Async jobs whose enqueuing process died before job.json was written (an enqueue takes
        milliseconds): status `pending` with no job.json, or no status.json at all, older than `older_than`
        seconds. Nobody was given their id, and no worker would ever pick them up."""
        cutoff = time.time() - older_than
        out = []
        for job_id in self.ids():
            path = self.logs / job_id
            if (path / "job.json").exists():
                continue
            try:
                status = load(path, "status.json")
            except Damaged:  # listed as damaged with its fix, never failed in its place
                continue
            if status is None:
                with contextlib.suppress(OSError):
                    if not (path / "status.json").exists() and path.stat().st_mtime < cutoff:
                        out.append(job_id)
                continue
            created = parse_iso(status.get("revivedAt") or status.get("createdAt"))
            if (status.get("status") == "pending" and status.get("mode") in ("async", "blocking")
                    and created is not None and created < cutoff):
                out.append(job_id)
        return out

    def sweep_temp_files(self, job_id: str, older_than: float = 60.0) -> int:
        """Remove half-written temporary files a killed writer left behind."""
        removed = 0
        cutoff = time.time() - older_than
        for tmp in self.dir(job_id).glob(f".*{TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < cutoff:
                    tmp.unlink()
                    removed += 1
        return removed
