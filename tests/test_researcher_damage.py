"""The damage matrix of a repository index, one table: each damage is named by search (INDEX_DAMAGED and the
one fix) or is work an index run finds by itself, and after `researcher index r` search answers as before the
damage: the same top five documents, the planted identifier first."""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.researcher_fixtures import (
    MATRIX_DOCS as DOCS,
)
from tests.researcher_fixtures import (
    MATRIX_OTHER as OTHER,
)
from tests.researcher_fixtures import (
    QUERY,
    empty_vectors,
    indexed_copy,
    kb,
    make_repo,
    next_process,
    recorded,
    seed_model,
)


def _top5() -> list[str]:
    out = kb("search", QUERY, "--repo", "r", "--documents", "5", "--json")
    assert out.code == 0, out.stdout
    return [d["document_path"] for d in out.json["documents"]]


def _index(name: str = "r") -> dict:
    out = kb("index", name, "--json")
    assert out.code == 0, out.stdout
    return out.json["results"][0]


def _alone(*args: str):
    """`researcher ARGS --json` as a process of its own would see the stores (Chroma's core does not recover
    from a panic in the process it happened in)."""
    out = kb(*args, "--json")
    next_process()
    return out


def _wipe_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{state / 'lexical.sqlite'}{suffix}").unlink(missing_ok=True)


def _empty_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    with sqlite3.connect(state / "lexical.sqlite") as conn:
        conn.execute("DELETE FROM fragments")


def _garble_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    next_process()
    for suffix in ("-wal", "-shm"):
        Path(f"{state / 'lexical.sqlite'}{suffix}").unlink(missing_ok=True)
    (state / "lexical.sqlite").write_bytes(b"not a database " * 400)


def _wipe_vectors(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    shutil.rmtree(state / "chroma")


def _foreign_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """Another repository's keyword index (holding more fragments than this one records) copied in."""
    kb("repo", "add", "o", str(make_repo(tmp / "other", OTHER)), "--json")
    _index("o")
    mark()
    next_process()
    shutil.copy(state.parent / "o" / "lexical.sqlite", state / "lexical.sqlite")


def _foreign_vectors(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """The vector store of an earlier index of the same name (another repository id) copied back in."""
    next_process()
    shutil.copytree(state / "chroma", tmp / "chroma-earlier")
    assert kb("repo", "remove", "r", "--json").code == 0
    assert kb("repo", "add", "r", str(root), "--json").code == 0
    _index()
    mark()
    next_process()
    shutil.rmtree(state / "chroma")
    shutil.copytree(tmp / "chroma-earlier", state / "chroma")


def _other_repository_vectors(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """Another repository's vector store (its collection named for that repository) copied in."""
    kb("repo", "add", "o", str(make_repo(tmp / "other", OTHER)), "--json")
    _index("o")
    mark()
    next_process()
    shutil.rmtree(state / "chroma")
    shutil.copytree(state.parent / "o" / "chroma", state / "chroma")


def _older_record(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """The state record restored from an older copy, the stores newer (a file edited in between)."""
    shutil.copy(state / "state.jsonl", tmp / "state.jsonl")
    (root / "e.md").write_text(DOCS["e.md"] + "\nRestarts are rare.\n")
    _index()
    mark()
    shutil.copy(tmp / "state.jsonl", state / "state.jsonl")


def _older_folder(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """The whole state folder restored from an older copy; files added and edited since."""
    next_process()
    shutil.copytree(state, tmp / "state-earlier")
    (root / "e.md").write_text(DOCS["e.md"] + "\nRestarts are rare.\n")
    (root / "g.md").write_text("# Giraffe\n\nThe giraffe is tall.\n")
    _index()
    mark()
    next_process()
    shutil.rmtree(state)
    shutil.copytree(tmp / "state-earlier", state)


def _foreign_folder(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """Another repository's whole state folder (its record, matching its stores) copied over this one's."""
    kb("repo", "add", "o", str(make_repo(tmp / "other", OTHER)), "--json")
    _index("o")
    mark()
    next_process()
    shutil.rmtree(state)
    shutil.copytree(state.parent / "o", state)


def _keyword_page_overwritten(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    next_process()
    _overwrite_page(state / "lexical.sqlite")


def _cut_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    with sqlite3.connect(state / "lexical.sqlite") as conn:
        conn.execute("DELETE FROM fragments WHERE document_path = 'b.md'")


def _folder_for_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    _wipe_keywords(state, root, tmp, mark)
    (state / "lexical.sqlite").mkdir()


def _other_database_for_keywords(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    _wipe_keywords(state, root, tmp, mark)
    with sqlite3.connect(state / "lexical.sqlite") as conn:
        conn.execute("CREATE TABLE notes (x)")


def _rows_ahead(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """More keyword rows than the record counts: research memory writes them ahead of the embedding."""
    mark()
    with sqlite3.connect(state / "lexical.sqlite") as conn:
        conn.execute("INSERT INTO fragments (fragment_id, text, document_path, fragment_index, breadcrumb) "
                     "VALUES ('x:0', 'a note written ahead', 'x.md', 0, '')")


def _count_edited(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    record = state / "state.jsonl"
    record.write_text(re.sub(r'"fragments": ?\d+', '"fragments": 999999', record.read_text(), count=1))


def _vector_file(change: Callable[[Path], None]) -> Damage:
    def harm(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
        mark()
        next_process()
        change(state / "chroma" / "chroma.sqlite3")
    return harm


def _overwrite_page(db: Path) -> None:
    with open(db, "r+b") as fh:
        fh.seek(4096)
        fh.write(b"\xde\xad\xbe\xef" * 1024)


def _collection_deleted(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    next_process()
    empty_vectors(state / "chroma")


def _some_vectors_deleted(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    next_process()
    empty_vectors(state / "chroma", "a.md", "b.md")


def _in_place_of_vectors(link: bool) -> Damage:
    def harm(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
        _wipe_vectors(state, root, tmp, mark)
        if link:  # a store moved to a disk no longer mounted
            (state / "chroma").symlink_to(tmp / "unmounted" / "chroma", target_is_directory=True)
        else:
            (state / "chroma").write_text("not a store")
    return harm


def _both_stores(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    _garble_keywords(state, root, tmp, mark)
    shutil.rmtree(state / "chroma")


def _killed_run(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    """A run killed while it rewrote b.md: the record names it in flight, its vectors are gone, no run holds the
    lock."""
    from gsd_research.researcher.state import StateGateway

    mark()
    next_process()
    StateGateway(state).update(in_flight=["b.md"])
    empty_vectors(state / "chroma", "b.md")


def _file_for_state_folder(state: Path, root: Path, tmp: Path, mark: Callable) -> None:
    mark()
    next_process()
    state.rename(tmp / "state-elsewhere")
    state.write_text("hi\n")


Damage = Callable[[Path, Path, Path, Callable], None]  # calls its last argument just before it harms
MATRIX: list[tuple] = [  # (damage, what search says before the repair (None: answers)[, what status says changed])
    ("keyword index deleted", _wipe_keywords, "is missing"),
    ("keyword index emptied", _empty_keywords, "holds 0 of the"),
    ("keyword index cut short", _cut_keywords, "holds 5 of the 6"),
    ("keyword index garbled", _garble_keywords, "is damaged"),
    ("a folder in place of the keyword index", _folder_for_keywords, "is not a regular file"),
    ("another SQLite database in place of the keyword index", _other_database_for_keywords, "another SQLite database"),
    ("keyword rows written ahead of the record", _rows_ahead, None),
    ("the record's fragment count edited by hand", _count_edited, "of the 999999 fragments"),
    ("vector store deleted", _wipe_vectors, "is missing"),
    ("vector database removed", _vector_file(Path.unlink), "is missing"),
    ("vector database truncated to nothing", _vector_file(lambda db: db.write_bytes(b"")), "is missing"),
    ("vector database cut short", _vector_file(lambda db: db.write_bytes(db.read_bytes()[:5000])), "cannot be read"),
    ("a page inside the vector database overwritten", _vector_file(_overwrite_page), "cannot be read"),
    ("vector collection deleted through Chroma", _collection_deleted, "is missing"),
    ("some documents' vectors deleted through Chroma", _some_vectors_deleted, "holds 4 of the 6"),
    ("a file in place of the vector store", _in_place_of_vectors(link=False), "is missing"),
    ("a dangling link in place of the vector store", _in_place_of_vectors(link=True), "is missing"),
    ("both stores damaged", _both_stores, "is damaged"),
    ("a killed run's documents in flight", _killed_run, "was interrupted"),
    ("another repository's keyword index copied in", _foreign_keywords, "belongs to another index"),
    ("an earlier index's vector store copied in", _foreign_vectors, "belongs to another index"),
    ("another repository's vector store copied in", _other_repository_vectors, "belongs to another index"),
    ("state record restored from an older copy", _older_record, "is newer than the state record", "0 new, 1 edited"),
    ("state folder restored from an older copy", _older_folder, None, "1 new, 1 edited, 0 removed"),
    ("another repository's whole state folder copied in", _foreign_folder, "belongs to another index"),
    ("a page inside the keyword index overwritten", _keyword_page_overwritten, "is damaged"),
    ("a file in place of the state folder", _file_for_state_folder, "NOT_FOUND"),
]


@pytest.mark.parametrize("harm, named, changed", [(*row[1:], None)[:3] for row in MATRIX], ids=[row[0] for row in MATRIX])
def test_every_damage_is_named_then_repaired_by_the_index_run(tmp_path, home, harm, named, changed):
    root = indexed_copy(tmp_path, home, "r", DOCS)
    state = home / "repositories" / "r"
    before: list[str] = []
    harm(state, root, tmp_path, lambda: before.extend(_top5()))
    next_process()
    record = recorded(state) if state.is_dir() else None

    diagnosed, status, refused = (_alone(*args) for args in (  # each a process of its own, as a user's
        ("search", QUERY, "--repo", "r"), ("status", "r"), ("remove", "r", "a.md")))  # remove: refused
    kept = recorded(state) if state.is_dir() else None
    repaired = _index()
    next_process()

    if named is None:
        assert diagnosed.code == 0 and status.json["repositories"][0]["damaged"] is None, diagnosed.stdout
    elif named == "NOT_FOUND":
        assert diagnosed.json["error"]["code"] == "NOT_FOUND", diagnosed.stdout
        assert repaired["repaired"] and "moved aside" in repaired["repaired"], repaired
    else:
        error = diagnosed.json["error"]
        assert error["code"] == "INDEX_DAMAGED" and named in error["message"], error
        assert "'r'" in error["message"] and error["suggestions"][0].startswith("Run: researcher index r"), error
        assert len(error["suggestions"]) == 1, error
        damaged = status.json["repositories"][0]["damaged"]
        assert named in damaged and damaged.endswith(f". {error['suggestions'][0]}"), damaged
        assert repaired["repaired"] or "interrupted" in named, repaired
        if "interrupted" not in named:  # a killed run is resumed by any call; damage refused, nothing forgotten
            assert refused.json["error"]["code"] == "INDEX_DAMAGED" and kept == record, refused.stdout
    assert repaired["documents_failed"] == 0, repaired
    assert changed is None or changed in status.json["repositories"][0]["changed"], status.stdout
    assert _top5() == before and before[0] == "b.md"
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None
    assert kb("status", "r", "--json").json["repositories"][0]["changed"] is None


def test_a_deleted_state_record_is_named_missing_and_the_index_run_repairs_it(tmp_path, home):
    """Search answers NOT_FOUND ("Not indexed yet") without a record; status names what happened."""
    indexed_copy(tmp_path, home, "r", DOCS)
    state = home / "repositories" / "r"
    before = _top5()
    (state / "state.jsonl").unlink()
    next_process()

    damaged = _alone("status", "r").json["repositories"][0]["damaged"]
    repaired = _index()
    next_process()

    assert damaged.startswith("The state record of repository 'r' is missing"), damaged
    assert damaged.endswith(". Run: researcher index r (sets the damaged stores aside and indexes every document "
                            "again)"), damaged
    assert repaired["repaired"] and _top5() == before


HELD = [  # (store, what SQLite says while another process writes it, whether it is damage with no writer):
    # a lock is another process's whatever holds it; a WAL or hot journal to recover, only while a run writes
    ("vector store, a writer's WAL to recover", "chroma_gateway", sqlite3.SQLITE_READONLY_RECOVERY, True),
    ("vector store, 'attempt to write a readonly database'", "chroma_gateway", sqlite3.SQLITE_READONLY, True),
    ("vector store, busy in recovery", "chroma_gateway", sqlite3.SQLITE_BUSY_RECOVERY, False),
    ("keyword index, shared memory a writer holds", "lexical_gateway", sqlite3.SQLITE_READONLY_CANTINIT, True),
]


@pytest.mark.parametrize("gateway, code, damage_alone", [row[1:] for row in HELD], ids=[row[0] for row in HELD])
def test_a_store_another_process_holds_is_no_damage_and_no_run_repairs_it(tmp_path, home, monkeypatch, gateway,
                                                                          code, damage_alone):
    """The stores' read-only checks meet another process's lock: status names no damage while a run writes,
    the index run sets nothing aside and search answers as before. With no run writing, a journal nothing can
    recover (a folder this process cannot write) is named, not "held" forever."""
    import importlib
    import os

    from gsd_research.researcher.gateways.lock_gateway import RepositoryLock

    indexed_copy(tmp_path, home, "r", DOCS)
    before = _top5()
    db = home / "repositories" / "r" / "chroma" / "chroma.sqlite3"
    os.utime(db, ns=(db.stat().st_atime_ns, db.stat().st_mtime_ns + 10**9))  # not as committed: SQLite checks it

    def held(path):
        exc = sqlite3.OperationalError("attempt to write a readonly database")
        exc.sqlite_errorcode = code
        raise exc

    monkeypatch.setattr(importlib.import_module(f"gsd_research.researcher.gateways.{gateway}"), "read_only", held)
    with RepositoryLock(home / "repositories" / "r", "researcher index r").hold():
        during, searched = _alone("status", "r").json["repositories"][0], _top5()
    alone = _alone("status", "r").json["repositories"][0]
    run = _index()

    assert during["damaged"] is None and run["repaired"] is None, (during, run)
    assert searched == before
    assert (alone["damaged"] is not None) == damage_alone, alone


def test_a_keyword_index_another_process_holds_is_a_retryable_error_not_damage(tmp_path, home, monkeypatch):
    """A process holding the keyword index exclusively past SQLite's wait: LOCKED, and no damage afterwards."""
    import functools

    indexed_copy(tmp_path, home, "r", DOCS)
    holder = sqlite3.connect(home / "repositories" / "r" / "lexical.sqlite")
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN IMMEDIATE")
    next_process()
    monkeypatch.setattr(sqlite3, "connect", functools.partial(sqlite3.connect, timeout=0.05))

    held = kb("search", QUERY, "--repo", "r", "--mode", "lexical", "--json")
    holder.close()
    after = _alone("status", "r")

    assert held.json["error"]["code"] == "LOCKED" and "held by another process" in held.json["error"]["message"]
    assert after.json["repositories"][0]["damaged"] is None, after.stdout


@pytest.mark.parametrize("committed", [False, True],
                         ids=["between the stamps and the record's commit", "after the record's commit"])
def test_a_search_racing_an_index_run_finds_it_pending_not_damaged(tmp_path, home, monkeypatch, committed):
    """The search reads the record, then a run stamps the stores (and commits) before the search probes them:
    a stamp one ahead of the record it read, never the advice to rebuild."""
    from gsd_research.researcher import health
    from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway
    from gsd_research.researcher.service_factory import ServiceFactory

    root = indexed_copy(tmp_path, home, "r", DOCS)
    factory = ServiceFactory()
    search = factory.search_service(factory.repository_service.get_repository("r"))
    assert search.head is not None and not search.head.in_flight  # read before the run begins
    seen: list[health.Diagnosis] = []
    replace = LexicalGateway.replace_documents

    def stamping(self, paths, rows, stamp=None):
        replace(self, paths, rows, stamp)
        if not committed:
            seen.append(search.diagnose("lexical"))

    monkeypatch.setattr(LexicalGateway, "replace_documents", stamping)
    (root / "e.md").write_text(DOCS["e.md"] + "\nRestarts are rare.\n")
    _index()
    if committed:
        seen.append(search.diagnose("lexical"))

    assert seen and {d.state for d in seen} == {health.PENDING}, seen


def _memory_removed(n: int) -> Callable:
    def harm(store, lexical: Path) -> None:
        ids = [row[0] for row in store.conn.execute("SELECT id FROM entries ORDER BY id LIMIT ?", (n,))]
        assert store.remove(ids) == n
    return harm


def _memory_emptied_while_writes_lead(store, lexical: Path) -> None:
    from tests.researcher_fixtures import memory_entries

    memory_entries(1).close()  # a write after the embedding: pending from now on
    with sqlite3.connect(lexical) as conn:
        conn.execute("DELETE FROM fragments")


def _memory_cut_short(store, lexical: Path) -> None:
    with sqlite3.connect(lexical) as conn:
        conn.execute("DELETE FROM fragments WHERE rowid > 1")


MEMORY: list[tuple[str, Callable, str | None]] = [  # research memory writes its keyword rows ahead of the embedding
    ("some entries removed ahead of the embedding", _memory_removed(2), None),
    ("every entry removed ahead of the embedding", _memory_removed(6), None),
    ("keyword index emptied while writes lead", _memory_emptied_while_writes_lead, "holds 0 of the"),
    ("keyword index cut short after the writes were settled", _memory_cut_short, "holds 1 of the"),
]


@pytest.mark.parametrize("harm, named", [row[1:] for row in MEMORY], ids=[row[0] for row in MEMORY])
def test_research_memory_writes_ahead_are_no_damage_and_its_damage_is_named(home, monkeypatch, harm, named):
    from gsd_research.researcher import api
    from tests.researcher_fixtures import memory_entries

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    store = memory_entries(6)
    assert _index("research-memory")["repaired"] is None
    harm(store, Path(api.repo_dir("research-memory")) / "lexical.sqlite")
    store.close()
    next_process()

    found = kb("search", "flux capacitor gasket", "--repo", "research-memory", "--json")
    status = kb("status", "research-memory", "--json").json["repositories"][0]
    repaired = _index("research-memory")

    if named is None:
        assert found.code == 0 and status["damaged"] is None and repaired["repaired"] is None, (found.stdout, repaired)
    else:
        assert found.json["error"]["code"] == "INDEX_DAMAGED" and named in found.json["error"]["message"], found.stdout
        assert "researcher index research-memory" in status["damaged"] and repaired["repaired"], repaired
    assert kb("status", "research-memory", "--json").json["repositories"][0]["damaged"] is None


def test_an_index_run_in_progress_is_no_damage_to_a_search(tmp_path, home):
    """A run rewriting every document deletes their vectors before it adds the new ones; it holds the lock."""
    from gsd_research.researcher.gateways.lock_gateway import RepositoryLock
    from gsd_research.researcher.state import StateGateway

    indexed_copy(tmp_path, home, "r", DOCS)
    state = home / "repositories" / "r"

    with RepositoryLock(state, "researcher index r").hold():
        StateGateway(state).update(in_flight=sorted(DOCS))
        empty_vectors(state / "chroma", *sorted(DOCS))  # the run deleted their vectors, the collection stays
        next_process()
        during = kb("search", QUERY, "--repo", "r", "--mode", "vector", "--json")
    after = kb("search", QUERY, "--repo", "r", "--mode", "vector", "--json")

    assert during.code == 0, during.stdout
    assert after.json["error"]["code"] == "INDEX_DAMAGED" and "interrupted" in after.json["error"]["message"]


def _search_metadata(surface: str, tmp: Path) -> dict:
    """The metadata of one search of repository r through `surface`."""
    import json

    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    if surface == "human table":
        printed = kb("search", QUERY, "--repo", "r").stdout
        return {"note": printed.split("note: ", 1)[1]} if "note: " in printed else {}
    if surface == "mcp":
        return KnowledgeBaseTools(ServiceFactory()).search_documents(QUERY, "r")["metadata"]
    if surface == "queries file":
        (tmp / "q.jsonl").write_text(json.dumps({"id": 1, "query": QUERY}) + "\n")
        out = kb("search", "--queries-file", str(tmp / "q.jsonl"), "--repo", "r", "--json")
        return json.loads(out.stdout.splitlines()[0])["metadata"]
    return kb("search", QUERY, "--repo", "r", "--json").json["metadata"]


def _run_in_progress(state: Path):
    from gsd_research.researcher.gateways.lock_gateway import RepositoryLock

    return RepositoryLock(state, "researcher index r").hold()


@contextlib.contextmanager
def _run_killed(state: Path):
    """A run killed while it rewrote a document: the record names it in flight, no process holds the lock."""
    from gsd_research.researcher.state import StateGateway

    StateGateway(state).update(in_flight=["b.md"])
    yield


@contextlib.contextmanager
def _run_killed_between_batches(state: Path):
    """A run killed between two batches: nothing in flight, documents it converted left in its spool."""
    (state / "spool.jsonl").write_text('{"path": "new.md"}\n')
    yield


UNFINISHED = [  # (an index run's state, what the note says during it, the note after the next run)
    ("in progress", _run_in_progress, "An index run of r is in progress"),
    ("killed while documents were in flight", _run_killed, "An index run of r was interrupted"),
    ("killed between two batches", _run_killed_between_batches, "An index run of r was interrupted"),
]


@pytest.mark.parametrize("run, said", [row[1:] for row in UNFINISHED], ids=[row[0] for row in UNFINISHED])
@pytest.mark.parametrize("surface", ["command", "queries file", "mcp", "human table"])
def test_a_search_from_an_unfinished_index_run_says_so_in_a_note(tmp_path, home, surface, run, said):
    """A rebuild empties the record first, a killed run leaves documents half rewritten: their searches may
    lack documents, never silently."""
    indexed_copy(tmp_path, home, "r", DOCS)
    state = home / "repositories" / "r"

    with run(state):
        during = _search_metadata(surface, tmp_path)
        status = kb("status", "r", "--json").json["repositories"][0]["changed"]
    kb("index", "r", "--json")
    after = _search_metadata(surface, tmp_path)

    assert said in during.get("note", "") and said in status, (during, status)
    assert "note" not in after, after


LOOKS = [  # (the lock held at each look, documents in flight in the record) -> the run the note speaks of
    ("held", [True], False, "running"),
    ("free, nothing left", [False], False, None),
    ("free, work left", [False, False], True, "interrupted"),
    ("free, then a run began and wrote its record", [False, True], True, "running"),
]


@pytest.mark.parametrize("looks, in_flight, run", [row[1:] for row in LOOKS], ids=[row[0] for row in LOOKS])
def test_an_unfinished_run_is_called_interrupted_only_while_no_run_holds_the_lock(tmp_path, looks, in_flight, run):
    """A run starting between the lock's look and the record's read wrote that work: it is in progress."""
    from gsd_research.researcher.state import StateGateway

    state = StateGateway(tmp_path)
    state.save_checksums({}, in_flight=["a.md"] if in_flight else [])
    answers = iter(looks)

    assert state.unfinished_run(lambda: next(answers)) == run


def test_a_store_removed_while_the_index_run_writes_it_is_named_and_the_next_run_repairs_it(tmp_path, home,
                                                                                            monkeypatch):
    """Chroma's writes to a store whose folder was deleted under it fail ("attempt to write a readonly
    database"): INDEX_DAMAGED with the fix, not an internal error; the same process's next run writes a new store."""
    from gsd_research.researcher.services import index_service

    seed_model()
    kb("repo", "add", "r", str(make_repo(tmp_path / "repo", DOCS)), "--json")
    store = home / "repositories" / "r" / "chroma"
    monkeypatch.setattr(index_service, "BATCH_DOCUMENTS", 1)
    write, writes = index_service.IndexService._write, []

    def removing(self, documents, result):
        done = write(self, documents, result)
        writes.append(documents[0].path)
        if len(writes) == 2:
            shutil.rmtree(store)
        return done

    monkeypatch.setattr(index_service.IndexService, "_write", removing)
    failed = kb("index", "r", "--json")
    monkeypatch.setattr(index_service.IndexService, "_write", write)
    again = kb("index", "r", "--json")
    next_process()

    error = failed.json["error"]
    assert error["code"] == "INDEX_DAMAGED" and str(store) in error["message"] and "removed" in error["message"]
    assert error["suggestions"][0].startswith("Run: researcher index r"), error
    assert not (home / "logs" / "errors.log").exists()
    assert again.code == 0 and again.json["results"][0]["repaired"], again.stdout
    assert _top5()[0] == "b.md"
    assert kb("status", "r", "--json").json["repositories"][0]["damaged"] is None
