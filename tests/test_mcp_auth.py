"""`researcher serve --port`: the HTTP MCP server answers only requests that carry its bearer token, kept in a
private file under GSD_RESEARCH_HOME and printed to stderr at start."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from tests.conftest import BIN

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(home, tmp_path):
    port = free_port()
    err = open(tmp_path / "serve.err", "w+")  # noqa: SIM115 - read after the process ends
    proc = subprocess.Popen([str(BIN / "researcher"), "serve", "--port", str(port)], stdout=subprocess.DEVNULL,
                            stderr=err, env=dict(os.environ))
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp", proc, err
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    err.close()


def post(url: str, token: str | None) -> tuple[int, str]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(INIT).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def test_requests_without_the_token_are_refused_and_with_it_served(server, home):
    url, proc, err = server
    token_path = home / "researcher-mcp.token"
    assert proc.poll() is None, "the server did not start"
    token = token_path.read_text().strip()

    assert post(url, None)[0] == 401
    assert post(url, "not-the-token")[0] == 401
    assert post(url, token[:-1])[0] == 401
    status, body = post(url, token)

    assert status == 200 and "researcher" in body  # the MCP initialize answer
    assert stat.S_IMODE(token_path.stat().st_mode) == 0o600 and len(token) >= 32
    err.seek(0)
    said = err.read()
    assert f"Authorization: Bearer {token}" in said and str(token_path) in said


def test_the_token_survives_restarts_and_a_planted_token_file_is_replaced(home, tmp_path):
    from gsd_research.researcher.mcp_server import token_file

    first, path = token_file()
    assert token_file()[0] == first  # the same token while its file is private

    os.chmod(path, 0o644)  # readable by others: no longer a secret
    second, _ = token_file()
    victim = tmp_path / "victim"
    victim.write_text("x" * 64)
    path.unlink()
    path.symlink_to(victim)  # a planted link: never read as the token, never written through
    third, _ = token_file()

    assert len({first, second, third}) == 3 and victim.read_text() == "x" * 64
    assert not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o600
