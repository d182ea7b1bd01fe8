"""The resident search process: what a `researcher search` call and the process it talks to share.

A single-query search from a fresh process pays for importing chromadb and onnxruntime and loading the
embedding model (about a second) before a 10 ms search. After such a call the command starts one resident
process per GSD_RESEARCH_HOME (`resident_server`) that keeps all of that loaded and answers later searches
over a Unix socket in GSD_RESEARCH_HOME/run (0700, owner only); it exits after GSD_RESEARCH_RESIDENT_IDLE
seconds without a request (default 300; 0 turns the resident process off), when the code, the configuration
or an index it has read changes, and never answers for another environment. Anything unexpected on either
side makes the call search in its own process, as it always could; so does a resident process that does not
answer within a few seconds (stopped, hung) or whose socket was removed, which that call then stops (after
checking that the process holds this home's lock) so that the next search starts a fresh one. A process still
starting (its lock held, its search time not yet written: no socket yet) is left alone unless it has been
starting for longer than START_GRACE.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple

IDLE_ENV = "GSD_RESEARCH_RESIDENT_IDLE"
DEFAULT_IDLE = 300.0
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes
PROTOCOL = 4  # 2: requests carry max_tokens; 3: and the session, whose ledger changes come back; 4: no "v"
CONNECT_TIMEOUT = 1.0  # seconds; a listening process accepts at once (the kernel does, even a stopped one)
REPLY_MIN, REPLY_MAX, REPLY_DEFAULT = 2.0, 8.0, 5.0  # bounds of the wait for an answer (seconds)
REPLY_MARGIN = 20  # times the resident process's own measured search time
START_GRACE = 60.0  # seconds a resident process may spend loading and warming up before it counts as hung
# What changes the answer besides the request and the code: these variables.
CONTEXT_ENV = ("HOME", "GSD_RESEARCH_HOME", "GSD_RESEARCH_EMBEDDING_PRECISION")


def idle_seconds() -> float:
    """How long the resident process waits for a request before it exits; 0 means: never start it."""
    try:
        return max(0.0, float(os.environ.get(IDLE_ENV, DEFAULT_IDLE)))
    except ValueError:
        return DEFAULT_IDLE


def run_dir() -> Path:
    from gsd_research.core.config import home

    return home() / "run"


def socket_path() -> Path | None:
    """The socket's path, or None when it would not fit in a Unix socket address."""
    path = run_dir() / "search.sock"
    return path if len(os.fsencode(str(path))) <= MAX_SOCKET_PATH else None


def stamp(path) -> tuple[int, int, int] | None:
    """What changes when the file at `path` is written or replaced."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def context_key() -> str:
    """Identifies what the answer depends on outside the request: interpreter, protocol, environment and where
    the code is (the resident process watches the files of the code it loaded). The homes are compared by their
    real paths (a trailing slash or a symlink is the same home)."""
    from gsd_research.core.config import home

    real = {"HOME": os.path.realpath(Path.home()), "GSD_RESEARCH_HOME": os.path.realpath(home())}
    parts = [sys.executable, str(PROTOCOL), str(Path(__file__).resolve().parent)]
    parts += [f"{k}={real.get(k, os.environ.get(k, ''))}" for k in CONTEXT_ENV]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def index_stamp(repo_dir: Path) -> tuple:
    """What changes when a repository is re-indexed (checked by the resident process before each answer):
    every write to the stores happens between the state record naming documents in flight and its commit.
    Not the stores' own files: Chroma writes to its SQLite file whenever a process opens the store, and
    SQLite's write-ahead log is folded into the lexical index whenever its last connection closes.
    Chroma's database counts only by which file it is and whether it is empty: deleted, replaced or truncated
    by hand, the process would go on reading the file it opened."""
    from gsd_research.researcher.state import RECORD, VECTOR_DB, VECTORS

    try:
        st = (repo_dir / VECTORS / VECTOR_DB).stat()
        store = (st.st_dev, st.st_ino, st.st_size > 0)
    except OSError:
        store = None
    return stamp(repo_dir / RECORD), store


def config_stamp() -> tuple:
    from gsd_research.core.config import home

    return stamp(home() / "researcher.yaml"), stamp(home() / "config.yaml")


class Holder(NamedTuple):
    """The process holding this home's lock, as its lock file says."""

    pid: int
    took: float | None  # its measured search time, written once it listens; None while it starts
    since: float  # when the lock file was last written (wall clock)


def _holder() -> Holder | None:
    """The process holding this home's lock, if any."""
    import fcntl

    try:
        fd = os.open(run_dir() / "search.lock", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # nobody holds the lock
    except OSError:
        fields = os.read(fd, 64).decode("ascii", "replace").split()
        since = os.fstat(fd).st_mtime
    finally:
        os.close(fd)
    if not fields or not fields[0].isdigit():
        return None
    try:
        took = float(fields[1]) if len(fields) > 1 else None
    except ValueError:
        took = None
    return Holder(int(fields[0]), took, since)


def pid() -> int | None:
    """The process id of this home's resident search process, if one is running."""
    holder = _holder()
    return holder[0] if holder else None


def reply_timeout(request: dict, measured: float | None) -> float:
    """How long to wait for the answer: the resident process's own search time (measured when it started)
    times a margin, more for more results, within [REPLY_MIN, REPLY_MAX]."""
    if measured is None:
        return REPLY_DEFAULT
    size = 1 + ((request.get("n_fragments") or 0) + (request.get("n_documents") or 0)) / 50
    return min(REPLY_MAX, max(REPLY_MIN, measured * REPLY_MARGIN * size))


def ask(request: dict, timeout: float | None = None) -> dict | None:
    """The resident process's answer to a search request ({"ok": payload}), or None when there is no
    resident process, it declines (another environment, a changed index) or anything goes wrong. A
    resident process that does not answer in time, or whose socket was removed, is stopped (`retire`), so the
    caller's `spawn` replaces it; one still starting has no socket yet and is left to finish."""
    import json
    import socket

    path = socket_path()
    if path is None or idle_seconds() == 0:
        return None
    holder = _holder()
    if holder is None:
        return None  # nobody serves this home (a socket file alone is a leftover)
    if holder.took is None:  # starting: no socket until it is warm
        if time.time() - holder.since > START_GRACE:
            retire(holder.pid, "hung while starting")
        return None
    wait = timeout if timeout is not None else reply_timeout(request, holder.took)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(min(CONNECT_TIMEOUT, wait))
            sock.connect(str(path))
            sock.settimeout(wait)
            sock.sendall(json.dumps({**request, "key": context_key()}).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := sock.recv(1 << 16):
                data += chunk
    except TimeoutError:  # hung: it can never answer again
        retire(holder.pid, "no answer in time")
        return None
    except FileNotFoundError:  # it listened, then its socket was removed: nobody can reach it again
        retire(holder.pid, "socket removed")
        return None
    except OSError:
        return None
    try:
        answer = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return answer if isinstance(answer, dict) and isinstance(answer.get("ok"), dict) else None


def holds_lock(process: int) -> bool:
    """Whether `process` is ours (same user) and has this home's lock file open (Linux: /proc)."""
    try:
        lock = os.stat(run_dir() / "search.lock", follow_symlinks=False)
        if os.stat(f"/proc/{process}").st_uid != os.getuid():
            return False
        fds = os.listdir(f"/proc/{process}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            st = os.stat(f"/proc/{process}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == (lock.st_dev, lock.st_ino):
            return True
    return False


_RETIRED: list[int] = []  # the process this call stopped: the fresh one waits for its lock


def retire(process: int, reason: str) -> None:
    """Stop a resident process that cannot answer (SIGKILL: a stopped process ignores the rest), only if it is
    still this home's lock holder and ours; logged with `reason`."""
    import signal

    from gsd_research.researcher import log

    stopped = process != os.getpid() and pid() == process and holds_lock(process)
    if stopped:
        try:
            os.kill(process, signal.SIGKILL)
        except OSError:
            return
        _RETIRED.append(process)
    log.event("resident.unanswered", pid=process, stopped=stopped, reason=reason)


def spawn() -> None:
    """Start the resident process in the background (it exits at once if one is already running)."""
    import subprocess

    if socket_path() is None or idle_seconds() == 0:
        return
    try:
        after = [f"--after={_RETIRED[-1]}"] if _RETIRED else []
        subprocess.Popen([sys.executable, "-m", "gsd_research.researcher.resident_server", *after],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        pass
