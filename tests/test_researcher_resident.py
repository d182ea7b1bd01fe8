"""The resident search process: same answers, private socket, declines stale indexes and other environments."""

from __future__ import annotations

import json
import os
import socket
import time

import pytest

from tests.researcher_fixtures import kb, make_repo, seed_model


def _wait_for_resident(timeout: float = 180.0) -> int:
    from gsd_research.researcher import resident

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = resident.pid()
        if pid and resident.socket_path().exists():
            return pid
        time.sleep(0.2)
    pytest.fail("the resident search process did not start")


def _gone(pid: int, timeout: float = 60.0) -> bool:
    """The process has exited (it may linger as this test process's zombie: its lock is what counts)."""
    from gsd_research.researcher import resident

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if resident.pid() != pid:
            return True
        time.sleep(0.2)
    return False


def _stop(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass


def _without_timing(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["metadata"].pop("elapsed_ms", None)
    return doc


@pytest.fixture
def indexed(tmp_path, monkeypatch):
    from gsd_research.researcher import resident

    seed_model()
    if resident.socket_path() is None:
        pytest.skip("the test home's path is too long for a Unix socket")
    root = make_repo(tmp_path / "repo")
    assert kb("repo", "add", "d", str(root), "--json").code == 0
    assert kb("index", "d", "--json").code == 0
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "120")
    return root


def test_resident_process_answers_like_the_command_and_steps_aside_when_the_index_changes(indexed, home,
                                                                                            monkeypatch):
    from gsd_research.researcher import resident, search_cmd

    first = kb("search", "frobnication level", "--json")  # searches itself, then starts the resident process
    pid = _wait_for_resident()
    try:
        assert first.code == 0
        run = home / "run"
        assert run.stat().st_mode & 0o777 == 0o700
        assert (run / "search.sock").stat().st_mode & 0o777 == 0o600

        own = search_cmd.run_one
        monkeypatch.setattr(search_cmd, "run_one", lambda *a, **k: pytest.fail("searched in this process"))
        served = kb("search", "frobnication level", "--json")
        assert served.code == 0
        assert _without_timing(served.json) == _without_timing(first.json)

        # another environment (the float model) is not answered by it: this process searches itself
        monkeypatch.setenv("GSD_RESEARCH_EMBEDDING_PRECISION", "fp32")
        assert resident.ask({"query": "frobnication", "repo": None, "n_fragments": 5, "n_documents": 5,
                             "mode": "hybrid"}) is None
        monkeypatch.delenv("GSD_RESEARCH_EMBEDDING_PRECISION")
        assert resident.pid() == pid

        # re-indexed with new content: it declines, exits, and the answer is the new index's
        (indexed / "guide" / "sailing.md").write_text("# Sailing\n\nTrim the jib when the wind backs.\n")
        assert kb("index", "d", "--json").code == 0
        monkeypatch.setattr(search_cmd, "run_one", own)
        after = kb("search", "trim the jib", "--json")
        assert after.code == 0
        assert after.json["documents"][0]["document_path"] == "guide/sailing.md"
        assert _gone(pid)
        pid = _wait_for_resident()  # that search started a fresh one, which serves the new index
        monkeypatch.setattr(search_cmd, "run_one", lambda *a, **k: pytest.fail("searched in this process"))
        again = kb("search", "trim the jib", "--json")
        assert _without_timing(again.json) == _without_timing(after.json)
    finally:
        _stop(resident.pid() or pid)


def test_resident_process_survives_bad_requests_and_exits_when_idle(indexed, monkeypatch):
    from gsd_research.researcher import resident

    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "4")
    assert kb("search", "bread", "--json").code == 0
    pid = _wait_for_resident()
    try:
        for garbage in (b"not json", b"[1, 2]", b'{"v": 1, "key": "forged", "query": "x"}', b"\xff" * 1000):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(30)
                sock.connect(str(resident.socket_path()))
                sock.sendall(garbage)
                sock.shutdown(socket.SHUT_WR)
                reply = json.loads(sock.recv(1 << 16))
            assert "fallback" in reply and "ok" not in reply
        assert resident.pid() == pid
        assert _gone(pid, timeout=60)  # four seconds without a request
        assert not resident.socket_path().exists()
    finally:
        _stop(resident.pid())


def test_no_resident_process_where_a_socket_cannot_live_or_when_turned_off(tmp_path, monkeypatch):
    from gsd_research.researcher import resident

    monkeypatch.setenv("GSD_RESEARCH_HOME", str(tmp_path / ("x" * 120)))
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "60")
    assert resident.socket_path() is None
    assert resident.ask({"query": "q"}) is None
    resident.spawn()
    assert not (tmp_path / ("x" * 120) / "run").exists()

    monkeypatch.setenv("GSD_RESEARCH_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "0")
    assert resident.idle_seconds() == 0 and resident.ask({"query": "q"}) is None
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "soon")
    assert resident.idle_seconds() == resident.DEFAULT_IDLE


def test_a_garbled_answer_on_the_socket_is_no_answer(tmp_path, monkeypatch):
    import threading

    from gsd_research.researcher import resident

    monkeypatch.setenv("GSD_RESEARCH_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "60")
    path = resident.socket_path()
    path.parent.mkdir(parents=True)
    replies = [b"garbage", b'{"ok": "not a payload"}', b'{"fallback": "x"}', b'{"ok": {"query": "q"}}']
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        server.listen(4)

        def answer():
            for reply in replies:
                conn, _ = server.accept()
                with conn:
                    conn.recv(1 << 16)
                    conn.sendall(reply)

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        answers = [resident.ask({"query": "q"}, timeout=10) for _ in replies]
        thread.join(10)

    assert answers == [None, None, None, {"ok": {"query": "q"}}]
