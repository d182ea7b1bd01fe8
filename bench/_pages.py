"""The AEB news pages served on 127.0.0.1 (their real HTML), for benchmarks that fetch: `serve()`."""

from __future__ import annotations

import gzip
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from _common import SHARED

AEB = SHARED / "bench" / "aeb"


def articles() -> dict[str, dict]:
    """AEB id -> {"articleBody", "url"} (the hand-checked article text and the page's real address)."""
    return json.loads((AEB / "ground-truth.json").read_text(encoding="utf-8"))


def english(text: str) -> bool:
    words = re.findall(r"[a-z]+", text.lower())
    return sum(w in ("the", "and", "of", "to", "in") for w in words) / max(1, len(words)) > 0.12


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        match = re.fullmatch(r"/aeb/([0-9a-f]{64})\.html", self.path)
        path = AEB / "html" / f"{match.group(1)}.html.gz" if match else None
        if path is None or not path.is_file():
            self.send_error(404)
            return
        body = gzip.decompress(path.read_bytes())
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve() -> tuple[str, ThreadingHTTPServer]:
    """Start the page server on a free port: (base URL, server); `server.shutdown()` stops it."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


def page_url(base: str, aeb_id: str) -> str:
    return f"{base}/aeb/{aeb_id}.html"
