"""The knowledge base's damage checks at their edges: no false alarm while an index run rewrites a repository or
while research memory's writes lead the embedding; advice
that works; recall told about a keyword index it cannot use, with a fix that repairs it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from gsd_research.researcher.gateways.lock_gateway import RepositoryLock
from gsd_research.researcher.state import StateGateway
from tests.researcher_fixtures import kb, seed_model
from tests.test_researcher_keywords_lost import _garbled, _hurt, indexed  # noqa: F401 - the fixture
from tests.test_researcher_vectors_lost import empty, next_process

QUERY = "ERRCODE_7712 cold widget cache"


def test_an_index_run_that_empties_the_store_a_moment_is_no_damage_to_a_search(indexed):  # noqa: F811
    """An index run rewriting every document of a repository deletes their vectors before it adds the new ones:
    a search at that moment answered INDEX_DAMAGED "holds 0 of the 3 fragments"."""
    state = indexed.parent
    with RepositoryLock(state, "researcher index r").hold():
        StateGateway(state).set_in_flight(["a.md", "b.md", "c.md"])
        empty(state / "chroma")
        next_process()
        during = kb("search", QUERY, "--repo", "r", "--mode", "vector", "--json")
    after = kb("search", QUERY, "--repo", "r", "--mode", "vector", "--json")  # the journal of a run now gone

    assert during.code == 0, during.stdout
    assert after.code != 0 and after.json["error"]["code"] == "INDEX_DAMAGED", after.stdout


def test_with_vectors_lost_and_keywords_cut_short_the_advice_is_the_index_run_alone(indexed):  # noqa: F811
    """The advice offered "--mode lexical" meanwhile, which met the keyword index's own damage."""
    empty(indexed.parent / "chroma")
    _hurt(indexed, "cut_short")

    error = kb("search", QUERY, "--repo", "r", "--json").json["error"]

    assert error["code"] == "INDEX_DAMAGED" and len(error["suggestions"]) == 1, error
    assert error["suggestions"][0].startswith("Run: researcher index r") and "--mode" not in error["suggestions"][0]


def _entry(i: int):
    from gsd_research.memory.store import Entry

    return Entry(kind="page", body=f"# Page {i}\n\nThe flux capacitor code FLUX_{9000 + i} matters; the gasket and "
                 "the rotor valve are checked daily.", url=f"https://example.com/p{i}", title=f"Page {i}")


def _memory(n: int):
    from gsd_research.memory.store import MemoryStore

    store = MemoryStore()
    store.put_many([_entry(i) for i in range(n)])
    return store


@pytest.mark.parametrize("removed", [2, 6])
def test_research_memory_removals_ahead_of_the_embedding_are_no_damage(home, monkeypatch, removed):
    """Research memory removes an entry's keyword rows at once and its vectors at the embedding's next pass: the
    repository was reported damaged meanwhile (and left out of every search of all repositories). Some entries
    removed, or every one."""
    from gsd_research.researcher import api

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    store = _memory(6)
    api.embed_now("research-memory")
    ids = [row[0] for row in store.conn.execute("SELECT id FROM entries ORDER BY id LIMIT ?", (removed,))]
    assert store.remove(ids) == removed
    store.close()
    next_process()

    found = kb("search", "FLUX_9005 gasket", "--repo", "research-memory", "--json")
    status = kb("status", "research-memory", "--json").json["repositories"][0]

    assert found.code == 0, found.stdout
    assert status["damaged"] is None, status


def test_recall_answers_by_meaning_with_a_note_when_the_keyword_index_is_lost(cli, home, monkeypatch):
    from gsd_research.researcher import api

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    _memory(5).close()
    api.embed_now("research-memory")
    lexical = Path(api.repo_dir("research-memory")) / "lexical.sqlite"
    _hurt(lexical, "deleted")

    lost = cli("recall", "flux capacitor gasket")

    assert lost.code == 0 and lost.json["results"], lost.stdout
    assert "keyword ranking unavailable" in json.dumps(lost.json) and "researcher index research-memory" in \
        json.dumps(lost.json), lost.stdout
    assert not lexical.exists()  # nothing created in its place

    _garbled(lexical)
    garbled = cli("recall", "flux capacitor gasket")
    assert garbled.code == 0 and "keyword ranking unavailable" in json.dumps(garbled.json), garbled.stdout
    assert kb("index", "research-memory", "--json").code == 0  # the fix the note names
    next_process()
    repaired = cli("recall", "FLUX_9003")
    assert repaired.code == 0 and "keyword ranking unavailable" not in json.dumps(repaired.json)
    assert "FLUX_9003" in json.dumps(repaired.json["results"][0]), repaired.stdout
    conn = sqlite3.connect(lexical)
    assert conn.execute("SELECT count(*) FROM fragments").fetchone()[0] >= 5
    conn.close()


def test_recall_of_a_damaged_memory_index_advises_the_index_run_not_clearing_the_memory(cli, home, monkeypatch):
    """Its advice was `recall --clear`, which deletes every kept page, where the index run rebuilds the index from
    them; and its message was cut mid-text."""
    from gsd_research.researcher import api

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    _memory(4).close()  # nothing embedded: no vectors to fall back on
    lexical = Path(api.repo_dir("research-memory")) / "lexical.sqlite"
    _garbled(lexical)

    failed = cli("recall", "flux capacitor")

    error = failed.json["error"]
    assert failed.code != 0 and error["code"] == "MEMORY_CORRUPT" and str(lexical) in error["message"], error
    assert error["message"].endswith(")") and "is damaged" in error["message"], error
    assert error["suggestions"][0].startswith("Run: researcher index research-memory"), error
    assert kb("index", "research-memory", "--json").code == 0
    next_process()
    repaired = cli("recall", "FLUX_9002")
    assert repaired.code == 0 and "FLUX_9002" in json.dumps(repaired.json["results"][0]), repaired.stdout


def test_memory_index_emptied_while_its_writes_lead_the_embedding_is_still_named(cli, home, monkeypatch):
    """With memory.embed off the writes lead the embedding for good: the check that waits for the embedding
    left an emptied keyword index unnamed forever. Counts are no measure then, but an empty index beside kept
    documents is."""
    from gsd_research.researcher import api

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    store = _memory(5)
    api.embed_now("research-memory")
    store.put_many([_entry(9)])  # a write after the embedding: pending from now on
    store.close()
    lexical = Path(api.repo_dir("research-memory")) / "lexical.sqlite"
    _hurt(lexical, "emptied")

    found = kb("search", "flux capacitor", "--repo", "research-memory", "--json")
    status = kb("status", "research-memory", "--json").json["repositories"][0]
    recalled = cli("recall", "flux capacitor gasket")

    assert found.json["error"]["code"] == "INDEX_DAMAGED", found.stdout
    assert status["damaged"] and "research-memory" in status["damaged"]
    assert recalled.code == 0 and "keyword ranking unavailable" in json.dumps(recalled.json), recalled.stdout


def test_memory_removals_are_not_reported_as_repairs_by_the_next_index_run(home, monkeypatch):
    from gsd_research.researcher import api

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    store = _memory(6)
    assert kb("index", "research-memory", "--json").json["results"][0]["repaired"] is None
    ids = [row[0] for row in store.conn.execute("SELECT id FROM entries ORDER BY id LIMIT 3")]
    assert store.remove(ids) == 3
    store.close()
    next_process()

    out = kb("index", "research-memory", "--json").json["results"][0]

    assert out["documents_removed"] == 3 and out["repaired"] is None, out
    assert kb("status", "research-memory", "--json").json["repositories"][0]["damaged"] is None


def test_a_killed_index_run_is_named_as_such_with_the_run_that_resumes_it(indexed):  # noqa: F811
    state = indexed.parent
    StateGateway(state).set_in_flight(["b.md"])  # left by the killed run: no run holds the lock
    empty(state / "chroma", "b.md")
    next_process()

    error = kb("search", QUERY, "--repo", "r", "--json").json["error"]

    assert error["code"] == "INDEX_DAMAGED" and "was interrupted" in error["message"], error
    assert error["suggestions"][0].startswith("Run: researcher index r (it resumes the interrupted run)"), error
    assert "was interrupted" in kb("status", "r", "--json").json["repositories"][0]["damaged"]
    assert kb("index", "r", "--json").code == 0
    next_process()
    assert kb("search", QUERY, "--repo", "r", "--json").json["documents"][0]["document_path"] == "b.md"


def test_an_index_run_from_the_command_line_settles_memory_writes_so_later_damage_is_named(home, monkeypatch):
    """With memory.embed off only `researcher index` embeds, and it recorded nothing: the writes stayed pending for
    good, and a keyword index cut short was never named again."""
    from gsd_research.researcher import api

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    _memory(6).close()
    assert kb("index", "research-memory", "--json").code == 0
    lexical = Path(api.repo_dir("research-memory")) / "lexical.sqlite"
    next_process()
    conn = sqlite3.connect(lexical)
    with conn:
        conn.execute("DELETE FROM fragments WHERE rowid > 1")
    conn.close()

    error = kb("search", "flux capacitor", "--repo", "research-memory", "--json").json["error"]

    assert error["code"] == "INDEX_DAMAGED" and "holds 1 of the" in error["message"], error
    repaired = kb("index", "research-memory", "--json").json["results"][0]
    assert repaired["repaired"] and "keyword index" in repaired["repaired"], repaired


def test_memory_marks_its_writes_pending_before_it_touches_the_keyword_index(home, monkeypatch):
    """A removal wrote the keyword rows first and marked the writes pending after: a search in between, or after
    a kill in between, took the rows removed ahead for damage."""
    from gsd_research.researcher import api
    from gsd_research.researcher.gateways import lexical_gateway

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    store = _memory(4)
    api.embed_now("research-memory")
    assert not StateGateway(api.repo_dir("research-memory")).head().writes_pending
    seen, replace = [], lexical_gateway.LexicalGateway.replace_documents

    def watched(self, paths, rows):
        seen.append(StateGateway(api.repo_dir("research-memory")).head().writes_pending)
        return replace(self, paths, rows)

    monkeypatch.setattr(lexical_gateway.LexicalGateway, "replace_documents", watched)
    assert store.remove([row[0] for row in store.conn.execute("SELECT id FROM entries LIMIT 1")]) == 1
    store.put_many([_entry(7)])
    store.close()

    assert seen == [True, True]


def test_a_resumed_index_run_is_not_reported_as_a_repair(indexed):  # noqa: F811
    state = indexed.parent
    StateGateway(state).set_in_flight(["b.md"])
    empty(state / "chroma", "b.md")
    next_process()

    out = kb("index", "r", "--json").json["results"][0]

    assert out["repaired"] is None and out["documents_resumed"] + out["documents_indexed"] >= 1, out
