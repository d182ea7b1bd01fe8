"""The state record of a repository index: one file, written whole, concurrent writers never lose a change,
and an index written by an older version migrated on first touch so it keeps answering."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import datetime, timezone

import pytest

from gsd_research.researcher.models import DocumentMetadata
from gsd_research.researcher.state import LEGACY, RECORD, StateGateway
from tests.researcher_fixtures import QUERY, kb, make_repo, next_process, recorded, seed_model

DOCS = {"a.md": "# Cold caches\n\nThe widget cache is cold after a restart.\n",
        "b.md": "# Codes\n\nThe frobnicator reports ERRCODE_7712 when its spool folder is full.\n",
        "c.md": "# Cache sizes\n\nA cold widget cache and a warm widget cache hold the same entries.\n"}


@pytest.fixture
def indexed(tmp_path, home):
    seed_model()
    assert kb("repo", "add", "r", str(make_repo(tmp_path / "repo", DOCS)), "--json").code == 0
    assert kb("index", "r", "--json").json["results"][0]["documents_indexed"] == 3
    return home / "repositories" / "r" / "lexical.sqlite"


def _top(result) -> str:
    assert result.code == 0, result.stdout
    return result.json["documents"][0]["document_path"]


def _doc(path: str, fragments: int) -> DocumentMetadata:
    return DocumentMetadata(file_path=path, checksum="c" * 64, indexed_at=datetime.now(timezone.utc),
                            fragment_count=fragments)


def test_an_older_index_is_migrated_into_the_record_on_first_touch_and_keeps_answering(indexed):
    import chromadb

    state = indexed.parent
    docs = recorded(state)
    head = StateGateway(state).head()
    (state / "checksums.json").write_text(json.dumps(docs))  # the layout an older version wrote
    (state / "meta.json").write_text(json.dumps({"embedding": head.embedding, "chunking": head.chunking,
                                                 "precisions": head.precisions, "recorded_fragments": 3}))
    (state / "embed.dirty").write_text("t1")
    (state / "embed.done").write_text("t1")
    (state / RECORD).unlink()
    with sqlite3.connect(state / "lexical.sqlite") as conn:  # an older version stamped no store
        conn.execute("DELETE FROM stamp")
    next_process()
    chromadb.PersistentClient(str(state / "chroma")).get_collection("researcher-r").modify(metadata={"older": 1})
    next_process()

    answer = kb("search", QUERY, "--repo", "r", "--json")

    assert _top(answer) == "b.md"
    assert recorded(state) == docs
    migrated = StateGateway(state).head()
    assert (migrated.fragments, migrated.embedding, migrated.writes_pending) == (3, head.embedding, False)
    assert not [name for name in LEGACY if (state / name).exists()]
    assert kb("index", "r", "--json").json["results"][0]["documents_skipped"] == 3  # nothing indexed again


def test_concurrent_writers_of_the_record_never_lose_each_others_change(tmp_path):
    state = StateGateway(tmp_path / "r")
    documents = {f"d{i}.md": _doc(f"d{i}.md", 2) for i in range(50)}

    def memory_writes():
        for _ in range(30):
            state.mark_written()

    writer = threading.Thread(target=memory_writes)
    writer.start()
    for i in range(30):
        state.save_checksums(dict(list(documents.items())[: i + 1]))
    writer.join()

    head = state.head()
    assert head.writes and head.writes_pending and head.fragments == 60
    assert set(state.load_checksums()) == {f"d{i}.md" for i in range(30)}


def test_a_record_that_cannot_be_read_is_taken_as_damaged_not_as_empty(tmp_path):
    state = StateGateway(tmp_path)
    state.save_checksums({"a.md": _doc("a.md", 1)})
    state.path.write_bytes(state.path.read_bytes()[:-20])  # a torn last line

    assert state.load_checksums() is None
