"""The resident search process: what a `researcher search` call and the process it talks to share.

A single-query search from a fresh process pays for importing chromadb and onnxruntime and loading the
embedding model (about a second) before a 10 ms search. After such a call the command starts one resident
process per GSD_RESEARCH_HOME (`resident_server`) that keeps all of that loaded and answers later searches
over a Unix socket in GSD_RESEARCH_HOME/run (0700, owner only); it exits after GSD_RESEARCH_RESIDENT_IDLE
seconds without a request (default 300; 0 turns the resident process off), when the code, the configuration
or an index it has read changes, and never answers for another environment. Anything unexpected on either
side makes the call search in its own process, as it always could.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

IDLE_ENV = "GSD_RESEARCH_RESIDENT_IDLE"
DEFAULT_IDLE = 300.0
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes
PROTOCOL = 1
# What changes the answer besides the request: these variables, the interpreter and the code below.
CONTEXT_ENV = ("HOME", "GSD_RESEARCH_HOME", "GSD_RESEARCH_EMBEDDING_PRECISION")
CODE = ("resident.py", "resident_server.py", "search_cmd.py", "service_factory.py", "config.py", "models.py",
        "chunking.py", "services/search_service.py", "gateways/embedding_gateway.py", "gateways/int8_model.py",
        "gateways/chroma_gateway.py", "gateways/lexical_gateway.py")


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


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def context_key() -> str:
    """Identifies what the answer depends on outside the request: interpreter, environment and code."""
    here = Path(__file__).resolve().parent
    parts = [sys.executable, str(PROTOCOL)] + [f"{k}={os.environ.get(k, '')}" for k in CONTEXT_ENV]
    parts += [f"{name}:{_stat(here / name)}" for name in CODE]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def index_stamp(repo_dir: Path) -> tuple:
    """What changes when a repository is re-indexed (checked by the resident process before each answer):
    every write to the stores happens between `journal.json` appearing and `checksums.json` being rewritten.
    Not the stores' own files: Chroma writes to its SQLite file whenever a process opens the store, and
    SQLite's write-ahead log is folded into the lexical index whenever its last connection closes."""
    names = ("checksums.json", "meta.json", "journal.json")
    return tuple(_stat(repo_dir / name) for name in names)


def config_stamp() -> tuple:
    from gsd_research.core.config import home

    return _stat(home() / "researcher.yaml"), _stat(home() / "config.yaml")


def pid() -> int | None:
    """The process id of this home's resident search process, if one is running."""
    import fcntl

    try:
        fd = os.open(run_dir() / "search.lock", os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None  # nobody holds the lock
    except OSError:
        text = os.read(fd, 32).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    finally:
        os.close(fd)


def ask(request: dict, timeout: float = 120.0) -> dict | None:
    """The resident process's answer to a search request ({"ok": payload}), or None when there is no
    resident process, it declines (another environment, a changed index) or anything goes wrong."""
    import json
    import socket

    path = socket_path()
    if path is None or idle_seconds() == 0:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            sock.sendall(json.dumps({**request, "v": PROTOCOL, "key": context_key()}).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            data = b""
            while chunk := sock.recv(1 << 16):
                data += chunk
    except OSError:
        return None
    try:
        answer = json.loads(data)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) and isinstance(answer.get("ok"), dict) else None


def spawn() -> None:
    """Start the resident process in the background (it exits at once if one is already running)."""
    import subprocess

    if socket_path() is None or idle_seconds() == 0:
        return
    try:
        subprocess.Popen([sys.executable, "-m", "gsd_research.researcher.resident_server"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, close_fds=True)
    except OSError:
        pass
