"""The resident search process (see `resident`): the model and the stores loaded once, searches over a socket."""

from __future__ import annotations

import json
import os
import socket
import struct

from gsd_research.researcher import resident

MAX_REQUEST = 1 << 20


def _fallback(reason: str) -> dict:
    return {"fallback": reason}


class Server:
    """Answers search requests with `search_cmd.run_one`, exactly as the calling process would."""

    def __init__(self) -> None:
        from gsd_research.researcher.cli import KbContext

        self.key = resident.context_key()
        self.config = resident.config_stamp()
        self.kb = KbContext(json=True, command="search")
        self.stamps: dict[str, tuple] = {}

    def servable(self) -> bool:
        """Only the embedded store with the local model: what is worth keeping loaded."""
        factory = self.kb.factory
        config = factory.config
        return factory.chroma_url is None and all(config.provider_of(r)[0] == "chromadb"
                                                 for r in config.repositories)

    def warm(self) -> bool:
        """Load the model and open every indexed repository's stores with one throw-away search."""
        from gsd_research.researcher import search_cmd

        try:
            if not self.servable():
                return False
            self.stale()
            search_cmd.run_one(self.kb, "warm up", None, 1, 1, "hybrid")
        except Exception:  # noqa: BLE001 - nothing to serve (no index, broken config): callers search alone
            return False
        return not self.stale()

    def stale(self) -> bool:
        """Whether the configuration or a repository's index changed since this process first read it."""
        if resident.config_stamp() != self.config:
            return True
        factory = self.kb.factory
        for repo in factory.config.repositories:
            stamp = resident.index_stamp(factory.repo_dir(repo))
            if self.stamps.setdefault(repo.name, stamp) != stamp:
                return True
        return False

    def answer(self, request: dict) -> tuple[dict, bool]:
        """(reply, whether to exit afterwards)."""
        from gsd_research.researcher import search_cmd

        if resident.context_key() != self.key:
            return _fallback("the code changed"), True
        if request.get("v") != resident.PROTOCOL or request.get("key") != self.key:
            return _fallback("another environment"), False
        if self.stale():
            return _fallback("an index or the configuration changed"), True
        try:
            payload = search_cmd.run_one(self.kb, str(request["query"]), request.get("repo"),
                                         int(request["n_fragments"]), int(request["n_documents"]),
                                         str(request["mode"]))
        except Exception:  # noqa: BLE001 - errors are reported by the caller's own search, not from here
            return _fallback("the search failed"), False
        if self.stale():  # re-indexed while searching: the answer may mix old and new
            return _fallback("an index changed"), True
        return {"ok": payload}, False

    def handle(self, conn: socket.socket) -> bool:
        """One connection: the owner's request in, one answer out; True when the process should exit."""
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        if struct.unpack("3i", creds)[1] != os.getuid():
            return False
        conn.settimeout(10)
        data = b""
        while len(data) <= MAX_REQUEST and (chunk := conn.recv(1 << 16)):
            data += chunk
        try:
            request = json.loads(data)
        except ValueError:
            request = None
        reply, stop = self.answer(request) if isinstance(request, dict) else (_fallback("bad request"), False)
        conn.sendall(json.dumps(reply, ensure_ascii=False).encode())
        return stop

    def serve(self, path, idle: float) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            sock.bind(str(path))
            os.chmod(path, 0o600)
            inode = os.stat(path).st_ino
            sock.listen(16)
            sock.settimeout(idle)
            try:
                self._loop(sock)
            finally:
                try:
                    if os.stat(path).st_ino == inode:
                        os.unlink(path)
                except OSError:
                    pass

    def _loop(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                return  # idle
            try:
                with conn:
                    if self.handle(conn):
                        return
            except OSError:
                continue  # a client that went away


def main() -> None:
    import fcntl
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leave through `serve`'s clean-up
    idle, path = resident.idle_seconds(), resident.socket_path()
    if idle == 0 or path is None:
        return
    run = resident.run_dir()
    run.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(run, 0o700)
    lock = os.open(run / "search.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another resident process serves this home
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())  # who holds it (`resident.pid()`)
    server = Server()
    if server.warm():
        server.serve(path, idle)


if __name__ == "__main__":
    main()
