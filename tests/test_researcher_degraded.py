"""A damaged index degrades the knowledge base, never sinks it whole: a search of all repositories answers from the
healthy ones and names those it left out (CLI, --queries-file lines, MCP tools, the resident process); the advice
never sends a user to a keyword index that is damaged too; a store removed under an index run is named, not an
internal error, and the next run repairs it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import cl100k_tokens
from tests.researcher_fixtures import kb, make_repo, seed_model
from tests.test_researcher_vectors_lost import DOCS, damage, next_process, untouched

OTHER = {"o.md": "# O\n\nThe axolotl exhibit opens at noon; the okapi pen is closed.\n"}


def _garble(db: Path) -> None:
    """lexical.sqlite overwritten (its WAL files gone with it): SQLite's "file is not a database". The commands
    before it have ended first, as their processes would have: a connection of theirs still open here would,
    when collected, copy its WAL back over the garbled file."""
    next_process()
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    db.write_bytes(b"not a database " * 400)


@pytest.fixture
def two(tmp_path, home):
    """Repositories `r` and `ok`, both indexed; returns the home."""
    seed_model()
    for name, docs in (("r", DOCS), ("ok", OTHER)):
        kb("repo", "add", name, str(make_repo(tmp_path / name, docs)), "--json")
        assert kb("index", name, "--json").json["results"][0]["documents_indexed"] == len(docs)
    return home


def _hurt(home: Path, kind: str, name: str = "r") -> Path:
    """Damage repository `name`'s vector store (a kind of `damage`) or its keyword index ("lexical"); the store
    the damage names."""
    if kind == "lexical":
        db = home / "repositories" / name / "lexical.sqlite"
        _garble(db)
        next_process()
        return db
    store = home / "repositories" / name / "chroma"
    damage(store, kind)
    return store


def _skipped(meta: dict, where: Path) -> None:
    assert meta["repositories"] == ["ok"], meta
    [entry] = meta["skipped_repositories"]
    assert entry["repository"] == "r" and entry["code"] == "INDEX_DAMAGED" and entry["fix"] == "researcher index r"
    assert str(where) in entry["message"], entry


@pytest.mark.parametrize("kind", ["deleted_folder", "garbled_db", "lexical"])
def test_a_search_of_all_repositories_answers_from_the_healthy_ones_and_names_the_damaged(two, tmp_path, kind):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    where = _hurt(two, kind)

    found = kb("search", "axolotl", "--json")
    assert found.code == 0, found.stdout
    assert {d["repository"] for d in found.json["documents"]} == {"ok"}, found.stdout
    _skipped(found.json["metadata"], where)
    human = kb("search", "axolotl")
    flat = " ".join(human.stdout.split())  # the terminal wraps where the temporary path's length puts the break
    assert human.code == 0 and "left out r" in flat and "Run: researcher index r" in flat, human.stdout
    alone = kb("search", "axolotl", "--repo", "r", "--json")  # the damaged repository alone: its error, as before
    assert alone.code != 0 and alone.json["error"]["code"] == "INDEX_DAMAGED" and str(where) in alone.stdout

    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1, "query": "axolotl"}\nnot json\n{"id": 3, "query": "okapi"}\n')
    lines = [json.loads(x) for x in kb("search", "--queries-file", str(queries), "--json").stdout.splitlines()]
    assert [x["id"] for x in lines] == [1, 2, 3] and lines[1]["error"]["code"] == "USAGE_ERROR"
    for line in (lines[0], lines[2]):
        assert line["documents"][0]["repository"] == "ok", line
        assert line["metadata"]["skipped_repositories"] == found.json["metadata"]["skipped_repositories"]
    alone = [json.loads(x) for x in kb("search", "--queries-file", str(queries), "--repo", "r", "--json")
             .stdout.splitlines()]
    assert [x.get("error", {}).get("code") for x in alone] == ["INDEX_DAMAGED", "USAGE_ERROR", "INDEX_DAMAGED"]

    tools = KnowledgeBaseTools(ServiceFactory())
    for answer in (tools.search_fragments("axolotl"), tools.search_documents("axolotl")):
        assert answer["success"] is True, answer
        assert answer["metadata"]["skipped_repositories"][0]["repository"] == "r", answer
    assert tools.search_documents("axolotl", "r")["error"]["code"] == "INDEX_DAMAGED"
    if kind != "lexical":
        untouched(where, kind)

    _hurt(two, "removed_db" if kind != "lexical" else "lexical", "ok")  # every repository damaged: the error
    every = kb("search", "axolotl", "--json")
    assert every.code != 0 and every.json["error"]["code"] == "INDEX_DAMAGED", every.stdout


def test_the_repositories_left_out_count_within_the_budget(two):
    where = _hurt(two, "deleted_folder")

    for budget in (250, 1000):
        out = kb("search", "axolotl", "--json", "--max-tokens", str(budget))
        assert out.code == 0, out.stdout
        if budget == 250:  # the envelope would take over a third of it: the fix without the story
            [entry] = out.json["metadata"]["skipped_repositories"]
            assert entry == {"repository": "r", "code": "INDEX_DAMAGED", "fix": "researcher index r"}, entry
        else:
            _skipped(out.json["metadata"], where)
        assert cl100k_tokens(out.stdout) <= budget
        assert out.json["metadata"]["tokens_used"] >= cl100k_tokens(out.stdout) - 2  # the field is counted
    assert kb("search", "axolotl", "--json", "--max-tokens", "120").code == 0  # told briefly, it fits
    tight = kb("search", "axolotl", "--json", "--max-tokens", "60")  # its envelope alone does not fit
    assert tight.json["error"]["code"] == "USAGE_ERROR" and "too small" in tight.json["error"]["message"]


def test_the_resident_process_answers_from_the_healthy_repositories(two):
    from gsd_research.researcher import resident
    from gsd_research.researcher.resident_server import Server

    where = _hurt(two, "emptied_collection")  # emptied in place: the files stay, the process is not stale
    server = Server()

    assert server.warm() is not None  # it warms up on the healthy repository
    reply, stop = server.answer({"query": "axolotl", "repo": None, "n_fragments": 5, "n_documents": 5,
                                 "mode": "hybrid", "max_tokens": 2000, "v": resident.PROTOCOL, "key": server.key})

    assert stop is False and reply["ok"]["documents"][0]["repository"] == "ok", reply
    assert reply["ok"]["metadata"]["skipped_repositories"][0]["repository"] == "r"
    alone, _ = server.answer({"query": "axolotl", "repo": "r", "n_fragments": 5, "n_documents": 5, "mode": "hybrid",
                              "v": resident.PROTOCOL, "key": server.key})
    assert "ok" not in alone  # the caller's own search names the damage
    assert where.is_dir()


def _only_the_index_run(error: dict, code: str = "INDEX_DAMAGED") -> None:
    assert error["code"] == code, error
    assert len(error["suggestions"]) == 1 and error["suggestions"][0].startswith("Run: researcher index r"), error
    assert "--mode" not in json.dumps(error) and 'mode \\"lexical\\"' not in json.dumps(error), error


@pytest.mark.parametrize("keywords", ["garbled", "removed"])
def test_with_both_stores_damaged_the_advice_is_the_index_run_alone_and_it_repairs_both(tmp_path, home, keywords):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    seed_model()
    kb("repo", "add", "r", str(make_repo(tmp_path / "repo", DOCS)), "--json")
    kb("index", "r", "--json")
    store, lexical = home / "repositories" / "r" / "chroma", home / "repositories" / "r" / "lexical.sqlite"
    shutil.rmtree(store)
    if keywords == "garbled":
        _garble(lexical)
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{lexical}{suffix}").unlink(missing_ok=True)
    next_process()

    for mode in ("hybrid", "vector"):
        vector = kb("search", "axolotl", "--repo", "r", "--mode", mode, "--json")
        _only_the_index_run(vector.json["error"])
        assert str(store) in vector.json["error"]["message"]
    _only_the_index_run(KnowledgeBaseTools(ServiceFactory()).search_documents("axolotl", "r")["error"])
    if keywords == "garbled":  # the keyword index's own error: the same single fix
        by_keywords = kb("search", "axolotl", "--repo", "r", "--mode", "lexical", "--json")
        _only_the_index_run(by_keywords.json["error"])
        assert str(lexical) in by_keywords.json["error"]["message"]
    else:
        assert not lexical.exists()  # the check created nothing

    out = kb("index", "r", "--json")

    assert out.code == 0 and out.json["results"][0]["documents_indexed"] == 3, out.stdout
    next_process()
    for mode in ("lexical", "vector", "hybrid"):
        found = kb("search", "okapi", "--repo", "r", "--mode", mode, "--json")
        assert found.json["documents"][0]["document_path"] == "b.md", (mode, found.stdout)
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None


def test_a_store_removed_while_index_writes_it_is_named_and_the_next_run_repairs_it(tmp_path, home, monkeypatch):
    """Chroma's writes to a store whose folder was deleted under it fail with SQLite's "attempt to write a readonly
    database": that was an INTERNAL_ERROR."""
    from gsd_research.researcher.services import index_service

    seed_model()
    docs = {f"d{i}.md": f"# D{i}\n\nAnimal number {i}: the {w}.\n" for i, w in enumerate(("axolotl", "okapi",
                                                                                          "quokka", "tapir"))}
    kb("repo", "add", "r", str(make_repo(tmp_path / "repo", docs)), "--json")
    store = home / "repositories" / "r" / "chroma"
    monkeypatch.setattr(index_service, "BATCH_DOCUMENTS", 1)  # one document per write
    write, writes = index_service.IndexService._write, []

    def removing(self, documents, result):
        done = write(self, documents, result)
        writes.append(documents[0].path)
        if len(writes) == 2:
            shutil.rmtree(store)  # by hand, between two writes of the run
        return done

    monkeypatch.setattr(index_service.IndexService, "_write", removing)
    out = kb("index", "r", "--json")

    error = out.json["error"]
    assert out.code != 0 and error["code"] == "INDEX_DAMAGED", out.stdout
    assert str(store) in error["message"] and "removed" in error["message"], error
    assert error["suggestions"][0].startswith("Run: researcher index r again"), error
    assert not (home / "logs" / "errors.log").exists()
    monkeypatch.setattr(index_service.IndexService, "_write", write)

    again = kb("index", "r", "--json")  # this same process (an MCP server would be one): a new store

    assert again.code == 0, again.stdout
    result = again.json["results"][0]
    assert result["documents_indexed"] == 4 and "embedded again" in result["repaired"], result
    next_process()
    for i, word in enumerate(("axolotl", "okapi", "quokka", "tapir")):
        found = kb("search", word, "--repo", "r", "--mode", "vector", "--json")
        assert found.json["documents"][0]["document_path"] == f"d{i}.md", found.stdout
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None


@pytest.mark.parametrize("vectors_lost", [False, True])
def test_a_keyword_index_deleted_by_hand_is_indexed_again_by_the_next_run(tmp_path, home, vectors_lost):
    """Only the documents it lacks, and with some vectors lost too, those as well: the advice's one run repairs
    both (a keyword index deleted by hand stayed empty: the run found every document unchanged)."""
    from tests.test_researcher_vectors_lost import empty

    seed_model()
    kb("repo", "add", "r", str(make_repo(tmp_path / "repo", DOCS)), "--json")
    kb("index", "r", "--json")
    lexical = home / "repositories" / "r" / "lexical.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{lexical}{suffix}").unlink(missing_ok=True)
    if vectors_lost:
        empty(home / "repositories" / "r" / "chroma", "a.md")
    next_process()
    if vectors_lost:
        _only_the_index_run(kb("search", "okapi", "--repo", "r", "--json").json["error"])

    out = kb("index", "r", "--json").json["results"][0]

    assert out["documents_indexed"] == 3 and "keyword index" in out["repaired"], out
    next_process()
    for word, path in (("axolotl", "a.md"), ("okapi", "b.md"), ("quokka", "c.md")):
        for mode in ("lexical", "vector"):
            found = kb("search", word, "--repo", "r", "--mode", mode, "--json")
            assert found.json["documents"][0]["document_path"] == path, (mode, found.stdout)
    again = kb("index", "r", "--json").json["results"][0]
    assert again["documents_skipped"] == 3 and again["repaired"] is None, again
