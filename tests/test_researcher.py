"""researcher: the knowledge base end to end, errors, incremental indexing. Tests taking `store` run twice: on the
embedded store and on a real Chroma server (`chroma run`, the `chroma_server` fixture in tests/conftest.py);
the others, whose subject is not the store's kind, on the embedded one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require
from tests.researcher_fixtures import (
    DOCS,
    MIXED,
    indexed_copy,
    kb,
    lexical_count,
    make_repo,
    recorded,
    seed_model,
    stored_documents,
)

BIN = Path(sys.executable).parent


@pytest.fixture
def model(home):
    return seed_model()


def _store_counts(name: str) -> tuple[int, int, int, set[str]]:
    """(chroma fragments, lexical fragments, checksum fragments, checksum documents) of one repository."""
    from gsd_research.researcher.service_factory import ServiceFactory

    factory = ServiceFactory()
    repo = factory.repository_service.get_repository(name)
    chroma = factory.chroma_factory(repo)()
    ids = chroma.collection.get(include=[])["ids"]
    assert len(ids) == len(set(ids))
    lexical = factory.lexical_gateway(repo)
    checksums = recorded(factory.repo_dir(repo))
    assert stored_documents(chroma) == stored_documents(lexical) == {k for k, v in checksums.items() if v["fragment_count"]}
    return chroma.collection.count(), lexical_count(lexical), sum(v["fragment_count"] for v in checksums.values()), set(checksums)


def _top_doc(query: str, *extra: str) -> str:
    res = kb("search", query, "--json", *extra)
    assert res.code == 0, res.stdout
    return res.json["documents"][0]["document_path"]


def test_index_search_incremental_remove_on_both_stores(tmp_path, store):
    name = f"docs-{store}-{os.getpid()}-{time.time_ns() % 10**6}"
    root = make_repo(tmp_path / "repo")
    assert kb("repo", "add", name, str(root), "--json").json["repository"]["name"] == name

    first = kb("index", name, "--json").json["results"][0]
    assert (first["documents_indexed"], first["documents_failed"]) == (4, 0)
    assert first["fragments_created"] >= 4

    answer = kb("search", "ERR_WIDGET_4711", "--json").json
    assert answer["documents"][0]["document_path"] == "guide/install.md"
    assert answer["fragments"][0]["match"] in ("lexical", "both")
    assert answer["fragments"][0]["see"] == "documents[0].top_fragments[0]"  # printed once, under its document
    assert "ERR_WIDGET_4711" in answer["documents"][0]["top_fragments"][0]["text"]
    assert answer["documents"][0]["absolute_path"] == str(root / "guide" / "install.md")
    assert _top_doc("how do I make a loaf") == "guide/cooking.md"  # no shared word: the vector ranking
    assert _top_doc("configure_frobnicator") == "api/reference.md"

    again = kb("index", name, "--json").json["results"][0]
    assert (again["documents_indexed"], again["documents_skipped"], again["fragments_created"]) == (0, 4, 0)

    (root / "guide" / "cooking.md").write_text("# Sourdough\n\nFeed the sourdough starter every day.\n")
    (root / "notes" / "astronomy.txt").unlink()
    (root / "notes" / "new.md").write_text("# Gardening\n\nWater tomatoes in the morning.\n")
    third = kb("index", name, "--json").json["results"][0]
    assert (third["documents_indexed"], third["documents_removed"], third["documents_skipped"]) == (2, 1, 2)
    assert _top_doc("sourdough starter") == "guide/cooking.md"
    paths = {d["document_path"] for d in kb("search", "Saturn rings telescope", "--json").json["documents"]}
    assert "notes/astronomy.txt" not in paths

    chroma_n, lexical_n, checksum_n, documents = _store_counts(name)
    assert chroma_n == lexical_n == checksum_n
    assert documents == {"guide/install.md", "guide/cooking.md", "api/reference.md", "notes/new.md"}
    status = kb("status", name, "--json").json["repositories"][0]
    assert status["store"] == ("server" if store == "server" else "embedded")
    if store == "server":  # counted by the server itself, beside this machine's record of what it sent
        assert (status["local_documents"], status["local_fragments"], status["server_fragments"]) == (4, chroma_n, chroma_n)
    else:
        assert (status["total_documents"], status["total_fragments"]) == (4, chroma_n)

    removed = kb("remove", name, "guide/cooking.md", "--json")
    assert removed.json["removed"] == "guide/cooking.md"
    paths = {d["document_path"] for d in kb("search", "sourdough starter", "--json").json["documents"]}
    assert "guide/cooking.md" not in paths
    again = kb("remove", name, "guide/cooking.md", "--json")
    assert (again.code, again.json["error"]["code"]) == (4, "DOCUMENT_NOT_FOUND")
    assert _store_counts(name)[0] == _store_counts(name)[1]

    gone = kb("repo", "remove", name, "--json")
    assert gone.json["index_deleted"] is True
    assert kb("repo", "list", "--json").json["total"] == 0


def test_corrupt_and_unreadable_files_are_reported_and_the_rest_indexed(tmp_path, model):
    root = make_repo(tmp_path / "repo", {"good.md": "# Good\n\nThe quokka smiles at visitors.\n"})
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\x00\x01")
    (root / "binary.txt").write_bytes(b"\x00\x01\x02garbage")
    (root / "broken.docx").write_bytes(b"PK\x03\x04 not a zip")
    kb("repo", "add", "r", str(root), "--json")

    res = kb("index", "r", "--json")

    assert res.code == 0
    out = res.json["results"][0]
    assert (out["documents_indexed"], out["documents_failed"]) == (1, 3)
    assert {e.split(":")[0] for e in out["errors"]} == {"broken.pdf", "binary.txt", "broken.docx"}
    assert _top_doc("quokka") == "good.md"
    human = kb("index", "r")
    assert human.code == 0 and "broken.pdf" in human.stdout  # retried (no checksum recorded) and reported again


def test_rich_formats_convert_offline(tmp_path, model):
    require(MIXED, "the folder of docling's sample documents")
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("word_sample.docx", "example_01.html", "multi_page.pdf", "powerpoint_sample.pptx"):
        (root / name).write_bytes((MIXED / name).read_bytes())
    kb("repo", "add", "mixed", str(root), "--json")

    out = kb("index", "mixed", "--json").json["results"][0]

    assert (out["documents_indexed"], out["documents_failed"]) == (4, 0), out["errors"]
    assert _top_doc("word processor history") == "multi_page.pdf"
    assert _top_doc("cute duckling swimming in the lake") == "word_sample.docx"


def test_queries_file_gives_one_line_per_query_in_order(tmp_path, home):
    indexed_copy(tmp_path, home, "d", DOCS)
    qfile = tmp_path / "q.jsonl"
    qfile.write_text('{"id": "a", "query": "ERR_WIDGET_4711"}\nnot json\n{"id": 7, "query": "bake bread"}\n')

    res = kb("search", "--queries-file", str(qfile), "--json", "--documents", "2", "--fragments", "1")

    lines = res.lines
    assert res.code == 0
    assert [line["id"] for line in lines] == ["a", 2, 7]
    assert lines[0]["documents"][0]["document_path"] == "guide/install.md"
    assert lines[1]["error"]["code"] == "USAGE_ERROR"
    assert lines[2]["documents"][0]["document_path"] == "guide/cooking.md"
    assert len(lines[2]["documents"]) == 2 and len(lines[2]["fragments"]) == 1


@pytest.mark.parametrize("args, code, error", [
    (("repo", "add", "x", "/nonexistent/folder"), 4, "NOT_FOUND"),
    (("repo", "add", "bad name!", "."), 2, "USAGE_ERROR"),
    (("repo", "add", "x", ".", "--file-types", "exe"), 2, "USAGE_ERROR"),
    (("repo", "remove", "ghost"), 4, "REPOSITORY_NOT_FOUND"),
    (("index", "ghost"), 4, "REPOSITORY_NOT_FOUND"),
    (("index",), 4, "NOT_FOUND"),
    (("search", "anything"), 4, "NOT_FOUND"),
    (("search",), 2, "USAGE_ERROR"),
    (("search", "x", "--fragments", "-1"), 2, "USAGE_ERROR"),
    (("remove", "ghost", "a.md"), 4, "REPOSITORY_NOT_FOUND"),
    (("config", "set", "nonsense", "1"), 2, "USAGE_ERROR"),
    (("config", "set", "default_embedding_provider", "bogus"), 2, "USAGE_ERROR"),
    (("config", "set", "mcp_port", "not-a-port"), 2, "USAGE_ERROR"),
    (("search", "--queries-file", "/nonexistent.jsonl"), 2, "USAGE_ERROR"),
])
def test_errors_are_clear_json_with_the_right_exit_status(args, code, error):
    res = kb(*args, "--json")

    assert res.code == code
    assert res.json["success"] is False
    assert res.json["error"]["code"] == error
    assert res.json["error"]["message"]


def test_errors_in_human_mode_go_to_stderr_without_json(tmp_path):
    res = kb("repo", "remove", "ghost")

    assert res.code == 4
    assert res.stdout == ""
    assert "Unknown repository 'ghost'" in res.stderr


def test_duplicate_repository_and_missing_folder_after_add(tmp_path, model):
    root = make_repo(tmp_path / "repo")
    kb("repo", "add", "d", str(root), "--json")
    dup = kb("repo", "add", "d", str(root), "--json")
    assert (dup.code, dup.json["error"]["code"]) == (2, "USAGE_ERROR")
    import shutil

    shutil.rmtree(root)
    res = kb("index", "d", "--json")
    assert (res.code, res.json["error"]["code"]) == (4, "NOT_FOUND")


def test_config_show_set_path(home):
    path = kb("config", "path", "--json").json["path"]
    assert path == str(home / "researcher.yaml")

    assert kb("config", "set", "default_embedding_model", "nomic-embed-text", "--json").code == 0
    assert kb("config", "set", "mcp_port", "9000", "--json").json["value"] == 9000

    shown = kb("config", "show", "--json").json["config"]
    assert shown["default_embedding_model"] == "nomic-embed-text"
    assert shown["mcp_port"] == 9000
    assert "mcp_port: 9000" in Path(path).read_text()


def test_broken_config_file_is_a_clear_error(home):
    (home / "researcher.yaml").write_text("repositories: [unclosed\n")

    res = kb("repo", "list", "--json")

    assert res.code == 2
    assert "researcher.yaml" in res.json["error"]["message"]


def test_help_and_repo_list_do_not_import_heavy_libraries(tmp_path):
    code = ("import sys, json; from gsd_research.researcher.cli import run; run(['repo', 'list', '--json']); "
            "heavy = [m for m in ('chromadb', 'docling', 'onnxruntime', 'tokenizers', 'mcp') if m in sys.modules]; "
            "print(json.dumps(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[0])["success"] is True
    assert json.loads(lines[-1]) == []

    started = time.perf_counter()
    helped = subprocess.run([str(BIN / "researcher"), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "search" in helped.stdout
    assert time.perf_counter() - started < 2.0


def test_human_search_output(tmp_path, home):
    indexed_copy(tmp_path, home, "d", DOCS)

    res = kb("search", "ERR_WIDGET_4711", "--repo", "d", "--fragments", "1")

    assert res.code == 0
    assert "guide/install.md" in res.stdout and "ERR_WIDGET_4711" in res.stdout
    assert not res.stdout.lstrip().startswith("{")


def test_warm_reindex_does_not_open_the_vector_store(tmp_path, model):
    kb("repo", "add", "d", str(make_repo(tmp_path / "repo")), "--json")
    kb("index", "d", "--json")
    code = ("import sys, json; from gsd_research.researcher.cli import run; run(['index', 'd', '--json']); "
            "print(json.dumps([m for m in ('chromadb', 'onnxruntime', 'docling', 'numpy') if m in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[0])["results"][0]["documents_skipped"] == 4
    assert json.loads(lines[-1]) == []


def test_missing_model_offline_is_a_clear_error(tmp_path, home, monkeypatch):
    import gsd_research.researcher.gateways.embedding_gateway as eg

    def no_download(self):
        raise OSError("network unreachable")

    from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

    monkeypatch.setattr(ONNXMiniLM_L6_V2, "_download_model_if_not_exists", no_download)
    assert not eg.chroma_model_dir().exists()
    kb("repo", "add", "d", str(make_repo(tmp_path / "repo")), "--json")

    res = kb("index", "d", "--json")

    assert res.code == 3
    assert res.json["error"]["code"] == "ENVIRONMENT_MISSING"
    assert "onnx" in res.json["error"]["suggestions"][0]


def test_unreachable_chroma_server_is_a_network_error(tmp_path, model):
    kb("repo", "add", "d", str(make_repo(tmp_path / "repo")), "--json")

    res = kb("index", "d", "--chroma-url", "http://127.0.0.1:9", "--json")

    assert (res.code, res.json["error"]["code"]) == (5, "NETWORK_ERROR")
    assert "chroma run" in res.json["error"]["suggestions"][0]


def test_index_all_reports_a_broken_repository_and_indexes_the_others(tmp_path, model):
    import shutil

    kb("repo", "add", "good", str(make_repo(tmp_path / "good", {"a.md": "# A\n\nalpha\n"})), "--json")
    gone = make_repo(tmp_path / "gone", {"b.md": "# B\n\nbeta\n"})
    kb("repo", "add", "gone", str(gone), "--json")
    shutil.rmtree(gone)

    res = kb("index", "--json")

    assert res.code == 0
    assert res.json["totals"]["documents_indexed"] == 1
    assert res.json["failed_repositories"][0]["repository_name"] == "gone"
    assert res.json["failed_repositories"][0]["error"]["code"] == "NOT_FOUND"


def test_index_all_with_every_repository_broken_fails_as_the_first_one_did(tmp_path):
    import shutil

    for name in ("one", "two"):
        folder = make_repo(tmp_path / name, {"a.md": "# A\n\nalpha\n"})
        kb("repo", "add", name, str(folder), "--json")
        shutil.rmtree(folder)

    res = kb("index", "--json")

    assert (res.code, res.json["error"]["code"]) == (4, "NOT_FOUND")
    assert [f["repository_name"] for f in res.json["error"]["details"]["failed"]] == ["one", "two"]


# -- the command surface: --version, mcp_port, status against a server, human output --------------------

def test_version_human_and_json():
    from gsd_research import __version__

    human = kb("--version")
    assert (human.code, human.stdout) == (0, f"researcher {__version__}\n")
    for args in (("--version", "--json"), ("--json", "--version")):
        assert kb(*args).json == {"success": True, "command": "version", "version": __version__}
    proc = subprocess.run([str(BIN / "researcher"), "--version"], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, f"researcher {__version__}\n")


@pytest.mark.parametrize("value, reason", [
    ("99999", "less than or equal to 65535"), ("65536", "less than or equal to 65535"),
    ("0", "greater than or equal to 1"), ("true", "from 1 to 65535"), ("8080.5", "valid integer"),
    ("http", "valid integer"),
])
def test_mcp_port_out_of_range_is_refused_and_the_file_unchanged(home, value, reason):
    assert kb("config", "set", "mcp_port", "9000", "--json").code == 0
    before = (home / "researcher.yaml").read_bytes()

    res = kb("config", "set", "mcp_port", value, "--json")

    assert (res.code, res.json["error"]["code"]) == (2, "USAGE_ERROR")
    assert res.json["error"]["message"].startswith("Invalid value for mcp_port: ") and reason in res.json["error"]["message"]
    assert (home / "researcher.yaml").read_bytes() == before


@pytest.mark.parametrize("value", ["1", "65535"])
def test_mcp_port_bounds_are_accepted(home, value):
    assert kb("config", "set", "mcp_port", value, "--json").json["value"] == int(value)


def test_serve_http_with_a_hand_written_bad_port_is_a_usage_error_not_an_internal_one(home):
    (home / "researcher.yaml").write_text("mcp_port: 99999\n")

    res = kb("serve", "--http", "--json")

    assert (res.code, res.json["error"]["code"]) == (2, "USAGE_ERROR")
    assert "mcp_port: Input should be less than or equal to 65535" in res.json["error"]["message"]


@pytest.mark.parametrize("with_repo", [True, False], ids=["a repository", "no repository"])
def test_status_against_an_unreachable_chroma_server_says_so(tmp_path, home, with_repo):
    if with_repo:
        kb("repo", "add", "d", str(make_repo(tmp_path / "repo")), "--json")
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    res = kb("status", "--chroma-url", url, "--json")
    human = kb("status", "--chroma-url", url)

    assert (res.code, res.json["error"]["code"]) == (5, "NETWORK_ERROR")
    assert url in res.json["error"]["message"] and "chroma run" in res.json["error"]["suggestions"][0]
    assert human.code == 5 and "NETWORK_ERROR" in human.stderr and human.stdout == ""


def test_status_on_a_server_without_the_collection_says_so_and_creates_none(tmp_path, home, chroma_server):
    import chromadb
    from chromadb.config import Settings

    kb("repo", "add", "never-indexed", str(make_repo(tmp_path / "repo")), "--json")

    res = kb("status", "--chroma-url", chroma_server, "--json")
    human = kb("status", "--chroma-url", chroma_server)

    assert res.code == 0 and res.json["store"] == "server" and res.json["chroma_url"] == chroma_server
    assert res.json["repositories"][0]["server_fragments"] is None
    assert "none: it holds no collection for it" in " ".join(human.stdout.split()) and chroma_server in human.stdout
    client = chromadb.HttpClient(host="127.0.0.1", port=int(chroma_server.rsplit(":", 1)[1]),
                                 settings=Settings(anonymized_telemetry=False))
    names = [getattr(c, "name", c) for c in client.list_collections()]
    assert "researcher-never-indexed" not in names


def test_repo_and_config_human_output_is_formatted_not_a_data_dump(tmp_path, home):
    folder = tmp_path / "docs [bold]x"  # text that rich would take as markup
    folder.mkdir()

    added = kb("repo", "add", "notes", str(folder), "--file-types", "md,pdf")
    shown = kb("config", "show")
    changed = kb("config", "set", "mcp_port", "9000")
    path = kb("config", "path")
    removed = kb("repo", "remove", "notes")

    assert added.code == 0 and f"Added repository notes for {folder}" in added.stdout
    assert "file types: md, pdf" in added.stdout and "researcher index notes" in added.stdout
    assert "mcp_port" in shown.stdout and "8392" in shown.stdout and "notes" in shown.stdout and "┃" in shown.stdout
    assert changed.stdout.startswith("Set mcp_port = 9000 in ")
    assert path.stdout == f"{home / 'researcher.yaml'}\n"
    assert removed.stdout.startswith("Removed repository notes, its index data deleted")
    for res in (added, shown, changed, removed):
        assert "repository:\n" not in res.stdout and "key: " not in res.stdout and "removed: " not in res.stdout
        assert not res.stdout.lstrip().startswith("{")


def test_human_errors_show_user_text_literally(tmp_path):
    res = kb("repo", "add", "bad[bold]name", str(tmp_path))

    assert res.code == 2 and "'bad[bold]name'" in res.stderr


def _later(path: Path) -> None:
    """Its modification time a minute past now: after any index run this test made."""
    later = time.time() + 60
    os.utime(path, (later, later))


def _renamed(path: Path) -> None:
    path.rename(path.with_name("baking.md"))


def _extracted(path: Path) -> None:
    """Written with a modification time long past, as `tar x`, `unzip` or `cp -p` leave it."""
    path.write_text("# New\n\nA note.\n")
    os.utime(path, (1_000_000_000, 1_000_000_000))


FOLDER_CHANGES = [  # (what happens to the indexed folder, what `status` says changed; None: nothing)
    ("nothing", lambda root: None, None),
    ("a file touched, its text the same", lambda root: _later(root / "guide" / "cooking.md"), None),
    ("a file edited", lambda root: ((root / "guide" / "cooking.md").write_text("# Rye\n\nRye bread is dense.\n"),
                                    _later(root / "guide" / "cooking.md")),
     "0 new, 1 edited, 0 removed documents (edited guide/cooking.md)"),
    ("a file added", lambda root: (root / "new.md").write_text("# New\n\nA note.\n"),
     "1 new, 0 edited, 0 removed documents (new new.md)"),
    ("a file added with an old modification time", lambda root: _extracted(root / "new.md"),
     "1 new, 0 edited, 0 removed documents (new new.md)"),
    ("a file renamed", lambda root: _renamed(root / "guide" / "cooking.md"),
     "1 new, 0 edited, 1 removed documents (new guide/baking.md, removed guide/cooking.md)"),
    ("a file removed", lambda root: (root / "guide" / "cooking.md").unlink(),
     "0 new, 0 edited, 1 removed documents (removed guide/cooking.md)"),
]


@pytest.mark.parametrize("change, said", [row[1:] for row in FOLDER_CHANGES], ids=[row[0] for row in FOLDER_CHANGES])
def test_status_names_what_changed_in_the_folder_since_the_last_index_run(tmp_path, home, change, said):
    root = indexed_copy(tmp_path, home, "r", DOCS)

    change(root)
    changed = kb("status", "r", "--json").json["repositories"][0]["changed"]

    assert changed == (said and f"The folder changed since the last index run: {said}. Run: researcher index r")


def test_status_names_the_files_of_a_folder_moved_into_the_repository(tmp_path, home):
    """`mv ~/x/dir repo/` keeps its files' times, older than the last index run; the rename sets the folder's."""
    elsewhere = tmp_path / "elsewhere" / "papers"
    elsewhere.mkdir(parents=True)
    (elsewhere / "moved.md").write_text("# Moved\n\nA note written before the index run.\n")
    root = indexed_copy(tmp_path, home, "r", DOCS)
    (root / "later.md").write_text("# Later\n\nIndexed after the note above was written.\n")
    kb("index", "r", "--json")

    elsewhere.rename(root / "papers")
    changed = kb("status", "r", "--json").json["repositories"][0]["changed"]

    assert "1 new, 0 edited, 0 removed documents (new papers/moved.md)" in (changed or ""), changed


def test_status_after_an_index_run_names_no_file_that_run_could_not_index(tmp_path, home):
    """A broken file the last run saw and could not index is not new, whatever changes beside it later."""
    root = indexed_copy(tmp_path, home, "r", DOCS)
    (root / "guide" / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is not really a pdf\x00\x01")
    kb("index", "r", "--json")
    (root / "guide" / "cooking.md").unlink()
    kb("index", "r", "--json")
    (root / "guide" / ".cooking.md.swp").write_text("an editor's swap file")  # an entry change beside it
    (root / "guide" / ".cooking.md.swp").unlink()

    changed = kb("status", "r", "--json").json["repositories"][0]["changed"]

    assert changed is None, changed


def test_status_during_an_index_run_says_it_is_in_progress_not_to_start_another(tmp_path, home):
    from gsd_research.researcher.gateways.lock_gateway import RepositoryLock

    root = indexed_copy(tmp_path, home, "r", DOCS)
    (root / "new.md").write_text("# New\n\nA note.\n")

    with RepositoryLock(home / "repositories" / "r", "researcher index r").hold():
        changed = kb("status", "r", "--json").json["repositories"][0]["changed"]

    assert changed.startswith("An index run of r is in progress") and "Run: researcher index" not in changed
