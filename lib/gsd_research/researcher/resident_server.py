"""The resident search process (see `resident`): the model and the stores loaded once, searches over a socket.

Connections are read concurrently (each within READ_TIMEOUT: an idle client delays nobody) and answered one
at a time. Before each answer the process checks that nothing it depends on changed: the configuration,
the indexes it has read, the source of every gsd_research module it has loaded, and the installed heavy
packages (their dist-info folders: an upgrade replaces them); on a change it declines and exits.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import threading
import time

from gsd_research.researcher import resident

MAX_REQUEST = 1 << 16  # a search request is a few hundred bytes
READ_TIMEOUT = 2.0  # seconds for a client to send its whole request
POLL = 0.5  # seconds between idle checks of the accept loop
PACKAGES = ("chromadb", "onnxruntime", "tokenizers", "numpy")


def code_stamps() -> dict[str, tuple | None]:
    """The files this process's answers depend on: every loaded gsd_research module and the dist-info
    folders of the heavy packages it imported."""
    import sys
    from importlib import metadata

    files = [getattr(module, "__file__", None) for name, module in list(sys.modules.items())
             if name == "gsd_research" or name.startswith("gsd_research.")]
    for package in PACKAGES:
        try:
            files.append(getattr(metadata.distribution(package), "_path", None))
        except metadata.PackageNotFoundError:
            continue
    return {str(path): resident.stamp(path) for path in files if path}


class Server:
    """Answers search requests with `search_cmd.run_one`, exactly as the calling process would."""

    def __init__(self) -> None:
        from gsd_research.researcher.cli import KbContext

        self.key = resident.context_key()
        self.config = resident.config_stamp()
        self.kb = KbContext(json=True, command="search")
        self.stamps: dict[str, tuple] = {}
        self.code: dict[str, tuple | None] = {}
        self.searching = threading.Lock()
        self.stop = threading.Event()
        self.counting = threading.Lock()  # guards `active` and `last`
        self.active = 0
        self.last = time.monotonic()
        self.lock: int | None = None  # this home's lock (held), released before the last answer
        self.path, self.inode = None, 0

    def warm(self) -> float | None:
        """Load the model and open every indexed repository's stores with a throw-away search; returns the
        time of a second one (what a search costs here), None when there is nothing to serve."""
        from gsd_research.researcher import search_cmd

        factory = self.kb.factory
        try:  # only the embedded store with the local model is worth keeping loaded
            if factory.chroma_url is not None or any(factory.config.provider_of(r)[0] != "chromadb"
                                                     for r in factory.config.repositories):
                return None
            self.stale()
            search_cmd.run_one(self.kb, "warm up", None, 1, 1, "hybrid", 2000)
            start = time.perf_counter()
            search_cmd.run_one(self.kb, "warm up the search", None, 10, 5, "hybrid", 2000)
            took = time.perf_counter() - start
        except Exception:  # noqa: BLE001 - nothing to serve (no index, broken config): callers search alone
            return None
        self.code = code_stamps()
        return None if self.stale() else took

    def stale(self) -> bool:
        """Whether the configuration or a repository's index changed since this process first read it."""
        if resident.config_stamp() != self.config:
            return True
        from gsd_research.researcher.config import memory_repository

        factory = self.kb.factory
        for repo in [*factory.config.repositories, memory_repository()]:  # the memory too: `--repo` searches it
            stamp = resident.index_stamp(factory.repo_dir(repo))
            if self.stamps.setdefault(repo.name, stamp) != stamp:
                return True
        return False

    def code_changed(self) -> bool:
        return resident.context_key() != self.key or any(resident.stamp(path) != stamp
                                                          for path, stamp in self.code.items())

    def answer(self, request: dict) -> tuple[dict, bool]:
        """(reply, whether to exit afterwards)."""
        from gsd_research.researcher import search_cmd

        if self.code_changed():
            return {"fallback": "the code changed"}, True
        if request.get("key") != self.key:  # the key covers the protocol's version too
            return {"fallback": "another environment"}, False
        if self.stale():
            return {"fallback": "an index or the configuration changed"}, True
        from gsd_research.core.session import Ledger

        try:
            self.kb.pretty = bool(request.get("pretty"))  # the budget counts the answer as the caller prints it
            led = Ledger(str(request["session"]) if request.get("session") else None, bool(request.get("fresh"))) \
                if request.get("ledger") else None  # the caller's: JSON answers carry references and cursors
            payload = search_cmd.run_one(self.kb, str(request["query"]), request.get("repo"),
                                         int(request["n_fragments"]), int(request["n_documents"]),
                                         str(request["mode"]), int(request.get("max_tokens") or 2000), led)
        except Exception:  # noqa: BLE001 - errors are reported by the caller's own search, not from here
            return {"fallback": "the search failed"}, False
        if self.stale():  # re-indexed while searching: the answer may mix old and new
            return {"fallback": "an index changed"}, True
        return {"ok": payload, "ledger": led.handoff() if led is not None else None}, False

    def read(self, conn: socket.socket) -> dict | None:
        """The request, read within READ_TIMEOUT in all; None when it is too slow, too big, or not a JSON
        object (nested too deep for the parser included)."""
        deadline = time.monotonic() + READ_TIMEOUT
        data = b""
        conn.settimeout(READ_TIMEOUT)
        while chunk := conn.recv(1 << 16):
            data += chunk
            left = deadline - time.monotonic()
            if len(data) > MAX_REQUEST or left <= 0:
                return None
            conn.settimeout(left)
        try:
            request = json.loads(data)
        except (ValueError, RecursionError):
            return None
        return request if isinstance(request, dict) else None

    def handle(self, conn: socket.socket) -> None:
        """One connection: the owner's request in, one answer out."""
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            return
        request = self.read(conn)
        reply = {"fallback": "bad request"}
        if request is not None:
            with self.searching:
                reply, stop = self.answer(request)
                if stop:
                    self.step_aside()
        conn.settimeout(READ_TIMEOUT)
        conn.sendall(json.dumps(reply, ensure_ascii=False).encode())

    def step_aside(self) -> None:
        """Before the answer that ends this process: no new connections, the lock let go, so that the search
        the caller now makes on its own can start a fresh process at once."""
        self.stop.set()
        if self.path is not None:
            _unlink_own(self.path, self.inode)
        if self.lock is not None:
            os.close(self.lock)
            self.lock = None

    def connection(self, conn: socket.socket) -> None:
        try:
            with conn:
                self.handle(conn)
        except Exception:  # noqa: BLE001 - a client that went away, a bad request: the next one is served
            pass
        finally:
            with self.counting:
                self.active -= 1
                self.last = time.monotonic()

    def serve(self, path, idle: float, ready=None) -> None:
        """Listen on `path` (then call `ready`) until idle or asked to stop."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            path.unlink(missing_ok=True)
            sock.bind(str(path))
            os.chmod(path, 0o600)
            self.path, self.inode = path, os.stat(path).st_ino
            sock.listen(16)
            if ready:
                ready()  # the measured search time joins the pid in the lock file: serving from now on
            sock.settimeout(min(POLL, idle))
            self.last = time.monotonic()
            try:
                self._loop(sock, idle)
            finally:
                _unlink_own(path, self.inode)

    def _loop(self, sock: socket.socket, idle: float) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                with self.counting:
                    if not self.active and time.monotonic() - self.last >= idle:
                        return  # idle
                continue
            except OSError:
                continue
            with self.counting:
                self.active += 1
            threading.Thread(target=self.connection, args=(conn,), daemon=True).start()


def _unlink_own(path, inode: int) -> None:
    """Remove the socket file if it is still this process's (a fresh process may have bound its own)."""
    try:
        if os.stat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


def _refused(reason: str, **fields) -> None:
    from gsd_research.researcher import log

    log.event("resident.refused", reason=reason, **fields)


def private_run_dir():
    """GSD_RESEARCH_HOME/run, created 0700; None (logged) when it is a symlink, not a folder or not ours."""
    run = resident.run_dir()
    try:
        run.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(run)
    except OSError as exc:
        _refused("the run folder cannot be created", error=str(exc)[:200])
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        _refused("the run folder is a symlink, not a folder, or not ours", path=str(run))
        return None
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(run, 0o700)
    return run


def clear_socket_path(path) -> bool:
    """Make room for the socket: a leftover socket is removed; anything else there (a folder, a file, a
    symlink) is renamed aside, logged; False when that fails."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if stat.S_ISSOCK(info.st_mode):
        return True  # `serve` replaces it
    aside = f"{path}.aside-{time.time_ns()}"
    try:
        os.rename(path, aside)
    except OSError as exc:
        _refused("something that is not a socket is at the socket's path", path=str(path), error=str(exc)[:200])
        return False
    _refused("something that is not a socket was at the socket's path: renamed aside", path=aside)
    return True


def _lock(run, after: int | None) -> int | None:
    """This home's lock, held (waiting a few seconds for a stopped predecessor `after` to let go)."""
    import fcntl

    from gsd_research.core.errors import GsdError
    from gsd_research.core.private import open_lock

    try:
        lock = open_lock(run / "search.lock")  # never through a planted symlink, only a file of ours
    except (GsdError, OSError) as exc:
        _refused("the lock file cannot be used", error=str(exc)[:300])
        return None
    deadline = time.monotonic() + (5.0 if after else 0.0)
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except OSError:
            if time.monotonic() >= deadline:
                os.close(lock)
                return None  # another resident process serves this home
            time.sleep(0.1)


def main(argv: list[str] | None = None) -> None:
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leave through `serve`'s clean-up
    args = sys.argv[1:] if argv is None else argv
    after = next((int(a.split("=", 1)[1]) for a in args if a.startswith("--after=") and a[8:].isdigit()), None)
    idle, path = resident.idle_seconds(), resident.socket_path()
    if idle == 0 or path is None:
        return
    run = private_run_dir()
    lock = _lock(run, after) if run is not None else None
    if lock is None:
        return
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())  # who holds it (`resident.pid()`)
    server = Server()
    took = server.warm()
    if took is None or not clear_socket_path(path):
        return
    server.lock = lock
    server.serve(path, idle, ready=lambda: os.pwrite(lock, f"{os.getpid()} {took:.4f}".encode(), 0))


if __name__ == "__main__":
    main()
