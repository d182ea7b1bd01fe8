"""The research memory can be cleared; an unreadable memory file is a clear error naming it and the fix."""

from __future__ import annotations

import pytest

from gsd_research.memory.store import Entry, MemoryStore


def _keep(text: str = "The fault code QK-7731-ZETA means the coolant valve is stuck open.") -> None:
    store = MemoryStore()
    try:
        store.put(Entry(kind="page", url="https://example.org/a", title="Faults", provider="fetch", body=text))
    finally:
        store.close()


def test_clear_removes_everything_and_recall_then_says_it_is_empty(cli, home):
    _keep()
    assert cli("recall", "QK-7731-ZETA").json["results"]

    cleared = cli("recall", "--clear")
    after = cli("recall", "QK-7731-ZETA").json

    assert cleared.code == 0 and cleared.json["metadata"]["cleared"] is True
    assert not (home / "research-memory" / "documents").exists()
    assert after["results"] == [] and after["metadata"]["entries"] == 0
    assert cli("recall", "--clear", "x").json["error"]["code"] == "USAGE_ERROR"


@pytest.mark.parametrize("damaged,where", [("research-memory/catalog.sqlite", "catalog.sqlite"),
                                           ("repositories/research-memory/lexical.sqlite", "lexical.sqlite")])
def test_a_garbage_memory_file_is_named_with_the_fix(cli, home, damaged, where):
    _keep()
    (home / damaged).write_bytes(b"garbage, not a database" * 200)
    for extra in ("-wal", "-shm"):
        (home / (damaged + extra)).unlink(missing_ok=True)

    result = cli("recall", "coolant valve")

    error = result.json["error"]
    assert result.code != 0 and error["code"] == "MEMORY_CORRUPT"
    assert where in error["message"] and error["suggestions"][-1].endswith("gsd-research recall --clear")
    if where == "lexical.sqlite":  # the kept pages are intact: the index run rebuilds the index from them
        assert error["suggestions"][0].startswith("Run: researcher index research-memory"), error
    assert cli("recall", "--clear").code == 0 and cli("recall", "coolant").json["metadata"]["entries"] == 0


def test_memory_off_says_recall_serves_what_was_kept(cli, home):
    _keep()
    cli("config", "set", "memory.enabled", "false")

    doc = cli("recall", "coolant valve").json

    assert doc["results"] and "recall --clear" in doc["metadata"]["memory_note"]


def test_a_huge_since_is_a_usage_error(cli, home):
    result = cli("recall", "x", "--since", "99999999d")

    assert result.json["error"]["code"] == "USAGE_ERROR" and "--since" in result.json["error"]["message"]
