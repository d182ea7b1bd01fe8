"""`researcher.api`: documents written by other capabilities are searchable at once (lexical), embedded later
by a detached worker, filtered by document, evicted; `researcher search` sees the same repository."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gsd_research.researcher import api, embed_worker
from tests.researcher_fixtures import kb, recorded, seed_model

REPO = "notes-memory"
DOCS = {
    "a/widgets.md": ("Widgets", "# Widgets\n\nThe widget toolkit installs with pip on Python 3.10.\n\n"
                                "Version 4.2.0 dropped support for Python 3.9."),
    "b/bread.md": ("Bread", "# Baking bread\n\nKnead the dough for ten minutes and bake it until golden."),
    "c/saturn.md": ("Saturn", "# Saturn\n\nThe telescope revealed the rings of Saturn and four moons of Jupiter."),
}


@pytest.fixture
def repo(home) -> Path:
    folder = home / "notes"
    api.ensure_repository(REPO, folder)
    for path, (title, text) in DOCS.items():
        api.put_documents(REPO, [(path, text, title)])
    return folder


def paths_of(result: dict) -> list[str]:
    return [p["document_path"] for p in result["passages"]]


def test_a_document_is_searchable_at_once_without_embedding(repo):
    result = api.search(REPO, "python version of the widget toolkit")

    assert result["mode"] == "lexical" and paths_of(result)[0] == "a/widgets.md"
    assert api.embedding_pending(REPO)
    assert (repo / "a" / "widgets.md").read_text().startswith("# Widgets")


def test_a_fresh_process_writes_without_importing_pydantic(repo):
    code = (f"import sys; from gsd_research.researcher import api; api.put_documents('{REPO}', [('y.md', 'more text', "
            "'Y')]); print('pydantic' in sys.modules, 'chromadb' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), timeout=60)

    assert out.stdout.strip() == "False False", out.stderr


def test_search_is_restricted_to_the_given_documents(repo):
    only = api.search(REPO, "python widget bread saturn", paths=["b/bread.md", "c/saturn.md"])

    assert set(paths_of(only)) == {"b/bread.md", "c/saturn.md"}
    assert api.search(REPO, "python widget", paths=[])["passages"] == []


def test_passages_fit_the_token_budget(repo):
    from gsd_research.core.tokens import count_tokens

    result = api.search(REPO, "widget python bread saturn telescope", max_tokens=45)

    assert sum(count_tokens(p["text"]) for p in result["passages"]) <= 45
    assert result["passages"], "the first passage is cut to the budget, not dropped"


def test_embedding_makes_search_hybrid_and_keeps_the_filter(repo):
    seed_model()

    done = embed_worker.embed_now(REPO)
    hybrid = api.search(REPO, "astronomy planets", paths=["c/saturn.md", "b/bread.md"])

    assert done["documents_indexed"] == 3 and not api.embedding_pending(REPO)
    assert hybrid["mode"] == "hybrid" and paths_of(hybrid)[0] == "c/saturn.md"
    assert set(paths_of(hybrid)) <= {"c/saturn.md", "b/bread.md"}
    vector_only = [p for p in hybrid["passages"] if p["match"] == "vector"]
    assert all(p["document_path"] in {"c/saturn.md", "b/bread.md"} for p in vector_only)


def test_researcher_search_sees_the_same_repository(repo):
    seed_model()
    embed_worker.embed_now(REPO)

    out = kb("search", "rings of saturn", "--repo", REPO, "--json")

    assert out.code == 0, out.stdout
    assert out.json["documents"][0]["document_path"] == "c/saturn.md"


def test_documents_written_ahead_survive_another_documents_removal(repo):
    """`researcher remove` reconciles the stores; lexical rows of a present, not yet embedded file stay."""
    seed_model()
    embed_worker.embed_now(REPO)
    api.put_documents(REPO, [("d/comet.md", "# Comet\n\nHalley's comet returns every 76 years.", "Comet")])

    assert kb("remove", REPO, "b/bread.md", "--json").code == 0

    assert paths_of(api.search(REPO, "halley comet", mode="lexical")) == ["d/comet.md"]


def test_evicted_documents_leave_the_lexical_index_at_once_and_the_vectors_at_the_next_run(repo):
    seed_model()
    embed_worker.embed_now(REPO)

    assert api.remove_documents(REPO, ["a/widgets.md"]) == 1
    assert "a/widgets.md" not in paths_of(api.search(REPO, "widget toolkit python", mode="lexical"))
    embed_worker.embed_now(REPO)

    assert "a/widgets.md" not in paths_of(api.search(REPO, "widget toolkit python"))
    assert not (repo / "a" / "widgets.md").exists()


@pytest.mark.parametrize("path", ["../escape.md", "/etc/passwd.md", "a/../../x.md"])
def test_paths_that_leave_the_folder_are_refused(repo, path):
    from gsd_research.core.errors import GsdError

    with pytest.raises(GsdError):
        api.put_documents(REPO, [(path, "text", None)])

    assert not (repo.parent / "escape.md").exists()


def test_an_unregistered_repository_is_an_error_not_a_write(home):
    from gsd_research.core.errors import GsdError

    with pytest.raises(GsdError, match="not registered"):
        api.put_documents("nowhere", [("a.md", "text", None)])


def test_files_and_indexes_are_private(repo, home):
    for path in [repo / "a" / "widgets.md", home / "repositories" / REPO / "lexical.sqlite"]:
        assert path.stat().st_mode & 0o077 == 0, path
    assert repo.stat().st_mode & 0o077 == 0


def test_the_detached_worker_embeds_and_exits(repo, home):
    seed_model()

    started = api.schedule_embedding(REPO)
    deadline = time.time() + 120
    while api.embedding_pending(REPO) and time.time() < deadline:
        time.sleep(0.5)

    assert started["started"] and started["pid"]
    assert not api.embedding_pending(REPO), (home / "logs" / "embed-worker.log").read_text()
    while embed_worker.alive(REPO) and time.time() < deadline:
        time.sleep(0.2)
    assert not embed_worker.alive(REPO)
    checksums = recorded(home / "repositories" / REPO)
    assert set(checksums) == set(DOCS)


def test_a_second_worker_leaves_at_once_while_one_runs(repo):
    with embed_worker._lock(REPO) as got:
        assert got
        assert api.schedule_embedding(REPO) == {"running": True, "started": False, "pid": None}
        assert embed_worker.serve(REPO) == 0  # the lock is held: nothing done
    assert api.embedding_pending(REPO)


def test_a_failing_worker_is_not_restarted_on_every_call(repo, monkeypatch, home):
    def broken(name):
        raise RuntimeError("no embedding model")

    monkeypatch.setattr(embed_worker, "run_once", broken)

    assert embed_worker.serve(REPO) == 1
    assert embed_worker.recent_failure(REPO) is not None
    assert api.schedule_embedding(REPO)["started"] is False
    assert "no embedding model" in (home / "repositories" / REPO / "embed.failed").read_text()
