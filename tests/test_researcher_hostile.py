"""researcher against hostile input: Chroma servers that hang, trickle, or are not Chroma, malformed server URLs,
text that rich would take as markup, emoji codes or terminal control, config values YAML reads loosely."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from tests.researcher_fixtures import DOCS, indexed_copy, kb, make_repo, seed_model

HOSTILE = "[bold red]X :smile: \x1b[2J\x1b]0;pwned\x07 \x9b31m \u202egnp.exe"


def _serve(handler) -> tuple[str, threading.Event]:
    """A TCP server on 127.0.0.1 running `handler(conn)` per connection; returns its URL and a stop flag."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    stop = threading.Event()

    def loop():
        conns = []
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            conns.append(conn)
            threading.Thread(target=handler, args=(conn, stop), daemon=True).start()
        for c in conns:
            c.close()
        sock.close()

    threading.Thread(target=loop, daemon=True).start()
    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


def _silent(conn, stop):  # accepts, never answers
    stop.wait(30)


def _trickle(conn, stop):  # answers headers, then one byte of the body every 0.2 s, for ever
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
    while not stop.wait(0.2):
        try:
            conn.sendall(b" ")
        except OSError:
            return


def _answer(payload: bytes):
    def handler(conn, stop):
        conn.settimeout(2)
        try:
            conn.recv(65536)
            conn.sendall(payload)
        except OSError:
            pass
        conn.close()
    return handler


@pytest.fixture
def server(request, monkeypatch):
    module = "gsd_research.researcher.gateways.chroma_server"
    monkeypatch.setattr(f"{module}.PROBE_TIMEOUT", 1.0)  # a short bound, so the tests are quick
    monkeypatch.setattr(f"{module}._probed", set())
    url, stop = _serve(request.param)
    yield url
    stop.set()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server", [_silent, _trickle], ids=["never answers", "trickles bytes"], indirect=True)
@pytest.mark.parametrize("command", [("status",), ("search", "widget"), ("index", "d")], ids=lambda c: c[0])
def test_a_server_that_does_not_answer_in_time_is_reported_within_the_bound(tmp_path, home, server, command):
    if command[0] == "search":  # search asks the store only for an indexed repository
        indexed_copy(tmp_path, home, "d", DOCS)
    else:
        seed_model()
        kb("repo", "add", "d", str(make_repo(tmp_path / "repo")), "--json")
    started = time.monotonic()

    res = kb(*command, "--chroma-url", server, "--json")

    assert time.monotonic() - started < 10
    assert (res.code, res.json["error"]["code"]) == (5, "NETWORK_ERROR"), res.stdout
    # A loaded machine may time out the connect itself: either way the answer names the server and the bound.
    assert res.json["error"]["message"] in (f"Chroma server at {server} did not answer within 1 s",
                                            f"Chroma server at {server} is unreachable (timed out)")


NOT_CHROMA = {
    "HTTP 404": (b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", "(HTTP 404 for /api/v2/heartbeat)"),
    "an HTML page": (b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 15\r\n\r\n<html>hi</html>",
                     "not a Chroma heartbeat"),
    "other JSON": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{\"foo\": 1}",
                   "not a Chroma heartbeat"),
    "not HTTP": (b"\x00\xffGARBAGE not http\r\n\r\n", "answers, but not with HTTP"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("server, reason", [(_answer(p), r) for p, r in NOT_CHROMA.values()], ids=list(NOT_CHROMA),
                         indirect=["server"])
def test_a_server_that_answers_but_is_not_chroma_says_so(home, server, reason):
    res = kb("status", "--chroma-url", server, "--json")
    human = kb("status", "--chroma-url", server)

    assert (res.code, res.json["error"]["code"]) == (5, "UPSTREAM_ERROR"), res.stdout
    assert server in res.json["error"]["message"] and reason in res.json["error"]["message"]
    assert "not" in res.json["error"]["message"] and "Chroma server" in res.json["error"]["message"]
    assert human.code == 5 and "UPSTREAM_ERROR" in human.stderr


BAD_URLS = {"ftp://x": "not an http:// or https:// URL", "notaurl": "not an http:// or https:// URL",
            "http://[::1": "Invalid IPv6 URL", "http://127.0.0.1:99999": "Port out of range",
            "http://": "names no host", "http://h:8000/api?x=1": "cannot carry"}


@pytest.mark.parametrize("url, reason", list(BAD_URLS.items()), ids=list(BAD_URLS))
@pytest.mark.parametrize("command", [("status",), ("search", "x"), ("repo", "list")], ids=lambda c: c[0])
def test_a_malformed_server_url_is_a_usage_error(home, url, reason, command):
    res = kb(*command, "--chroma-url", url, "--json")

    assert (res.code, res.json["error"]["code"]) == (2, "USAGE_ERROR"), res.stdout
    assert reason in res.json["error"]["message"] and "ValueError" not in res.json["error"]["message"]


@pytest.mark.parametrize("url, reason", list(BAD_URLS.items()), ids=list(BAD_URLS))
def test_a_malformed_server_url_is_not_saved_in_the_config(home, url, reason):
    assert kb("config", "set", "chroma_url", "http://127.0.0.1:8000", "--json").code == 0
    before = (home / "researcher.yaml").read_bytes()

    res = kb("config", "set", "chroma_url", url, "--json")

    assert (res.code, res.json["error"]["code"]) == (2, "USAGE_ERROR") and reason in res.json["error"]["message"]
    assert (home / "researcher.yaml").read_bytes() == before


def test_server_status_labels_local_and_server_counts(tmp_path, home, chroma_server):
    seed_model()
    name = f"local{uuid.uuid4().hex[:8]}"  # the server is shared by the tests: a collection no other test made
    kb("repo", "add", name, str(make_repo(tmp_path / "repo")), "--json")
    indexed = kb("index", name, "--json").json["results"][0]  # into the embedded store: the server holds nothing

    res = kb("status", "--chroma-url", chroma_server, "--json")
    human = kb("status", "--chroma-url", chroma_server)

    repo = res.json["repositories"][0]
    assert res.code == 0 and res.json["store"] == "server"
    assert "total_fragments" not in repo and "total_documents" not in repo
    assert (repo["local_documents"], repo["local_fragments"]) == (4, indexed["fragments_created"])
    assert repo["server_fragments"] is None
    assert set(res.json["counts"]) == {"local_documents", "local_fragments", "server_fragments"}
    flat = " ".join(human.stdout.replace("│", " ").split())
    assert "this machine's record of what it indexed" in flat and "counted by the server" in flat, human.stdout
    assert "│ none" in human.stdout and "none: it holds no collection" in flat


# -- rich: user text is shown as itself ----------------------------------------------------------------------------

def assert_literal(out: str, *texts: str) -> None:
    """Markup kept as typed, no emoji made, no raw control character reaching the terminal.

    Whitespace is left out of the comparison: the terminal wraps long lines where the temporary path's length
    puts the break, and a wrap at a space takes the space.
    """
    solid = "".join(out.split())
    for text in texts:
        assert "".join(text.split()) in solid, out
    assert "😄" not in out and "👍" not in out and "🔥" not in out, out
    assert not any(ch in out for ch in ("\x1b", "\x07", "\x9b", "\u202e")), repr(out)


def test_repo_list_and_config_show_paths_are_literal(tmp_path, home):
    folder = tmp_path / f"docs {HOSTILE}"
    folder.mkdir()
    assert kb("repo", "add", "notes", str(folder), "--json").code == 0

    listed, shown = kb("repo", "list"), kb("config", "show")

    for out in (listed.stdout, shown.stdout):
        assert_literal(out.replace("\n", "").replace("│", ""), "[bold red]X :smile:", "\\x1b[2J", "\\u202e")


def test_index_skipped_names_and_errors_are_literal(tmp_path, home):
    seed_model()
    root = make_repo(tmp_path / "repo", {"good.md": "# Good\n\nfine\n"})
    (root / "bad [red]x :fire: \x1b]0;t\x07.pdf").write_bytes(b"%PDF-1.4 not a pdf")
    kb("repo", "add", "r", str(root), "--json")

    res = kb("index", "r")
    err = kb("repo", "add", "other", str(tmp_path / f"missing {HOSTILE}"))

    assert res.code == 0 and "skipped" in res.stdout
    assert_literal(res.stdout, "bad [red]x :fire: \\x1b]0;t\\x07.pdf")
    assert err.code != 0
    assert_literal(err.stderr.replace("\n", ""), "[bold red]X :smile:", "\\x1b[2J")


def test_search_document_names_and_text_are_literal(tmp_path, home):
    seed_model()
    name = ":smile: [b]notes[/b] \x1b[31m.md"
    make_repo(tmp_path / "repo", {name: "# Quokka\n\nThe quokka [blink]smiles[/blink] :thumbs_up: \x1b[2J\x9b1m.\n"})
    kb("repo", "add", "r", str(tmp_path / "repo"), "--json")
    assert kb("index", "r", "--json").code == 0

    res = kb("search", "quokka smiles")

    assert res.code == 0
    flat = res.stdout.replace("\n", "").replace("│", "")
    assert_literal(flat, ":smile: [b]notes[/b] \\x1b[31m.md", "[blink]smiles[/blink] :thumbs_up: \\x1b[2J\\x9b1m")


# -- config set: the value stored is the value echoed; only plain decimal ports ----------------------------------------

@pytest.mark.parametrize("raw, stored", [("080", 80), ("8392", 8392), (" 9000 ", 9000)])
def test_mcp_port_echo_is_the_stored_value(home, raw, stored):
    res = kb("config", "set", "mcp_port", raw, "--json")
    human = kb("config", "set", "mcp_port", raw)

    assert res.json["value"] == stored and human.stdout.startswith(f"Set mcp_port = {stored} in ")
    assert kb("config", "show", "--json").json["config"]["mcp_port"] == stored


@pytest.mark.parametrize("raw", ["0x50", "+80", "8_080", "0o120", "1e2", "80.0", "８０", "80 # port"])
def test_mcp_port_accepts_only_plain_decimal_digits(home, raw):
    assert kb("config", "set", "mcp_port", "9000", "--json").code == 0
    before = (home / "researcher.yaml").read_bytes()

    res = kb("config", "set", "mcp_port", raw, "--json")

    assert (res.code, res.json["error"]["code"]) == (2, "USAGE_ERROR"), res.stdout
    assert "plain decimal digits" in res.json["error"]["message"]
    assert (home / "researcher.yaml").read_bytes() == before
