"""A vector store deleted, truncated or emptied by hand: search names it (INDEX_DAMAGED, with the fix) on every
path (CLI, --queries-file, MCP tools, the resident process), status reports it, index embeds the documents whose
vectors are gone, and no read creates an empty store in its place."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gsd_research.researcher.state import StateGateway
from tests.researcher_fixtures import kb, make_repo, seed_model

DOCS = {"a.md": "# A\n\nThe axolotl regrows limbs.\n", "b.md": "# B\n\nThe okapi is shy.\n",
        "c.md": "# C\n\nThe quokka smiles at tourists.\n"}
DAMAGES = ("deleted_folder", "removed_db", "truncated_db", "garbled_db", "emptied_collection")
# a separate process, as a user or another tool would: the collection deleted, or some documents' vectors
EMPTY = ("import sys, chromadb; from chromadb.config import Settings; "
         "c = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False)); "
         "paths = sys.argv[3:]; col = c.get_collection(sys.argv[2]); "
         "col.delete(where={'document_path': {'$in': paths}}) if paths else c.delete_collection(sys.argv[2])")


@pytest.fixture
def indexed(tmp_path, home):
    seed_model()
    root = make_repo(tmp_path / "repo", DOCS)
    assert kb("repo", "add", "r", str(root), "--json").code == 0
    out = kb("index", "r", "--json")
    assert out.json["results"][0]["documents_indexed"] == 3, out.stdout
    return home / "repositories" / "r" / "chroma"


def next_process() -> None:
    """What the next command sees: a fresh process, without Chroma's clients cached by this one, nor SQLite
    connections an earlier command left to the garbage collector (SQLite shares one file's WAL index among a
    process's connections, so a live one would serve a garbled keyword index from the old WAL)."""
    import gc

    from chromadb.api.shared_system_client import SharedSystemClient

    from gsd_research.researcher.gateways import chroma_gateway

    SharedSystemClient.clear_system_cache()
    getattr(chroma_gateway, "_OPENED", {}).clear()
    gc.collect()


def empty(store: Path, *paths: str, collection: str = "researcher-r") -> None:
    proc = subprocess.run([sys.executable, "-c", EMPTY, str(store), collection, *paths],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def damage(store: Path, kind: str) -> None:
    db = store / "chroma.sqlite3"
    if kind == "deleted_folder":
        shutil.rmtree(store)
    elif kind == "removed_db":
        db.unlink()
    elif kind == "truncated_db":
        db.write_bytes(b"")
    elif kind == "garbled_db":
        db.write_bytes(db.read_bytes()[:5000])
    else:
        empty(store)
    next_process()


def untouched(store: Path, kind: str) -> None:
    """The damaged store as the damage left it: no read created or re-initialised one."""
    db = store / "chroma.sqlite3"
    if kind == "deleted_folder":
        assert not store.exists()
    elif kind == "removed_db":
        assert not db.exists()
    elif kind == "truncated_db":
        assert db.stat().st_size == 0
    elif kind == "garbled_db":
        assert db.stat().st_size == 5000


def assert_damaged(error: dict, store: Path) -> None:
    assert error["code"] == "INDEX_DAMAGED", error
    assert str(store) in error["message"] and "'r'" in error["message"], error
    assert error["suggestions"][0].startswith("Run: researcher index r"), error


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_lost_vector_store_is_named_by_every_search_and_status_then_embedded_again_by_index(indexed, tmp_path,
                                                                                                 kind):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools, tool_result
    from gsd_research.researcher.service_factory import ServiceFactory

    damage(indexed, kind)

    for mode in ("hybrid", "vector"):
        search = kb("search", "axolotl", "--mode", mode, "--json")
        assert search.code != 0
        assert_damaged(search.json["error"], indexed)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1, "query": "axolotl"}\n{"id": 2, "query": "okapi"}\n')
    lines = [json.loads(x) for x in kb("search", "--queries-file", str(queries), "--json").stdout.splitlines()]
    assert [x["id"] for x in lines] == [1, 2]  # each line names the damage, as the single query does
    for line in lines:
        assert_damaged(line["error"], indexed)
    tools = KnowledgeBaseTools(ServiceFactory())
    for answer in (tools.search_fragments("axolotl"), tools.search_documents("axolotl", "r")):
        assert answer["success"] is False
        assert_damaged(answer["error"], indexed)
        assert tool_result(answer).is_error is True
    lexical = kb("search", "axolotl", "--mode", "lexical", "--json")  # keywords only: asked for, answered
    assert lexical.json["documents"][0]["document_path"] == "a.md"
    status = kb("status", "r", "--json").json["repositories"][0]
    assert str(indexed) in status["damaged"] and "researcher index r" in status["damaged"], status
    assert "researcher index r" in kb("status", "r").stdout
    assert tools.get_index_status("r")["repositories"][0]["damaged"] == status["damaged"]
    untouched(indexed, kind)

    out = kb("index", "r", "--json")

    assert out.code == 0, out.stdout
    result = out.json["results"][0]
    assert result["documents_indexed"] == 3 and result["documents_skipped"] == 0, result
    assert str(indexed) in result["repaired"] and "3 document(s) embedded again" in result["repaired"], result
    next_process()
    found = kb("search", "axolotl", "--mode", "vector", "--json")
    assert found.json["documents"][0]["document_path"] == "a.md", found.stdout
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None
    again = kb("index", "r", "--json").json["results"][0]
    assert again["documents_skipped"] == 3 and again["repaired"] is None, again


def test_vectors_lost_for_some_documents_are_embedded_again_and_only_theirs(indexed):
    empty(indexed, "a.md")  # one of three: search and status name it, index embeds that one again
    next_process()
    assert "holds 2 of the 3 fragments" in kb("status", "r", "--json").json["repositories"][0]["damaged"]
    partial = kb("search", "okapi", "--mode", "vector", "--json")
    assert partial.code != 0 and partial.json["error"]["code"] == "INDEX_DAMAGED"

    out = kb("index", "r", "--json").json["results"][0]

    assert out["documents_indexed"] == 1 and out["documents_skipped"] == 2, out
    assert "2 of the 3 fragments" in out["repaired"] and "1 document(s) embedded again" in out["repaired"], out
    assert kb("search", "axolotl", "--mode", "vector", "--json").json["documents"][0]["document_path"] == "a.md"

    empty(indexed, "a.md", "b.md")  # two of three: far below what the index records
    next_process()
    status = kb("status", "r", "--json").json["repositories"][0]
    assert "holds 1 of the 3 fragments" in status["damaged"] and "researcher index r" in status["damaged"], status
    out = kb("index", "r", "--json").json["results"][0]
    assert out["documents_indexed"] == 2 and out["documents_skipped"] == 1, out
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None


def test_a_store_deleted_under_this_process_is_repaired_by_it(indexed):
    """A long-lived process (the MCP server) that had the store open: a single-document call refuses until the
    index run, which writes a new store, not the deleted one Chroma still holds here; the next process finds it."""
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    tools = KnowledgeBaseTools(ServiceFactory())
    assert tools.search_documents("axolotl")["documents"][0]["document_path"] == "a.md"
    shutil.rmtree(indexed)

    assert_damaged(tools.search_documents("axolotl")["error"], indexed)
    for call in (lambda: tools.add_to_index("r", "a.md"), lambda: tools.remove_from_index("r", "b.md")):
        refused = call()
        assert refused["success"] is False
        assert_damaged(refused["error"], indexed)
    assert not indexed.exists()
    assert kb("index", "r", "--json").json["results"][0]["documents_indexed"] == 3
    assert tools.search_documents("okapi")["documents"][0]["document_path"] == "b.md"

    next_process()
    assert (indexed / "chroma.sqlite3").is_file()
    found = kb("search", "okapi", "--mode", "vector", "--json")
    assert found.json["documents"][0]["document_path"] == "b.md", found.stdout
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None


def test_healthy_and_never_indexed_repositories_are_not_damaged_and_reads_create_no_store(tmp_path, home):
    seed_model()
    healthy = make_repo(tmp_path / "healthy", DOCS)
    kb("repo", "add", "healthy", str(healthy), "--json")
    kb("index", "healthy", "--json")
    kb("repo", "add", "fresh", str(make_repo(tmp_path / "fresh", DOCS)), "--json")  # never indexed
    (tmp_path / "blank").mkdir()
    (tmp_path / "blank" / "empty.md").write_text("")
    kb("repo", "add", "blank", str(tmp_path / "blank"), "--json")
    kb("index", "blank", "--json")  # indexed, but nothing to embed
    blank_store = home / "repositories" / "blank" / "chroma"
    shutil.rmtree(blank_store, ignore_errors=True)
    next_process()

    stats = {s["repository_name"]: s for s in kb("status", "--json").json["repositories"]}

    assert {name: s["damaged"] for name, s in stats.items()} == {"healthy": None, "fresh": None, "blank": None}
    assert kb("search", "axolotl", "--repo", "healthy", "--json").json["documents"][0]["document_path"] == "a.md"
    for name in ("blank", None):
        args = ("--repo", name) if name else ()
        res = kb("search", "axolotl", *args, "--json")
        assert res.code == 0 and "error" not in res.json, res.stdout
    assert not (home / "repositories" / "fresh" / "chroma").exists()
    assert not blank_store.exists()


def test_status_and_a_warm_index_read_the_store_without_chroma_and_notice_an_emptied_collection(indexed):
    empty(indexed)
    code = ("import sys, json; from gsd_research.researcher.cli import run; run(['status', 'r', '--json']); "
            "print(json.dumps([m for m in ('chromadb', 'onnxruntime', 'docling') if m in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = proc.stdout.strip().splitlines()
    assert "holds 0 of the 3 fragments" in json.loads(lines[0])["repositories"][0]["damaged"], proc.stdout
    assert json.loads(lines[-1]) == []

    proc = subprocess.run([sys.executable, "-c", "from gsd_research.researcher.cli import main; main()",
                           "index", "r", "--json"], capture_output=True, text=True, timeout=300)
    result = json.loads(proc.stdout)["results"][0]
    assert result["documents_indexed"] == 3 and "embedded again" in result["repaired"], proc.stdout


def test_recall_style_search_of_a_lost_store_answers_by_keywords_with_a_note(indexed):
    from gsd_research.researcher import api

    shutil.rmtree(indexed)
    next_process()

    out = api.search("r", "axolotl", n_fragments=3)

    assert out["mode"] == "lexical" and "INDEX_DAMAGED" in out["note"], out
    assert out["passages"][0]["document_path"] == "a.md"
    assert not indexed.exists()


def test_reading_the_store_file_directly(tmp_path):
    import sqlite3

    from gsd_research.researcher.gateways.chroma_health import VectorStoreDamaged, stored_fragments

    db = tmp_path / "chroma" / "chroma.sqlite3"
    assert stored_fragments(db, "researcher-r") == 0
    assert not db.parent.exists()
    db.parent.mkdir()
    db.write_bytes(b"")
    assert stored_fragments(db, "researcher-r") == 0 and db.stat().st_size == 0
    db.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)
    with pytest.raises(VectorStoreDamaged) as caught:
        stored_fragments(db, "researcher-r")
    assert str(db.parent) in caught.value.message and caught.value.code == "INDEX_DAMAGED"
    db.unlink()
    with sqlite3.connect(db) as conn:  # a database, but not laid out as Chroma's: Chroma is asked instead
        conn.execute("CREATE TABLE other (x)")
    assert stored_fragments(db, "researcher-r") is None


def test_a_collection_emptied_on_either_store_is_named_and_embedded_again(tmp_path, store, home):
    root = make_repo(tmp_path / "repo", DOCS)
    kb("repo", "add", "r", str(root), "--json")
    assert kb("index", "r", "--json").json["results"][0]["documents_indexed"] == 3
    url = kb("config", "show", "--json").json["config"].get("chroma_url")
    if store == "server":
        import chromadb
        from chromadb.config import Settings

        client = chromadb.HttpClient(host="127.0.0.1", port=int(url.rsplit(":", 1)[1]),
                                     settings=Settings(anonymized_telemetry=False))
        client.delete_collection("researcher-r")
    else:
        empty(home / "repositories" / "r" / "chroma")
        next_process()
    where = f"on the Chroma server {url}" if store == "server" else str(home / "repositories" / "r" / "chroma")

    search = kb("search", "axolotl", "--json")
    assert search.json["error"]["code"] == "INDEX_DAMAGED" and where in search.json["error"]["message"], search.stdout
    assert "researcher index r" in kb("status", "r", "--json").json["repositories"][0]["damaged"]

    result = kb("index", "r", "--json").json["results"][0]
    assert result["documents_indexed"] == 3 and where in result["repaired"], result
    assert kb("search", "axolotl", "--mode", "vector", "--json").json["documents"][0]["document_path"] == "a.md"
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None


@pytest.mark.parametrize("kind", ["file", "dangling_symlink"])
def test_a_file_or_a_dangling_link_in_place_of_the_store_is_named_and_replaced_by_index(indexed, tmp_path, kind):
    """A store moved to a disk no longer mounted (a link to nothing) or a file in its place: index failed on it
    (FileExistsError) after forgetting what was embedded, and search then answered by keywords alone."""
    shutil.rmtree(indexed)
    target = tmp_path / "unmounted" / "chroma"
    if kind == "file":
        indexed.write_text("not a store")
    else:
        indexed.symlink_to(target, target_is_directory=True)
    next_process()
    assert kb("search", "axolotl", "--json").json["error"]["code"] == "INDEX_DAMAGED"

    out = kb("index", "r", "--json")

    assert out.code == 0 and out.json["results"][0]["documents_indexed"] == 3, out.stdout
    assert indexed.is_dir() and not indexed.is_symlink() and not target.exists()
    next_process()
    assert kb("search", "axolotl", "--mode", "vector", "--json").json["documents"][0]["document_path"] == "a.md"


def test_a_journal_left_by_a_killed_index_run_does_not_hide_a_lost_store_from_status(indexed):
    StateGateway(indexed.parent).set_in_flight(["a.md"])  # no run holds the lock
    shutil.rmtree(indexed)
    next_process()

    status = kb("status", "r", "--json").json["repositories"][0]

    assert "holds 0 of the 3 fragments" in status["damaged"], status


def test_a_store_damaged_inside_its_database_is_index_damaged_not_a_crash(indexed):
    db = indexed / "chroma.sqlite3"
    with open(db, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xde\xad\xbe\xef" * 1024)
    next_process()

    search = kb("search", "axolotl", "--mode", "vector", "--json")

    assert search.code != 0 and search.json["error"]["code"] == "INDEX_DAMAGED", search.stdout
    assert "researcher index r" in search.stdout

    next_process()  # each command is a process of its own (Chroma's Rust core does not recover from a panic)
    out = kb("index", "r", "--json")  # the count still reads: SQLite's quick check finds the damage

    assert out.code == 0 and out.json["results"][0]["documents_indexed"] == 3, out.stdout
    assert "cannot be read" in out.json["results"][0]["repaired"], out.stdout
    next_process()
    assert kb("search", "axolotl", "--mode", "vector", "--json").json["documents"][0]["document_path"] == "a.md"


def test_an_mcp_client_can_follow_the_advice_and_search_by_keywords_meanwhile(indexed):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    shutil.rmtree(indexed)
    next_process()
    tools = KnowledgeBaseTools(ServiceFactory())

    damaged = tools.search_documents("axolotl", "r")
    assert damaged["error"]["code"] == "INDEX_DAMAGED" and any('mode "lexical"' in s for s in damaged["error"]["suggestions"])
    lexical = tools.search_documents("axolotl", "r", mode="lexical")
    assert lexical["documents"][0]["document_path"] == "a.md" and lexical["metadata"]["mode"] == "lexical"
    assert tools.search_fragments("axolotl", "r", 3, mode="lexical")["fragments"][0]["document_path"] == "a.md"
    wrong = tools.search_fragments("axolotl", "r", 3, mode="semantic")
    assert wrong["error"]["code"] == "USAGE_ERROR" and "mode must be one of" in wrong["error"]["message"]


def test_a_store_another_process_has_locked_is_not_taken_for_damaged(indexed):
    """A lock is no damage: an index run must not discard a store another process is writing."""
    import sqlite3

    from gsd_research.researcher.gateways import chroma_health

    db = indexed / "chroma.sqlite3"
    writer = sqlite3.connect(db, timeout=0)
    try:
        writer.execute("PRAGMA journal_mode=DELETE")
        writer.execute("BEGIN EXCLUSIVE")
        assert chroma_health.damaged_inside(db) is None
    finally:
        writer.rollback()
        writer.close()
    assert chroma_health.damaged_inside(db) is None
