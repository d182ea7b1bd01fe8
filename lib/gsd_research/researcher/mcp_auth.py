"""The bearer token of `researcher serve --port`: generated once into a private file, checked on every request."""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

TOKEN_FILE = "researcher-mcp.token"


def token_file() -> tuple[str, Path]:
    """(token, its file under GSD_RESEARCH_HOME): the file's token when it is a private regular file of ours,
    else a new one written there (0600, never through a symlink)."""
    from gsd_research.core.config import home
    from gsd_research.core.private import open_private

    path = home() / TOKEN_FILE
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and not stat.S_IMODE(info.st_mode) & 0o077:
            token = path.read_text(encoding="ascii").strip()
            if len(token) >= 32:
                return token, path
        os.unlink(path)
    except (OSError, UnicodeDecodeError):
        pass
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token + "\n")
    return token, path


class BearerAuth:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401 and never reaches MCP."""

    def __init__(self, app, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode("ascii")

    async def __call__(self, scope, receive, send):
        if scope.get("type") in ("http", "websocket"):
            given = b""
            for name, value in scope.get("headers") or []:
                if name.lower() == b"authorization":
                    given = value
            if not hmac.compare_digest(given, self.expected):
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="researcher"')]})
                await send({"type": "http.response.body", "body": b'{"error": "unauthorized: send the bearer token '
                                                                  b'of researcher-mcp.token"}'})
                return
        await self.app(scope, receive, send)
