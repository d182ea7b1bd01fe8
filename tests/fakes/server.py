"""A threaded fake HTTP server with routes per provider, a request log and fault injection.

Faults (`server.add_fault(path_prefix, kind, times=N, ...)`) apply to the next N matching requests:
  status     answer `status` with a JSON error body (and Retry-After when given)
  timeout    sleep `delay` seconds before answering (past the client's read timeout)
  malformed  200 with a body that is not JSON
  html       answer `status` (default 401) with an HTML page
  drop       close the connection without answering
  truncate   answer 200 with a Content-Length larger than the body sent, then close (cut mid-answer)
  drip       answer 200 (`body`, default HTML) one byte every `delay` seconds, for at most 30 s
A `status` fault may carry its own `body` (bytes, str or JSON-able) instead of the JSON error.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay: float = 0.0
    chunks: list[bytes] | None = None  # streamed body (NDJSON/SSE)

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        if self.body is None:
            return b""
        return json.dumps(self.body).encode("utf-8")


@dataclass
class Fault:
    prefix: str
    kind: str
    times: int = 1
    status: int = 500
    retry_after: str | None = None
    delay: float = 5.0
    method: str | None = None
    body: Any = None


Handler = Callable[[Request], Reply]


class FakeServer:
    """Routes, faults and a request log behind one ThreadingHTTPServer on 127.0.0.1."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, re.Pattern, Handler]] = []
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.state: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- configuration -------------------------------------------------------------------------
    def route(self, method: str, pattern: str):
        def register(fn: Handler) -> Handler:
            self.routes.append((method.upper(), re.compile(pattern + r"$"), fn))
            return fn

        return register

    def add_fault(self, prefix: str, kind: str, times: int = 1, **opts) -> None:
        with self._lock:
            self.faults.append(Fault(prefix, kind, times, **opts))

    def clear_faults(self) -> None:
        with self._lock:
            self.faults.clear()

    def hits(self, path_prefix: str = "", method: str | None = None) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(path_prefix) and (not method or r.method == method)]

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self, port: int = 0) -> FakeServer:
        server = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body leave at once (no 40 ms delayed-ACK stall)
            wbufsize = 1 << 16

            def log_message(self, *args):  # quiet
                pass

            def _handle(self):
                server._dispatch(self)

            do_GET = do_POST = do_DELETE = do_PUT = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    # -- request handling ----------------------------------------------------------------------
    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and path.startswith(fault.prefix) and (not fault.method or fault.method == method):
                    fault.times -= 1
                    return fault
        return None

    def _dispatch(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        req = Request(h.command, parts.path, query, {k.lower(): v for k, v in h.headers.items()}, body)
        with self._lock:
            self.requests.append(req)
        fault = self._take_fault(h.command, parts.path)
        if fault is not None:
            reply = self._fault_reply(fault, h)
            if reply is None:
                return
        else:
            reply = self._route(req)
        if reply.delay:
            time.sleep(reply.delay)
        self._write(h, reply)

    def _route(self, req: Request) -> Reply:
        for method, pattern, fn in self.routes:
            if method == req.method and pattern.match(req.path):
                try:
                    return fn(req)
                except Exception as exc:  # a broken fake must show up as a 500 in tests
                    return Reply(500, {"error": "fake_server_bug", "message": repr(exc)})
        return Reply(404, {"error": "not_found", "message": f"No fake route for {req.method} {req.path}"})

    def _fault_reply(self, fault: Fault, h: BaseHTTPRequestHandler) -> Reply | None:
        raw = {"drop": self._drop, "truncate": self._truncate, "drip": self._drip}.get(fault.kind)
        if raw is not None:  # these write (or refuse) the answer themselves
            raw(h, fault)
            return None
        if fault.kind == "timeout":
            return Reply(200, {"late": True}, delay=fault.delay)
        if fault.kind == "malformed":
            return Reply(200, b'{"results": [ {"id": "/broken', content_type="application/json")
        if fault.kind == "html":
            status = fault.status if fault.status != 500 else 401
            return Reply(status, b"<html><head><title>401 Authorization Required</title></head><body>"
                                 b"<center><h1>401 Authorization Required</h1></center></body></html>",
                         content_type="text/html")
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
        if fault.status == 429:
            headers.update({"RateLimit-Limit": "60", "RateLimit-Remaining": "0",
                            "RateLimit-Reset": str(int(time.time()) + 1)})
        if fault.body is not None:
            ctype = "application/json" if not isinstance(fault.body, (bytes, str)) else "text/html"
            return Reply(fault.status, fault.body, headers=headers, content_type=ctype)
        return Reply(fault.status, {"error": "injected_fault", "message": f"Injected HTTP {fault.status}"},
                     headers=headers)

    @staticmethod
    def _drop(h: BaseHTTPRequestHandler, fault: Fault) -> None:
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        h.close_connection = True

    @staticmethod
    def _truncate(h: BaseHTTPRequestHandler, fault: Fault) -> None:
        try:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "4096")
            h.end_headers()
            h.wfile.write(b'{"results": [{"id": "/partial')
            h.wfile.flush()
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        h.close_connection = True

    @staticmethod
    def _drip(h: BaseHTTPRequestHandler, fault: Fault) -> None:
        """Headers at once, then the body a byte at a time: each read is quick, the whole answer is not."""
        body = Reply(body=fault.body if fault.body is not None else "<html><body><p>" + "drip " * 400).payload()
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/html" if fault.body is None else "application/json")
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.flush()
            for i in range(min(len(body), int(30 / fault.delay))):
                h.wfile.write(body[i:i + 1])
                h.wfile.flush()
                time.sleep(fault.delay)
        except OSError:
            pass
        h.close_connection = True

    @staticmethod
    def _write(h: BaseHTTPRequestHandler, reply: Reply) -> None:
        try:
            h.send_response(reply.status)
            h.send_header("Content-Type", reply.content_type)
            for k, v in reply.headers.items():
                h.send_header(k, v)
            if reply.chunks is not None:
                h.send_header("Transfer-Encoding", "chunked")
                h.end_headers()
                for chunk in reply.chunks:
                    h.wfile.write(f"{len(chunk):X}\r\n".encode() + chunk + b"\r\n")
                    h.wfile.flush()
                h.wfile.write(b"0\r\n\r\n")
            else:
                payload = b"" if reply.status in (204, 304) else reply.payload()  # no body by HTTP's rules
                h.send_header("Content-Length", str(len(payload)))
                h.end_headers()
                h.wfile.write(payload)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass


def make_server(*providers: str) -> FakeServer:
    """A started server with the named providers' fakes installed (all of them when none is named)."""
    import importlib

    server = FakeServer()
    names = providers or ALL_PROVIDERS
    for name in names:
        importlib.import_module(f"tests.fakes.{name}").install(server)
    return server.start()


def _discover() -> tuple[str, ...]:
    """Every provider module beside this file (each defines install(server))."""
    from pathlib import Path

    here = Path(__file__).parent
    return tuple(sorted(p.stem for p in here.glob("*.py") if p.stem not in ("__init__", "server")
                        and "def install(" in p.read_text(encoding="utf-8")))


ALL_PROVIDERS: tuple[str, ...] = _discover()


if __name__ == "__main__":  # python -m tests.fakes.server --port 8765  (benchmarks, manual runs)
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("providers", nargs="*")
    args = parser.parse_args()
    srv = make_server(*args.providers)
    if args.port:
        srv.stop()
        srv = FakeServer()
        for n in args.providers or ALL_PROVIDERS:
            __import__(f"tests.fakes.{n}", fromlist=["install"]).install(srv)
        srv.start(args.port)
    print(srv.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.stop()
