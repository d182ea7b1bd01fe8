"""The resident search process: same answers, private socket, declines stale indexes and other environments."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.researcher_fixtures import DOCS, indexed_copy, kb


def _wait_for_resident(timeout: float = 180.0) -> int:
    from gsd_research.researcher import resident

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        holder = resident._holder()  # the measured search time is written once it listens
        if holder and holder[1] is not None and resident.socket_path().exists():
            return holder[0]
        time.sleep(0.02)
    pytest.fail("the resident search process did not start")


def _gone(pid: int, timeout: float = 60.0) -> bool:
    """The process has exited (it may linger as this test process's zombie: its lock is what counts)."""
    from gsd_research.researcher import resident

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if resident.pid() != pid:
            return True
        time.sleep(0.02)
    return False


def _stop(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass


def _hold_lock(content: str | None = None) -> int:
    """Hold this home's resident lock as a listening resident process would (this process's id and a measured
    search time in it)."""
    import fcntl

    from gsd_research.researcher import resident

    fd = os.open(resident.run_dir() / "search.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, (content or f"{os.getpid()} 0.0100").encode())
    return fd


def _without_timing(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    doc["metadata"].pop("elapsed_ms", None)
    doc["metadata"].pop("tokens_used", None)  # counts elapsed_ms's digits too (2.6 s under load: one token more)
    if "next" in doc["metadata"]:  # a cursor's token is its content's hash, elapsed_ms included
        doc["metadata"]["next"] = doc["metadata"]["next"][:-12]
    return doc


@pytest.fixture
def indexed(tmp_path, home, monkeypatch):
    from gsd_research.researcher import resident

    if resident.socket_path() is None:
        pytest.skip("the test home's path is too long for a Unix socket")
    root = indexed_copy(tmp_path, home, "d", DOCS)
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "120")
    return root


def test_resident_process_answers_like_the_command_and_steps_aside_when_the_index_changes(indexed, home,
                                                                                            monkeypatch):
    from types import SimpleNamespace

    from gsd_research.researcher import resident, search_cmd
    from gsd_research.researcher.service_factory import ServiceFactory
    from tests.conftest import cl100k_tokens

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
        small = kb("search", "frobnication level", "--json", "--max-tokens", "300")  # the budget travels along
        assert small.json["metadata"]["max_tokens"] == 300 and small.json["metadata"]["tokens_used"] <= 300
        for budget in (300, 800):  # pretty JSON costs more tokens: counted as printed
            pretty = kb("search", "frobnication level", "--json-pretty", "--max-tokens", str(budget))
            assert pretty.code == 0 and cl100k_tokens(pretty.stdout) <= budget
        from gsd_research.core.session import Ledger

        monkeypatch.setattr(search_cmd, "run_one", own)
        own_small = search_cmd.run_one(SimpleNamespace(factory=ServiceFactory(), command="search"),
                                       "frobnication level", None, 10, 5, "hybrid", 300, Ledger(None, False))
        assert {k: v for k, v in _without_timing(small.json).items() if k not in ("success", "command")} == \
            _without_timing(own_small)
        monkeypatch.setattr(search_cmd, "run_one", lambda *a, **k: pytest.fail("searched in this process"))

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

    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "2")
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
        assert _gone(pid, timeout=60)  # two seconds without a request
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
    if path is None:
        pytest.skip("the test home's path is too long for a Unix socket")
    path.parent.mkdir(parents=True)
    holding = _hold_lock()
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
    os.close(holding)

    assert answers == [None, None, None, {"ok": {"query": "q"}}]


def _is_socket(path) -> bool:
    import stat

    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _search_request() -> dict:
    return {"query": "frobnication", "repo": None, "n_fragments": 5, "n_documents": 5, "mode": "hybrid"}


def test_a_stopped_resident_process_costs_seconds_and_is_replaced(indexed, home, monkeypatch):
    import signal

    from gsd_research.researcher import resident

    assert kb("search", "frobnication level", "--json").code == 0
    pid = _wait_for_resident()
    fresh = None
    try:
        os.kill(pid, signal.SIGSTOP)  # hung: the kernel still accepts its connections
        with monkeypatch.context() as short:  # the bounded wait, shortened: its bound is the subject, not its size
            short.setattr(resident, "REPLY_MIN", 0.5)
            short.setattr(resident, "REPLY_MAX", 1.0)
            start = time.monotonic()
            answer = kb("search", "frobnication level", "--json")
            took = time.monotonic() - start
            reply_max = resident.REPLY_MAX
        assert answer.code == 0 and answer.json["documents"]
        assert took < reply_max + 30, took  # the bounded wait, then a search of its own
        assert _gone(pid, timeout=10)  # it held this home's lock and was ours: stopped
        events = [json.loads(line) for line in (home / "logs" / "researcher.log").read_text().splitlines()]
        assert any(e.get("event") == "resident.unanswered" and e.get("pid") == pid and e.get("stopped")
                   for e in events)
        fresh = _wait_for_resident()  # that search started a fresh one
        assert fresh != pid
        assert resident.ask(_search_request()) is not None
    finally:
        _stop(pid)
        _stop(fresh)


def test_a_resident_process_whose_socket_was_removed_is_retired_and_replaced(indexed, home):
    from gsd_research.researcher import resident

    assert kb("search", "frobnication level", "--json").code == 0
    pid = _wait_for_resident()
    fresh = None
    try:
        resident.socket_path().unlink()  # a tmp cleaner, or a user tidying up

        answer = kb("search", "frobnication level", "--json")

        assert answer.code == 0 and answer.json["documents"]
        assert _gone(pid, timeout=10)
        fresh = _wait_for_resident()  # that search started a fresh one, which answers
        assert fresh != pid and resident.ask(_search_request()) is not None
    finally:
        _stop(pid)
        _stop(fresh)


def _lock_holder(suffix: str, age: float) -> subprocess.Popen:
    """Another process holding this home's lock with its id and `suffix` in it (" 0.0100": its measured
    search time, as a listening resident process writes it; "": still starting), written `age` seconds ago.
    No socket: one starting has none yet, one listening had its socket removed."""
    from gsd_research.researcher import resident

    lock = resident.run_dir() / "search.lock"
    code = ("import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, (str(os.getpid()) + sys.argv[2]).encode())\n"
            "print('held', flush=True)\n"
            "time.sleep(300)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(lock), suffix], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    written = time.time() - age
    os.utime(lock, (written, written))
    return holder


@pytest.mark.parametrize(("suffix", "age", "retired"), [
    ("", 0, False),  # starting: loading the model, no socket yet
    ("", 600, True),  # "starting" for ten minutes: hung before it could listen
    (" 0.0100", 0, True),  # listened, then its socket was removed
], ids=["starting", "hung-while-starting", "socket-removed"])
def test_a_resident_process_is_retired_only_when_it_can_no_longer_answer(tmp_path, monkeypatch, suffix, age,
                                                                        retired):
    """Regression: a search 1-4 s after another retired the resident process the first one was still
    starting (its lock held, no socket yet), so every search started cold."""
    from gsd_research.researcher import resident

    monkeypatch.setenv("GSD_RESEARCH_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "60")
    if resident.socket_path() is None:
        pytest.skip("the test home's path is too long for a Unix socket")
    resident.run_dir().mkdir(parents=True)
    holder = _lock_holder(suffix, age)
    try:
        answer = resident.ask(_search_request())

        assert answer is None
        if retired:
            assert holder.wait(timeout=10) == -9
        else:
            assert holder.poll() is None and resident.pid() == holder.pid
    finally:
        holder.kill()
        holder.wait()


def test_an_idle_connection_and_hostile_requests_delay_nobody(indexed):
    from gsd_research.researcher import resident

    assert kb("search", "bread", "--json").code == 0
    pid = _wait_for_resident()
    idle = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        idle.connect(str(resident.socket_path()))  # connected, sends nothing
        start = time.monotonic()
        assert resident.ask(_search_request()) is not None
        assert time.monotonic() - start < 3.0
        for hostile in (b"[" * 100_000, b"[" * 60_000, b'{"a":' * 30_000):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(30)
                sock.connect(str(resident.socket_path()))
                sock.sendall(hostile)
                sock.shutdown(socket.SHUT_WR)
                reply = json.loads(sock.recv(1 << 16))
            assert "fallback" in reply and "ok" not in reply
        assert resident.pid() == pid  # still serving
        assert resident.ask(_search_request()) is not None
    finally:
        idle.close()
        _stop(pid)


def test_a_resident_process_is_not_refused_for_another_spelling_of_the_same_home(tmp_path, monkeypatch):
    from gsd_research.researcher import resident

    real = tmp_path / "h"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    keys = set()
    for spelling in (str(real), f"{real}/", str(tmp_path / "link"), f"{tmp_path}/./h"):
        monkeypatch.setenv("GSD_RESEARCH_HOME", spelling)
        keys.add(resident.context_key())
    assert len(keys) == 1
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(tmp_path))
    assert resident.context_key() not in keys


def test_run_folder_tricks_are_refused_not_followed(tmp_path, monkeypatch, home):
    from gsd_research.researcher import resident, resident_server

    if resident.socket_path() is None:
        pytest.skip("the test home's path is too long for a Unix socket")
    monkeypatch.setenv("GSD_RESEARCH_RESIDENT_IDLE", "60")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    run = home / "run"
    run.mkdir(parents=True)
    (run / "search.lock").symlink_to(victim)
    resident_server.main([])  # refused, logged: the link is neither followed nor written through
    assert victim.read_text() == "precious"
    assert "Refusing the lock file" in (home / "logs" / "researcher.log").read_text()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    os.chmod(elsewhere, 0o755)
    (run / "search.lock").unlink()
    run.rmdir()
    run.symlink_to(elsewhere)
    resident_server.main([])
    assert elsewhere.stat().st_mode & 0o777 == 0o755 and not any(elsewhere.iterdir())
    assert "resident.refused" in (home / "logs" / "researcher.log").read_text()


def test_something_else_at_the_socket_path_is_moved_aside(indexed, home):
    from gsd_research.researcher import resident

    path = resident.socket_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir()
    (path / "keep.txt").write_text("mine")
    assert kb("search", "bread", "--json").code == 0
    pid = _wait_for_resident()
    try:
        deadline = time.monotonic() + 60
        while not _is_socket(path) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _is_socket(path)
        aside = [p for p in path.parent.iterdir() if p.name.startswith("search.sock.aside-")]
        assert len(aside) == 1 and (aside[0] / "keep.txt").read_text() == "mine"
        assert resident.ask(_search_request()) is not None
    finally:
        _stop(pid)


def test_the_resident_process_watches_every_module_it_loaded_and_the_heavy_packages(tmp_path):
    import sys

    import chromadb  # noqa: F401 - loaded in the resident process

    import gsd_research.core.provider_env  # noqa: F401
    import gsd_research.researcher.cli  # noqa: F401
    from gsd_research.researcher import resident_server
    from gsd_research.researcher.resident_server import Server

    stamps = resident_server.code_stamps()
    for module in ("gsd_research.core.config", "gsd_research.core.provider_env", "gsd_research.researcher.cli"):
        assert sys.modules[module].__file__ in stamps
    assert any(path.endswith(".dist-info") and "chromadb" in path for path in stamps)

    watched = tmp_path / "module.py"
    watched.write_text("x = 1\n")
    server = Server.__new__(Server)
    server.key = resident_server.resident.context_key()
    server.code = {str(watched): resident_server.resident.stamp(watched)}
    assert not server.code_changed()
    watched.write_text("x = 22\n")
    assert server.code_changed()
    server.code = {str(tmp_path / "gone.dist-info"): (1, 2, 3)}  # an upgrade removed it
    assert server.code_changed()


def test_the_resident_process_does_not_answer_from_a_lost_vector_store(indexed, home):
    import shutil

    from gsd_research.researcher import resident
    from tests.researcher_fixtures import empty_vectors

    store = home / "repositories" / "d" / "chroma"
    request = {"query": "frobnication level", "repo": None, "n_fragments": 5, "n_documents": 5, "mode": "hybrid",
               "max_tokens": 2000, "pretty": False}
    assert kb("search", "frobnication level", "--json").code == 0
    pid = _wait_for_resident()
    try:
        assert resident.ask(request) is not None
        empty_vectors(store, collection="researcher-d")  # emptied in place by another process: the files stay

        assert resident.ask(request) is None  # it declines; the caller's own search names the damage
        searched = kb("search", "frobnication level", "--json")
        assert searched.json["error"]["code"] == "INDEX_DAMAGED", searched.stdout
        assert "researcher index d" in searched.json["error"]["suggestions"][0]
        assert resident.pid() == pid

        shutil.rmtree(store)  # deleted: the resident process steps aside, and recreates nothing
        assert resident.ask(request) is None
        assert _gone(pid)
        searched = kb("search", "frobnication level", "--json")
        assert searched.json["error"]["code"] == "INDEX_DAMAGED" and str(store) in searched.json["error"]["message"]
        assert not store.exists()

        assert "embedded again" in kb("index", "d", "--json").json["results"][0]["repaired"]
        assert kb("search", "frobnication level", "--json").json["documents"][0]["document_path"] == "api/reference.md"
        pid = _wait_for_resident()
        served = resident.ask(request)
        assert served is not None and served["ok"]["documents"][0]["document_path"] == "api/reference.md"
    finally:
        _stop(resident.pid() or pid)
