"""researcher: rank fusion, embedding identity, HTTP embedders, MCP server, crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest.mock import Mock

import pytest

from tests.conftest import SHARED, require
from tests.researcher_fixtures import (
    DOCS,
    consistent,
    copy_int8_builds,
    in_flight,
    indexed_copy,
    kb,
    make_repo,
    recorded,
    seed_model,
)

BIN = Path(sys.executable).parent


# -- fusion (gateways mocked, the seed's style) -----------------------------------------------------

def _result(fid, path, distance=None, score=0.0, match="vector"):
    from gsd_research.researcher.models import SearchResult

    return SearchResult(fragment_id=fid, text=f"text {fid}", document_path=path, fragment_index=0,
                        distance=distance, score=score, match=match)


def test_hybrid_ranking_fuses_lexical_and_vector_lists():
    from gsd_research.researcher.gateways.chroma_gateway import ChromaGateway
    from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway
    from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway
    from gsd_research.researcher.services.search_service import SearchService

    chroma = Mock(spec=ChromaGateway)
    chroma.query_many.return_value = [[_result("both", "b.md", 0.2), _result("v1", "a.md", 0.3),
                                       _result("v3", "c.md", 0.4)]]
    chroma.vectors_of.return_value = {}  # the keyword-only candidates' vectors: not stored
    lexical = Mock(spec=LexicalGateway)
    lexical.search.return_value = [_result("exact", "id.md", score=9.0, match="lexical"),
                                   _result("both", "b.md", score=8.0, match="lexical"),
                                   _result("low", "low.md", score=1.0, match="lexical")]
    embedding = Mock(spec=EmbeddingGateway)
    embedding.embed_queries.return_value = [[0.0] * 3]
    service = SearchService("r", lambda: chroma, lexical, embedding)

    for fusion in ("score", "rrf"):
        docs, frags = service.search_many(["q"], 5, 3, "hybrid", fusion=fusion)[0]

        assert frags[0].fragment_id == "both"  # ranked high by both lists
        assert frags[0].match == "both" and frags[0].distance == 0.2
        assert {f.fragment_id for f in frags} == {"both", "v1", "exact", "v3", "low"}
        assert docs[0].document_path == "b.md"
        assert "id.md" in [d.document_path for d in docs]
        assert all(d.repository == "r" for d in docs)
    docs, _ = service.search_many(["q"], 5, 3, "hybrid")[0]
    assert docs[0].score == pytest.approx(0.5 + 0.5 * 8 / 9)  # vector best; BM25 8 of the best 9
    vector_docs, _ = service.search_many(["q"], 4, 3, "vector")[0]
    assert [d.document_path for d in vector_docs] == ["b.md", "a.md", "c.md"]
    lexical_docs, _ = service.search_many(["q"], 4, 3, "lexical")[0]
    assert [d.document_path for d in lexical_docs] == ["id.md", "b.md", "low.md"]


def test_fts_query_keeps_identifiers_and_drops_stop_words():
    from gsd_research.researcher.gateways.lexical_gateway import match_expression

    assert match_expression("what is configure_frobnicator?") == '"configure_frobnicator"'
    assert match_expression("the") == '"the"'
    assert match_expression("...") is None
    assert match_expression('say "hi"') == '"say" OR "hi"'


# -- embeddings -------------------------------------------------------------------------------------

EMBED_TEXTS = ["short", "", "Ünïcödé ✓ 漢字", "a medium sentence about sourdough bread and ovens",
               " ".join(["long"] * 400)]


_CHROMA: list = []


def _chromas_vectors():
    """Chroma's own vectors of EMBED_TEXTS (the reference), computed once per test process: the model file is
    the same offline copy for every test."""
    import numpy as np
    from chromadb.utils.embedding_functions import ONNXMiniLM_L6_V2

    from gsd_research.researcher.gateways.embedding_gateway import chroma_model_dir

    if not _CHROMA:
        reference = ONNXMiniLM_L6_V2()
        # Chroma fixes the model's folder from HOME when first imported (maybe under another test's HOME)
        reference.DOWNLOAD_PATH = chroma_model_dir().parent
        _CHROMA.append(np.array(reference(EMBED_TEXTS)))
    return _CHROMA[0]


def test_float_embedder_vectors_are_identical_to_chromas_default(home, monkeypatch):
    import numpy as np

    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    seed_model(int8=False)
    monkeypatch.setenv("GSD_RESEARCH_EMBEDDING_PRECISION", "fp32")
    embedder = DefaultEmbedder()
    ours = np.array(embedder.embed(EMBED_TEXTS))
    theirs = _chromas_vectors()

    assert embedder.precision == "fp32"
    assert ours.shape == theirs.shape == (5, 384)
    assert np.abs(ours - theirs).max() < 1e-5
    assert not (home / "models").exists()  # the float path builds nothing


def test_queries_are_embedded_with_the_float_model_and_load_no_int8_model(home):
    import numpy as np

    from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway

    seed_model(int8=False)
    gateway = EmbeddingGateway()
    ours = np.array(gateway.embed_queries(EMBED_TEXTS))
    theirs = _chromas_vectors()

    assert np.abs(ours - theirs).max() < 1e-5
    assert gateway.backend.session is None and not (home / "models").exists()  # a search builds nothing


def test_int8_embedder_is_the_default_and_stays_close_to_chromas_vectors(home):
    import numpy as np

    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    seed_model()
    embedder = DefaultEmbedder()
    ours = np.array(embedder.embed(EMBED_TEXTS))
    theirs = _chromas_vectors()

    assert embedder.precision == "int8"
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosine = (ours * theirs).sum(1)
    assert cosine.min() > 0.95 and np.delete(cosine, 1).min() > 0.98, cosine  # the empty text moves most
    assert np.abs(ours - theirs).max() > 1e-4  # really the int8 model, not the float one


def test_int8_model_is_built_once_privately_under_the_home_and_reused(home):
    from gsd_research.researcher.gateways import int8_model
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    source = seed_model(int8=False) / "model.onnx"
    first = DefaultEmbedder()
    first.embed(["text"])
    built = int8_model.cached_path(source)

    assert first.precision == "int8" and built.parent == home / "models"
    assert built.stat().st_mode & 0o777 == 0o600 and built.parent.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in built.parent.iterdir()) == sorted([built.name, int8_model.sidecar(built).name])
    assert int8_model.sidecar(built).stat().st_mode & 0o777 == 0o600  # no temporary files left, hash private
    stamp = built.stat().st_mtime_ns
    second = DefaultEmbedder()
    second.embed(["text"])
    assert second.precision == "int8"
    assert built.stat().st_mtime_ns == stamp  # reused, not rebuilt

    import onnx

    kept = int8_model._sensitive(onnx.load(str(source)))  # the first layers' feed-forward output projections
    assert kept == [f"/m/encoder/layer.{i}/output/dense/MatMul" for i in range(3)]
    ops = {n.name: n.op_type for n in onnx.load(str(built)).graph.node}
    assert all(ops.get(name) == "MatMul" for name in kept)
    assert sum(op == "MatMulInteger" for op in ops.values()) == 33  # Q, K, V, attention out, FFN in, 3 FFN out


def test_simplified_graph_gives_bit_identical_float_vectors(home, tmp_path):
    import numpy as np
    import onnx
    import onnxruntime as ort

    from gsd_research.researcher.gateways import int8_model
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    source = seed_model(int8=False) / "model.onnx"
    model = onnx.load(str(source))
    removed = int8_model.simplify(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(tmp_path / "simple.onnx"))
    embedder = DefaultEmbedder()
    texts = EMBED_TEXTS + ["[CLS] [SEP] [PAD]", "x " * 300]
    original = np.array(embedder.embed_queries(texts))  # the float model as shipped
    embedder.query_session = ort.InferenceSession(str(tmp_path / "simple.onnx"), providers=["CPUExecutionProvider"])

    assert removed == 17  # 6 NaN guards (Where + IsNaN) and 5 repeated mask computations
    assert np.array_equal(np.array(embedder.embed_queries(texts)), original)
    assert int8_model.simplify(model) == 0  # nothing left to remove


def test_a_damaged_int8_model_falls_back_to_the_float_model_and_is_rebuilt(home, monkeypatch):
    from gsd_research.researcher.gateways import int8_model
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    copy_int8_builds(monkeypatch)
    source = seed_model(int8=False) / "model.onnx"
    target = int8_model.cached_path(source)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"\x08\x07 not an onnx model")
    # its recorded hash matches (truncated after being verified, or a runtime that cannot read it): the
    # load fails, the float model is used, the file is dropped and that is logged
    int8_model.sidecar(target).write_text(int8_model.digest(target) + "\n")

    damaged = DefaultEmbedder()

    assert len(damaged.embed(["still works"])[0]) == 384 and damaged.precision == "fp32"
    assert not target.exists() and not int8_model.sidecar(target).exists()
    log = (home / "logs" / "researcher.log").read_text()
    assert "embedding.int8_discarded" in log and "could not load" in log
    rebuilt = DefaultEmbedder()
    rebuilt.embed(["text"])
    assert rebuilt.precision == "int8" and target.stat().st_size > 1_000_000

    target.write_bytes(target.read_bytes()[:1000])  # truncated, its hash no longer matches: rebuilt at once
    again = DefaultEmbedder()
    again.embed(["text"])
    assert again.precision == "int8" and target.stat().st_size > 1_000_000


def test_when_the_int8_model_cannot_be_built_the_float_model_is_used_and_logged(home, monkeypatch):
    from gsd_research.researcher.gateways import int8_model
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    seed_model(int8=False)

    def no_onnx(source, target):
        raise ModuleNotFoundError("No module named 'onnx'")

    monkeypatch.setattr(int8_model, "build", no_onnx)
    embedder = DefaultEmbedder()

    assert len(embedder.embed(["text"])[0]) == 384 and embedder.precision == "fp32"
    log = (home / "logs" / "researcher.log").read_text()
    assert "embedding.int8_unavailable" in log and "No module named" in log


def test_the_offline_seed_script_puts_the_model_where_chroma_looks(home):
    from gsd_research.researcher.gateways.embedding_gateway import MODEL_FILES, chroma_model_dir

    script = require(SHARED / "tools" / "seed-offline-models.sh", "shared/'s seed script")
    subprocess.run(["bash", str(script)], check=True, capture_output=True)

    assert all((chroma_model_dir() / f).is_file() for f in MODEL_FILES)


EMBED_PATHS = {"ollama": "/ollama/api/embed", "openai": "/openai/v1/embeddings"}
EMBED_MODELS = {"ollama": "nomic-embed-text", "openai": "text-embedding-3-small"}
CANARY = "sk-canary-4f9a2b7c1d"


def _http_repo(tmp_path, provider: str, name: str = "r", model: str | None = None) -> Path:
    root = make_repo(tmp_path / f"repo-{name}", {"q.md": "# Quokka\n\nThe quokka smiles on Rottnest island.\n",
                                                  "b.md": "# Bread\n\nBake the sourdough bread slowly.\n"})
    added = kb("repo", "add", name, str(root), "--embedding-provider", provider, "--embedding-model",
               model or EMBED_MODELS[provider], "--json")
    assert added.code == 0, added.stdout
    return root


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_http_embedding_providers_index_and_search_without_leaking_the_key(tmp_path, home, fake, monkeypatch,
                                                                          provider):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    _http_repo(tmp_path, provider)

    out = kb("index", "r", "--json")
    indexed = len(fake.hits(EMBED_PATHS[provider]))
    first = kb("search", "quokka island", "--mode", "vector", "--json")
    again = kb("search", "quokka island", "--mode", "vector", "--json")
    other = kb("search", "sourdough", "--mode", "vector", "--json")

    assert out.json["results"][0]["documents_indexed"] == 2
    assert first.json["documents"][0]["document_path"] == "q.md"
    assert other.json["documents"][0]["document_path"] == "b.md"
    assert again.json["documents"] == first.json["documents"]
    # one request per new query: the repeated query's vector came from the HTTP cache
    assert len(fake.hits(EMBED_PATHS[provider])) == indexed + 2
    sent = fake.hits(EMBED_PATHS[provider])
    assert {r.json()["model"] for r in sent} == {EMBED_MODELS[provider]}
    if provider == "openai":
        assert {r.headers.get("authorization") for r in sent} == {f"Bearer {CANARY}"}
    written = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert CANARY.encode() not in written
    assert CANARY not in out.stdout + first.stdout + again.stdout + out.stderr


def test_http_embeddings_retry_rate_limits_and_server_errors(tmp_path, home, fake):
    _http_repo(tmp_path, "ollama")
    fake.add_fault("/ollama/api/embed", "status", status=429, retry_after="0")
    fake.add_fault("/ollama/api/embed", "status", status=503)

    out = kb("index", "r", "--json")

    assert out.code == 0, out.stdout
    assert out.json["results"][0]["documents_indexed"] == 2
    assert len(fake.hits("/ollama/api/embed")) == 3  # 429, 503, then the answer


def test_http_embedding_failures_are_clear(tmp_path, home, fake, monkeypatch):
    _http_repo(tmp_path, "openai", "o")
    missing = kb("index", "o", "--json")
    assert (missing.code, missing.json["error"]["code"]) == (3, "MISSING_API_KEY")

    monkeypatch.setenv("OPENAI_API_KEY", "sk-bad-key-0000")
    rejected = kb("index", "o", "--json")
    assert (rejected.code, rejected.json["error"]["code"]) == (3, "INVALID_API_KEY")
    assert "OPENAI_API_KEY" in " ".join(rejected.json["error"]["suggestions"])
    assert "sk-bad-key-0000" not in rejected.stdout

    _http_repo(tmp_path, "ollama", "unpulled", model="mxbai-embed-large")
    unpulled = kb("index", "unpulled", "--json")
    assert (unpulled.code, unpulled.json["error"]["code"]) == (4, "NOT_FOUND")
    assert "ollama pull mxbai-embed-large" in unpulled.json["error"]["suggestions"]

    _http_repo(tmp_path, "ollama", "busy")
    fake.reset_log()
    fake.add_fault("/ollama/api/embed", "status", times=10, status=500)
    busy = kb("index", "busy", "--json")
    assert (busy.code, busy.json["error"]["code"]) == (5, "UPSTREAM_ERROR")
    assert len(fake.hits("/ollama/api/embed")) == 4  # the first try and 3 retries (tests' config)
    fake.clear_faults()

    fake.add_fault("/ollama/api/embed", "malformed", times=10)
    malformed = kb("index", "busy", "--json")
    assert (malformed.code, malformed.json["error"]["code"]) == (5, "UPSTREAM_ERROR")
    fake.clear_faults()

    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    down = kb("index", "busy", "--json")
    assert (down.code, down.json["error"]["code"]) == (5, "NETWORK_ERROR")
    assert "ollama serve" in " ".join(down.json["error"]["suggestions"])

    for name in ("o", "unpulled", "busy"):  # nothing half-written: every failed run left an empty index
        status = kb("status", name, "--json")
        assert status.json["repositories"][0]["total_documents"] == 0


def test_http_embeddings_of_the_wrong_shape_are_refused(tmp_path, home, fake):
    from tests.fakes.server import Reply

    _http_repo(tmp_path, "ollama")
    import re

    short = ("POST", re.compile(r"/ollama/api/embed$"), lambda req: Reply(200, {"embeddings": [[0.1, 0.2]]}))
    fake.routes.insert(0, short)  # answers before the fake's own route: one vector for two texts
    try:
        out = kb("index", "r", "--json")
    finally:
        fake.routes.remove(short)

    assert (out.code, out.json["error"]["code"]) == (5, "UPSTREAM_ERROR")
    assert "1 usable embeddings for 2 texts" in out.json["error"]["message"]


# -- crash safety ----------------------------------------------------------------------------------

def test_kill_9_during_indexing_then_reindex_leaves_no_duplicates_or_orphans(tmp_path, home, store):
    docs = {f"d{i:03}.md": f"# Note {i}\n\nNote number {i} mentions topic{i % 7} and item{i}.\n" for i in range(160)}
    root = make_repo(tmp_path / "repo", docs)
    kb("repo", "add", "c", str(root), "--json")
    state = home / "repositories" / "c"
    proc = subprocess.Popen([str(BIN / "researcher"), "index", "c", "--json"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ))
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if 0 < len(recorded(state)) < len(docs):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = recorded(state)
    assert 0 < len(partial) < len(docs), "the kill did not land mid-indexing"
    kept = set(partial) - set(in_flight(state))  # a kill while a batch was written: that batch is done again

    again = kb("index", "c", "--json").json["results"][0]

    assert again["documents_skipped"] == len(kept)
    assert again["documents_indexed"] == len(docs) - len(kept)
    count, paths = consistent("c")
    assert paths == set(docs)
    assert _top("item42") == "d042.md"


def _top(query: str) -> str:
    return kb("search", query, "--json").json["documents"][0]["document_path"]


def test_crash_between_the_two_stores_is_recovered_from_the_journal(tmp_path, home, monkeypatch):
    seed_model()
    root = make_repo(tmp_path / "repo", {"a.md": "# A\n\nalpha text\n", "b.md": "# B\n\nbeta text\n"})
    kb("repo", "add", "j", str(root), "--json")
    kb("index", "j", "--json")
    (root / "a.md").write_text("# A\n\nalpha rewritten with gamma\n")
    from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway

    original = LexicalGateway.replace_documents

    def crash(self, paths, rows, *stamp):
        if rows:
            raise KeyboardInterrupt  # the process dies after Chroma was written, before the lexical index
        return original(self, paths, rows, *stamp)

    monkeypatch.setattr(LexicalGateway, "replace_documents", crash)
    assert kb("index", "j", "--json").code == 130
    assert in_flight(home / "repositories" / "j")
    monkeypatch.setattr(LexicalGateway, "replace_documents", original)

    again = kb("index", "j", "--json").json["results"][0]

    assert again["documents_indexed"] == 1
    assert not in_flight(home / "repositories" / "j")
    consistent("j")
    assert _top("gamma") == "a.md"


# -- MCP ------------------------------------------------------------------------------------------

def test_mcp_tools_over_the_library(tmp_path, home):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    root = indexed_copy(tmp_path, home, "d", DOCS)
    tools = KnowledgeBaseTools(ServiceFactory())

    assert tools.list_repositories()["repositories"][0]["name"] == "d"
    assert tools.search_documents("ERR_WIDGET_4711")["documents"][0]["document_path"] == "guide/install.md"
    assert "ERR_WIDGET_4711" in tools.search_fragments("ERR_WIDGET_4711", "d", 1)["fragments"][0]["text"]
    (root / "late.md").write_text("# Late\n\nThe axolotl regrows limbs.\n")
    assert tools.add_to_index("d", "late.md")["fragments"] == 1
    assert tools.search_documents("axolotl")["documents"][0]["document_path"] == "late.md"
    assert tools.remove_from_index("d", str(root / "late.md"))["removed"] == "late.md"
    assert tools.get_index_status("d")["repositories"][0]["total_documents"] == 4
    assert tools.search_fragments("x", "ghost")["error"]["code"] == "REPOSITORY_NOT_FOUND"
    assert tools.add_to_index("d", "/etc/passwd")["error"]["code"] == "DOCUMENT_NOT_FOUND"


def test_mcp_server_speaks_stdio(tmp_path, home):
    proc = subprocess.Popen([str(BIN / "researcher"), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ))

    def call(msg: dict) -> dict | None:
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()
        if "id" not in msg:
            return None
        return json.loads(proc.stdout.readline())

    try:
        init = call({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "test", "version": "0"}}})
        assert init["result"]["serverInfo"]["name"] == "researcher"
        call({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        names = {t["name"] for t in listed["result"]["tools"]}
        assert names == {"add_to_index", "remove_from_index", "search_fragments", "search_documents",
                         "list_repositories", "get_index_status"}
        called = call({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "list_repositories", "arguments": {}}})
        bad = call({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "search_fragments", "arguments": {"query": "x", "repository": "ghost"}}})
    finally:
        proc.kill()
        proc.wait()

    assert '"repositories"' in called["result"]["content"][0]["text"] and not called["result"].get("isError")
    assert bad["result"]["isError"] is True  # a tool's error is marked as one
    assert "REPOSITORY_NOT_FOUND" in bad["result"]["content"][0]["text"]


def test_a_changed_int8_model_that_still_loads_is_discarded_and_rebuilt(home, monkeypatch):
    import shutil

    import numpy as np

    from gsd_research.researcher.gateways import int8_model
    from gsd_research.researcher.gateways.embedding_gateway import DefaultEmbedder

    copy_int8_builds(monkeypatch)
    source = seed_model(int8=False) / "model.onnx"
    first = DefaultEmbedder()
    good = np.array(first.embed(EMBED_TEXTS))
    target = int8_model.cached_path(source)
    # replaced by another valid model (the float one): it loads, and would silently change every vector
    target.unlink()
    shutil.copyfile(source, target)

    again = DefaultEmbedder()
    vectors = np.array(again.embed(EMBED_TEXTS))

    assert again.precision == "int8" and np.allclose(vectors, good, atol=1e-6)  # rebuilt, not trusted
    assert int8_model.verified(target)
    log = (home / "logs" / "researcher.log").read_text()
    assert "embedding.int8_discarded" in log and "does not match the hash" in log
    int8_model.sidecar(target).unlink()  # a build without its recorded hash is not trusted either
    assert not int8_model.verified(target)


def test_status_shows_the_precision_the_index_was_embedded_with(home, tmp_path, monkeypatch):
    from tests.researcher_fixtures import kb, make_repo

    seed_model()
    root = make_repo(tmp_path / "repo")
    assert kb("repo", "add", "d", str(root), "--json").code == 0
    assert kb("index", "d", "--json").code == 0
    assert kb("status", "d", "--json").json["repositories"][0]["embedding_precision"] == "int8"
    monkeypatch.setenv("GSD_RESEARCH_EMBEDDING_PRECISION", "fp32")
    (root / "extra.md").write_text("# Extra\n\nA new document embedded with the float model.\n")
    assert kb("index", "d", "--json").code == 0
    assert kb("status", "d", "--json").json["repositories"][0]["embedding_precision"] == "fp32+int8"
