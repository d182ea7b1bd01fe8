"""researcher indexing: the streamed folder walk, two phases (embed into the spool, release the model, store),
resuming after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.researcher_fixtures import kb, make_repo, recorded, seed_model

BIN = Path(sys.executable).parent


def _spool(tmp_path: Path, recipe: str = "chromadb:all-MiniLM-L6-v2|max_tokens=254"):
    from gsd_research.researcher.gateways.spool_gateway import SpoolGateway

    return SpoolGateway(tmp_path / "spool.jsonl", recipe)


def _doc(path: str, checksum: str, texts: list[str], dim: int = 4):
    from gsd_research.researcher.gateways.spool_gateway import SpooledDocument
    from gsd_research.researcher.models import Fragment

    frags = [Fragment(text=t, document_path=path, fragment_index=i) for i, t in enumerate(texts)]
    vectors = [[(i + 1) / 3.0 + k * 0.1 for k in range(dim)] for i in range(len(texts))]
    return SpooledDocument(path, checksum, frags, vectors)


# -- the folder walk ------------------------------------------------------------------------------

def test_the_streamed_walk_and_the_membership_check_agree(tmp_path):
    from gsd_research.researcher.gateways.filesystem_gateway import FilesystemGateway

    files = ["b.md", "a.MD", "z/c.md", "z/y/d.txt", "notes.pdf", ".hidden.md", ".git/e.md", "node_modules/f.md",
             "z/.cache/g.md", "z/h.rst", "m/i.md"]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    fs = FilesystemGateway(tmp_path)

    walked = list(fs.iter_files(["md", "txt"]))

    assert walked == ["a.MD", "b.md", "m/i.md", "z/c.md", "z/y/d.txt"]  # stable: files sorted, then folders
    assert fs.count_files(["md", "txt"]) == 5
    assert [rel for rel in files if fs.includes(rel, ["md", "txt"])] == sorted(walked, key=files.index)
    assert not fs.includes("gone.md", ["md"])


# -- the spool file -------------------------------------------------------------------------------

def test_spool_round_trip_keeps_texts_and_float32_vectors_exactly(tmp_path):
    import numpy as np

    spool = _spool(tmp_path)
    a, b = _doc("a.md", "sha-a", ["alpha «ü»", "beta\nline"]), _doc("sub/b.md", "sha-b", [])
    spool.append([a, b])

    back = list(spool.read())

    assert [d.path for d in back] == ["a.md", "sub/b.md"]
    assert [f.text for f in back[0].fragments] == ["alpha «ü»", "beta\nline"]
    assert [f.fragment_index for f in back[0].fragments] == [0, 1]
    assert back[0].vectors == np.asarray(a.vectors, dtype=np.float32).tolist()
    assert back[1].fragments == [] and back[1].vectors == []
    assert spool.checksums() == {"a.md": "sha-a", "sub/b.md": "sha-b"}
    spool.clear()
    assert not spool.path.exists() and list(spool.read()) == [] and spool.checksums() == {}


def test_torn_damaged_and_foreign_spool_lines_are_ignored(tmp_path):
    spool = _spool(tmp_path)
    spool.append([_doc("ok.md", "1", ["fine"])])
    _spool(tmp_path, recipe="openai:text-embedding-3-small|max_tokens=254").append([_doc("other.md", "2", ["x"])])
    good = json.loads(spool.path.read_text().splitlines()[0])
    short = dict(good, path="short.md", vectors=good["vectors"][:-8])  # vector bytes do not match dim × texts
    mismatch = dict(good, path="mismatch.md", indexes=[0, 1])
    old = dict(good, path="old.md", v=0)
    with spool.path.open("a", encoding="utf-8") as fh:
        for record in (short, mismatch, old):
            fh.write(json.dumps(record) + "\n")
        fh.write("not json at all\n\x00\x00\x00\n[1, 2]\n")
        fh.write(json.dumps(dict(good, path="torn.md"))[:-20])  # a kill in the middle of a line

    assert spool.checksums() == {"ok.md": "1"}
    assert [d.path for d in spool.read()] == ["ok.md"]


def test_a_record_appended_after_a_torn_line_is_kept(tmp_path):
    """A kill -9 in the middle of a line leaves no newline: the next run's first record must not be glued to it
    (it was, and that document was counted as lost from the spool)."""
    spool = _spool(tmp_path)
    spool.append([_doc("ok.md", "1", ["fine"])])
    good = spool.path.read_text(encoding="utf-8").splitlines()[0]
    with spool.path.open("a", encoding="utf-8") as fh:
        fh.write(good.replace('"ok.md"', '"torn.md"')[:-20])  # the kill

    spool.append([_doc("next.md", "2", ["after the crash"]), _doc("last.md", "3", ["and one more"])])

    assert spool.checksums() == {"ok.md": "1", "next.md": "2", "last.md": "3"}
    assert [d.path for d in spool.read()] == ["ok.md", "next.md", "last.md"]
    assert spool.path.read_bytes().endswith(b"\n")


def test_a_spool_torn_inside_its_first_line_is_started_afresh(tmp_path):
    spool = _spool(tmp_path)
    spool.path.write_text('{"v": 2, "recipe": "chromadb', encoding="utf-8")

    spool.append([_doc("a.md", "1", ["alpha"])])

    assert [d.path for d in spool.read()] == ["a.md"]


# -- the two phases, through the real stack ----------------------------------------------------------

def _notes(n: int, words: int = 6) -> dict[str, str]:
    return {f"n{i:03}.md": f"# Note {i}\n\nNote {i} is about topic{i % 5} and marker{i}. " + "text " * words + "\n"
            for i in range(n)}


def test_the_model_is_released_before_the_vector_store_is_opened(tmp_path, home, monkeypatch):
    from gsd_research.researcher.gateways import chroma_gateway
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    seed_model()
    events: list[str] = []
    embed, release, client = DefaultEmbedder.embed, DefaultEmbedder.release, chroma_gateway._client

    def recording_release(self):
        release(self)
        events.append("release" if self.session is None else "release kept the session")

    monkeypatch.setattr(DefaultEmbedder, "embed", lambda self, texts: events.append("embed") or embed(self, texts))
    monkeypatch.setattr(DefaultEmbedder, "release", recording_release)
    monkeypatch.setattr(chroma_gateway, "_client", lambda *a: events.append("open store") or client(*a))
    kb("repo", "add", "p", str(make_repo(tmp_path / "repo", _notes(80))), "--json")

    out = kb("index", "p", "--json").json["results"][0]

    assert (out["documents_indexed"], out["documents_resumed"]) == (80, 0)
    assert events.count("embed") >= 3  # 80 documents are embedded in batches of 32
    assert events == ["embed"] * events.count("embed") + ["release", "open store"]
    assert not (home / "repositories" / "p" / "spool.jsonl").exists()
    assert kb("search", "marker42", "--json").json["documents"][0]["document_path"] == "n042.md"


def _count_embedded(monkeypatch, crash_on_call: int | None = None) -> list[int]:
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    calls: list[int] = []
    embed = DefaultEmbedder.embed

    def counting(self, texts):
        calls.append(len(texts))
        if crash_on_call is not None and len(calls) == crash_on_call:
            raise KeyboardInterrupt  # the process dies while embedding
        return embed(self, texts)

    monkeypatch.setattr(DefaultEmbedder, "embed", counting)
    return calls


def test_an_interrupted_embedding_phase_resumes_from_the_spool_without_embedding_again(tmp_path, home, monkeypatch):
    seed_model()
    docs = _notes(80)
    root = make_repo(tmp_path / "repo", docs)
    kb("repo", "add", "r", str(root), "--json")
    state = home / "repositories" / "r"
    _count_embedded(monkeypatch, crash_on_call=3)
    assert kb("index", "r", "--json").code == 130
    assert recorded(state) == {}
    assert len((state / "spool.jsonl").read_text().splitlines()) == 64  # two batches of 32 were embedded
    (root / "n005.md").write_text("# Note 5\n\nRewritten: the platypus lays eggs.\n")  # spooled, then changed

    calls = _count_embedded(monkeypatch)
    out = kb("index", "r", "--json").json["results"][0]

    assert (out["documents_indexed"], out["documents_resumed"], out["documents_failed"]) == (80, 63, 0)
    assert sum(calls) == 80 - 63  # only what was not in the spool (or changed since) is embedded
    assert not (state / "spool.jsonl").exists()
    assert kb("search", "platypus eggs", "--json").json["documents"][0]["document_path"] == "n005.md"
    assert kb("search", "marker12", "--json").json["documents"][0]["document_path"] == "n012.md"
    status = kb("status", "r", "--json").json["repositories"][0]
    assert (status["total_documents"], status["total_fragments"]) == (80, 80)


def test_documents_missing_from_the_spool_are_reported_and_indexed_next_time(tmp_path, home, monkeypatch):
    from gsd_research.researcher.gateways.spool_gateway import SpoolGateway

    seed_model()
    kb("repo", "add", "m", str(make_repo(tmp_path / "repo")), "--json")
    with monkeypatch.context() as patch:
        patch.setattr(SpoolGateway, "append", lambda self, documents: None)  # e.g. the disk was full
        lost = kb("index", "m", "--json")

    assert lost.code == 0
    out = lost.json["results"][0]
    assert (out["documents_indexed"], out["documents_failed"]) == (0, 4)
    assert out["errors"] == ["4 document(s) changed during indexing or were lost from the spool; "
                             "run the index again"]
    again = kb("index", "m", "--json").json["results"][0]
    assert (again["documents_indexed"], again["documents_failed"]) == (4, 0)


def test_an_indexed_document_that_stops_converting_loses_its_fragments(tmp_path, home):
    seed_model()
    root = make_repo(tmp_path / "repo")
    kb("repo", "add", "s", str(root), "--json")
    kb("index", "s", "--json")
    (root / "notes" / "astronomy.txt").write_bytes(b"\x00\x01binary now")

    out = kb("index", "s", "--json").json["results"][0]

    assert (out["documents_indexed"], out["documents_failed"], out["documents_skipped"]) == (0, 1, 3)
    paths = {d["document_path"] for d in kb("search", "Saturn rings telescope", "--json").json["documents"]}
    assert "notes/astronomy.txt" not in paths
    assert kb("status", "s", "--json").json["repositories"][0]["total_documents"] == 3


def test_kill_9_while_embedding_then_reindex_resumes_and_staysconsistent(tmp_path, home):
    """Killed before the store phase: nothing reached a vector store, so its kind is not the subject."""
    from tests.researcher_fixtures import consistent

    seed_model()

    docs = _notes(160, words=40)  # five spool batches of 32: the kill lands after the first
    kb("repo", "add", "k", str(make_repo(tmp_path / "repo", docs)), "--json")
    state = home / "repositories" / "k"
    proc = subprocess.Popen([str(BIN / "researcher"), "index", "k", "--json"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.time() + 120
    spool = state / "spool.jsonl"
    while time.time() < deadline and proc.poll() is None:
        if spool.exists() and spool.read_bytes().count(b"\n") >= 2:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    if recorded(state):
        pytest.fail("the kill did not land while embedding: the store phase had begun")
    raw = spool.read_bytes()
    spool.write_bytes(raw[: raw.rindex(b"\n") - 10])  # as if the kill had landed inside a write: a torn last line
    spooled = sum(1 for line in spool.read_text().splitlines() if line.endswith("}"))
    assert 0 < spooled < len(docs)

    out = kb("index", "k", "--json").json["results"][0]

    assert (out["documents_indexed"], out["documents_failed"], out["errors"]) == (len(docs), 0, [])
    assert out["documents_resumed"] == spooled  # the torn one is embedded again, and stored
    count, paths = consistent("k")
    assert (count, paths) == (len(docs), set(docs))
    assert not (state / "spool.jsonl").exists()
    assert kb("search", "marker121", "--json").json["documents"][0]["document_path"] == "n121.md"


# -- the vector store's search breadth ------------------------------------------------------------

def _search_breadth(store: Path, narrow: bool = False) -> int:
    from gsd_research.researcher.gateways.chroma_gateway import ChromaGateway
    from tests.researcher_fixtures import next_process

    next_process()
    collection = ChromaGateway(store, "researcher-r").collection
    if narrow:  # as versions before SEARCH_EF made it: Chroma's default
        collection.modify(configuration={"hnsw": {"ef_search": 100}})
    breadth = collection.configuration_json["hnsw"]["ef_search"]
    next_process()
    return breadth


@pytest.mark.parametrize("made_before", [False, True], ids=["new store", "store made before"])
def test_an_index_run_that_commits_leaves_the_vector_store_searched_wide(tmp_path, home, made_before):
    from gsd_research.researcher.gateways.chroma_gateway import SEARCH_EF

    repo = make_repo(tmp_path / "repo")
    seed_model()
    kb("repo", "add", "r", str(repo), "--json")
    kb("index", "r", "--json")
    store = home / "repositories" / "r" / "chroma"
    if made_before:
        assert _search_breadth(store, narrow=True) == 100
        (repo / "guide" / "install.md").write_text("# Installation\n\nRun the installer twice.\n", encoding="utf-8")
        assert kb("index", "r", "--json").code == 0

    assert _search_breadth(store) == SEARCH_EF
