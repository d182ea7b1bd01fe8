"""The detached embedding worker of one repository: index passes until nothing new arrived.

One per repository (an flock the kernel drops when the process dies). `researcher.api` writes documents
with their lexical rows and a fresh write token in the state record; a complete pass records the token it
started from, so `pending` is a comparison of two fields of one line. A failed pass is remembered for a
while (`embed.failed`), so a broken set-up (no embedding model offline) is not retried on every call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

RETRY_AFTER_FAILURE = 600  # seconds
LOG_MAX_BYTES = 2_000_000
_SPAWNED: list = []  # keep Popen objects alive for the life of this process


def _dir(name: str) -> Path:
    """The repository's state folder (as researcher.api.repo_dir)."""
    from gsd_research.core.config import home

    return home() / "repositories" / name


def _lock(name: str, blocking: bool = False):
    """The worker's exclusive flock; yields False at once when another process holds it (not blocking). A
    symlink planted at the lock path is refused, never followed."""
    from gsd_research.core.private import flock

    return flock(_dir(name) / "embed.lock", blocking)


def alive(name: str) -> bool:
    with _lock(name) as free:
        return not free


def pending(name: str) -> bool:
    from gsd_research.researcher.state import StateGateway

    head = StateGateway(_dir(name)).head()
    return bool(head and head.writes_pending)


def failed_recently(name: str) -> bool:
    try:
        return time.time() - (_dir(name) / "embed.failed").stat().st_mtime < RETRY_AFTER_FAILURE
    except OSError:
        return False


def embed_now(name: str) -> dict:
    """Index passes in this process until nothing is pending (waits for a running worker first)."""
    result: dict = {}
    with _lock(name, blocking=True):
        while pending(name):
            result = run_once(name)
    return result


def run_once(name: str) -> dict:
    """One index pass of repository `name` in this process (under the lock); the index run records the token it
    covered."""
    from gsd_research.researcher.service_factory import ServiceFactory

    factory = ServiceFactory()
    repo = factory.repository_service.get_repository(name)
    result = factory.index_service(repo).index_repository()
    (_dir(name) / "embed.failed").unlink(missing_ok=True)
    return result.model_dump(exclude={"errors"})


def serve(name: str) -> int:
    """Index passes while documents keep arriving; exits at once when another worker holds the lock."""
    while True:
        with _lock(name) as got:
            if not got:
                return 0
            while pending(name):
                try:
                    _log(f"pass {run_once(name)}")
                except Exception as exc:  # noqa: BLE001 - remembered, retried later, never a crash loop
                    (_dir(name) / "embed.failed").write_text(f"{exc.__class__.__name__}: {str(exc)[:300]}")
                    _log(f"failed: {exc.__class__.__name__}: {str(exc)[:300]}")
                    return 1
        if not pending(name):  # nothing arrived between the last pass and the lock's release
            return 0


def spawn(name: str) -> int | None:
    """Start `serve(name)` detached (own session, low priority, output to the log); None after a recent
    failure."""
    if failed_recently(name):
        return None
    from gsd_research.core.config import home

    log = home() / "logs" / "embed-worker.log"
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        if log.stat().st_size > LOG_MAX_BYTES:
            os.replace(log, log.with_suffix(".log.1"))
    except OSError:
        pass
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gsd_research.researcher.embed_worker", name],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, close_fds=True,
                                start_new_session=True, cwd=str(home()), env=dict(os.environ))
    _SPAWNED.append(proc)
    return proc.pid


def _log(message: str) -> None:
    from gsd_research.core.secrets import scrub

    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    sys.stderr.write(scrub(f"{stamp} embed-worker[{os.getpid()}] {message}") + "\n")
    sys.stderr.flush()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m gsd_research.researcher.embed_worker REPOSITORY\n")
        return 2
    try:
        os.nice(10)  # background work: the agent's foreground commands come first
    except OSError:
        pass
    return serve(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
