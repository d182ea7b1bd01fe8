"""One writer per repository index: an advisory lock (flock) on `index.lock`, and private state files.

The lock is the kernel's: it goes away with the process that held it (kill -9 included), so it is never
stale. The holder writes who it is into the file; a second writer waits for it (saying so on stderr) and,
after `wait` seconds, fails naming the holder. While the lock is held, files are created private (umask
077); on release the repository's state folder is tightened to 0700/0600 whatever a library created.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from gsd_research.core.errors import Locked
from gsd_research.core.private import open_private

LOCK_NAME = "index.lock"
WAIT_SECONDS = 300.0
POLL_SECONDS = 0.2


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) readable by the owner only."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def tighten(root: Path) -> None:
    """Folders 0700, files 0600 under `root` (Chroma and SQLite create theirs with the process umask)."""
    for folder, _, files in os.walk(root):
        _chmod(folder, 0o700)
        for name in files:
            _chmod(os.path.join(folder, name), 0o600)


def _chmod(path: str, mode: int) -> None:
    try:
        if not os.path.islink(path):
            os.chmod(path, mode)
    except OSError:  # a file removed meanwhile (SQLite's -shm, Chroma's temporary files)
        pass


class RepositoryLock:
    """The lock of one repository's state folder (`repositories/<name>/`)."""

    def __init__(self, repo_dir: Path, label: str = "researcher") -> None:
        self.repo_dir, self.label = Path(repo_dir), label
        self.path = self.repo_dir / LOCK_NAME

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it (best effort)."""
        try:
            info = json.loads(self.path.read_text(encoding="utf-8"))
            return f"pid {info['pid']} ({info['label']}, since {info['since']})"
        except (OSError, ValueError, KeyError, TypeError):
            return "another process"

    def busy(self) -> bool:
        """Whether an index run holds the lock now (a read: no file is created, none is locked for long)."""
        import fcntl  # not on a search's path while no run is in flight

        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            return isinstance(exc, BlockingIOError)
        finally:
            os.close(fd)
        return False

    @contextmanager
    def hold(self, wait: float | None = None) -> Iterator[None]:
        """The lock, waited for up to `wait` seconds (WAIT_SECONDS when None)."""
        private_dir(self.repo_dir.parent)
        private_dir(self.repo_dir)
        old_umask = os.umask(0o077)
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)  # never through a planted symlink (ftruncate below)
        try:
            self._acquire(fd, WAIT_SECONDS if wait is None else wait)
            since = datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps({"pid": os.getpid(), "label": self.label, "since": since}).encode(), 0)
            try:
                yield
            finally:
                tighten(self.repo_dir)
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # releases the lock
            os.umask(old_umask)

    def _acquire(self, fd: int, wait: float) -> None:
        import fcntl

        deadline = time.monotonic() + max(0.0, wait)
        for attempt in itertools.count():
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                holder = self.holder()
            if time.monotonic() >= deadline:
                raise Locked(f"The index of '{self.repo_dir.name}' is being written by {holder}",
                             suggestions=["Run the command again when it has finished",
                                          "Or wait longer: researcher index NAME --wait SECONDS"])
            if not attempt:
                print(f"researcher: waiting for the index of '{self.repo_dir.name}', held by {holder} "
                      f"(up to {wait:.0f}s)", file=sys.stderr, flush=True)
            time.sleep(POLL_SECONDS)
