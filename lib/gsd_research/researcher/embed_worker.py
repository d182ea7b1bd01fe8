"""The detached embedding worker of one repository: index passes until nothing new arrived.

One per repository (an flock the kernel drops when the process dies). `researcher.api` writes documents
with their lexical rows and a fresh write token in the state record; a complete pass records the token it
started from, so `pending` is a comparison of two fields of one line. A failed pass is remembered for a
while (`embed.failed`), so a broken set-up (no embedding model offline) is not retried on every call; so
is a worker that died mid-pass (killed, or stopped by its CPU or memory limit): nothing restarts it in a
loop. Only a write schedules a worker; an index run of the repository stops a running one (`stop`) and
does its work itself, never waiting on it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path

RETRY_AFTER_FAILURE = 600  # seconds
LOG_MAX_BYTES = 2_000_000
CPU_SECONDS = 900  # a worker's CPU time at most (memory.embed_max_cpu_s); the kernel stops it there
MEMORY_MB = 3072  # its address space at most (memory.embed_max_mb): a failed allocation, not a swapping host
STOP_WAIT = 30.0  # seconds `stop` waits for a worker to be gone after SIGTERM
_SPAWNED: list = []  # keep Popen objects alive for the life of this process


def _dir(name: str) -> Path:
    """The repository's state folder (as researcher.api.repo_dir, which imports this module)."""
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


def running_pid(name: str) -> int | None:
    """The pid of the repository's running worker, or None (nothing created to find out)."""
    if not (_dir(name) / "embed.lock").exists() or not alive(name):
        return None
    try:
        pid = int((_dir(name) / "embed.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"gsd_research.researcher.embed_worker" in cmdline else None  # never another process's pid


def state(name: str) -> dict:
    """What `researcher status` says of the worker: pending writes, the running worker, the last failure."""
    out: dict = {"pending": pending(name), "worker_pid": running_pid(name)}
    if (failure := recent_failure(name)) is not None:
        out["last_failure"] = failure
    return out


def stop(name: str, wait: float = STOP_WAIT) -> bool:
    """Stop the repository's running worker (SIGTERM: its pass is left as a kill leaves it, for the caller's index
    run to finish); whether one was stopped."""
    import signal

    pid = running_pid(name)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    deadline = time.monotonic() + wait
    while alive(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    (_dir(name) / "embed.running").unlink(missing_ok=True)  # stopped on purpose: not a failure
    return True


def recent_failure(name: str) -> str | None:
    """The last failure while it is recent (no worker is started again before RETRY_AFTER_FAILURE), or None."""
    path = _dir(name) / "embed.failed"
    try:
        return path.read_text()[:300] if time.time() - path.stat().st_mtime < RETRY_AFTER_FAILURE else None
    except OSError:
        return None


def embed_now(name: str) -> dict:
    """Index passes in this process until nothing is pending (waits for a running worker first)."""
    result: dict = {}
    with _lock(name, blocking=True):
        while pending(name):
            result = run_once(name)
    return result


def run_once(name: str) -> dict:
    """One index pass in this process (under the lock); the index run records the write token it covered."""
    from gsd_research.researcher.service_factory import ServiceFactory

    factory = ServiceFactory()
    repo = factory.repository_service.get_repository(name)
    result = factory.index_service(repo).index_repository()
    (_dir(name) / "embed.failed").unlink(missing_ok=True)
    return result.model_dump(exclude={"errors"})


def serve(name: str) -> int:
    """Index passes while documents keep arriving; exits at once when another worker holds the lock. The
    `embed.running` mark lives while it works: found at the next spawn, it tells of a worker that died."""
    running = _dir(name) / "embed.running"
    while True:
        with _lock(name) as got:
            if not got:
                return 0
            _mark(_dir(name) / "embed.pid")
            _mark(running)
            while pending(name):
                try:
                    _log(f"pass {run_once(name)}")
                except Exception as exc:  # noqa: BLE001 - remembered, retried later, never a crash loop
                    why = f"{exc.__class__.__name__}: {str(exc)[:300]}"
                    (_dir(name) / "embed.failed").write_text(why)
                    _log(f"failed: {why}")
                    running.unlink(missing_ok=True)
                    return 1
            running.unlink(missing_ok=True)
        if not pending(name):  # nothing arrived between the last pass and the lock's release
            return 0


def _mark(path: Path) -> None:
    """This process's pid in `path` (private, never through a planted symlink)."""
    from gsd_research.core.private import open_private

    with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w") as fh:
        fh.write(str(os.getpid()))


def spawn(name: str) -> int | None:
    """Start `serve(name)` detached (own session, low priority, output to the log); None after a recent
    failure, or when the last worker died mid-pass (that counts as one)."""
    running = _dir(name) / "embed.running"
    if running.exists() and not alive(name):
        (_dir(name) / "embed.failed").write_text("the last worker died mid-pass (killed, or over its limits)")
        running.unlink(missing_ok=True)
    if recent_failure(name) is not None:
        return None
    from gsd_research.core.config import home

    log = home() / "logs" / "embed-worker.log"
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if log.stat().st_size > LOG_MAX_BYTES:
            os.replace(log, log.with_suffix(".log.1"))
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


def limit() -> None:
    """Bound this process: CPU time and address space (memory.embed_max_cpu_s, memory.embed_max_mb), no core
    file; the kernel enforces them, whatever the pass is doing."""
    import resource

    from gsd_research.core.config import Config

    config = Config()
    cpu = int(config.number("memory.embed_max_cpu_s", CPU_SECONDS))
    mem = int(config.number("memory.embed_max_mb", MEMORY_MB)) << 20
    for what, value in ((resource.RLIMIT_CPU, (cpu, cpu + 5)), (resource.RLIMIT_AS, (mem, mem)),
                        (resource.RLIMIT_CORE, (0, 0))):
        soft, hard = resource.getrlimit(what)
        if hard != resource.RLIM_INFINITY:
            value = (min(value[0], hard), min(value[1], hard))
        if value[0] > 0:
            resource.setrlimit(what, value)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m gsd_research.researcher.embed_worker REPOSITORY\n")
        return 2
    with contextlib.suppress(OSError):
        os.nice(10)  # background work: the agent's foreground commands come first
    limit()
    return serve(argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
