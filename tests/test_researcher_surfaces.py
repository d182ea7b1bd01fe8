"""Every surface answers from one diagnosis: a repository whose keyword index was replaced by another
repository's is named with the same error and fix by the command, each --queries-file line and the MCP tools;
a search of all repositories answers from the healthy ones and names the damaged one on every surface; recall
names a damaged memory index with the index run as its fix; a fresh MCP server's concurrent first searches all
answer."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest

from tests.conftest import cl100k_tokens
from tests.researcher_fixtures import (
    MATRIX_DOCS as DOCS,
)
from tests.researcher_fixtures import (
    MATRIX_OTHER as OTHER,
)
from tests.researcher_fixtures import (
    PLANTED,
    QUERY,
    empty_vectors,
    indexed_copies,
    kb,
    memory_entries,
    next_process,
    seed_model,
)


def _two_repositories(tmp_path, home):
    indexed_copies(tmp_path, home, {"r": (DOCS, "repo"), "o": (OTHER, "other")})
    return home / "repositories"


def test_a_foreign_keyword_index_is_named_alike_by_the_command_the_queries_file_and_mcp(tmp_path, home):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    repositories = _two_repositories(tmp_path, home)
    shutil.copy(repositories / "o" / "lexical.sqlite", repositories / "r" / "lexical.sqlite")
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": 1, "query": QUERY}) + "\n")

    command = kb("search", QUERY, "--repo", "r", "--json").json["error"]
    line = json.loads(kb("search", "--queries-file", str(queries), "--repo", "r", "--json").stdout.splitlines()[0])
    tool = KnowledgeBaseTools(ServiceFactory()).search_documents(QUERY, "r")["error"]

    assert command["code"] == "INDEX_DAMAGED" and "belongs to another index" in command["message"], command
    assert line["error"]["message"] == tool["message"] == command["message"], (line, tool)
    assert line["error"]["suggestions"] == tool["suggestions"] == command["suggestions"]
    assert kb("index", "r", "--json").code == 0
    next_process()
    assert kb("search", PLANTED, "--repo", "r", "--json").json["documents"][0]["document_path"] == "b.md"


def test_four_concurrent_first_searches_of_a_fresh_mcp_server_all_answer(tmp_path, home):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    _two_repositories(tmp_path, home)
    tools = KnowledgeBaseTools(ServiceFactory())
    answers: list[dict] = []
    calls = [threading.Thread(target=lambda: answers.append(tools.search_documents(PLANTED))) for _ in range(4)]

    for call in calls:
        call.start()
    for call in calls:
        call.join(300)

    assert len(answers) == 4 and all(a.get("success") for a in answers), answers
    assert {a["documents"][0]["document_path"] for a in answers} == {"b.md"}


def _left_out(meta: dict, where: Path) -> None:
    assert meta["repositories"] == ["o"], meta
    [entry] = meta["skipped_repositories"]
    assert entry["repository"] == "r" and entry["code"] == "INDEX_DAMAGED" and entry["fix"] == "researcher index r"
    assert str(where) in entry["message"], entry


def test_a_search_of_all_repositories_answers_from_the_healthy_ones_and_names_the_damaged(tmp_path, home):
    from gsd_research.researcher import resident
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.resident_server import Server
    from gsd_research.researcher.service_factory import ServiceFactory

    repositories = _two_repositories(tmp_path, home)
    server = Server()
    assert server.warm() is not None
    where = repositories / "r" / "chroma"
    empty_vectors(where)  # emptied in place: the files stay, the resident process is not stale
    next_process()
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": 1, "query": "sourdough rye"}\nnot json\n{"id": 3, "query": "bread"}\n')
    tools = KnowledgeBaseTools(ServiceFactory())

    found = kb("search", "sourdough rye", "--json")
    human = " ".join(kb("search", "sourdough rye").stdout.split())
    brief = kb("search", "sourdough rye", "--json", "--max-tokens", "250")
    lines = [json.loads(x) for x in kb("search", "--queries-file", str(queries), "--json").stdout.splitlines()]
    answers = (tools.search_fragments("sourdough rye"), tools.search_documents("sourdough rye"))
    reply, _ = server.answer({"query": "sourdough rye", "repo": None, "n_fragments": 5, "n_documents": 5,
                              "mode": "hybrid", "max_tokens": 2000, "v": resident.PROTOCOL, "key": server.key})

    assert found.code == 0 and {d["repository"] for d in found.json["documents"]} == {"o"}, found.stdout
    _left_out(found.json["metadata"], where)
    assert "left out r" in human and "Run: researcher index r" in human, human
    assert brief.json["metadata"]["skipped_repositories"] == [  # the envelope would take a third: the fix alone
        {"repository": "r", "code": "INDEX_DAMAGED", "fix": "researcher index r"}]
    assert cl100k_tokens(brief.stdout) <= 250
    assert [x["id"] for x in lines] == [1, 2, 3] and lines[1]["error"]["code"] == "USAGE_ERROR"
    assert lines[0]["metadata"]["skipped_repositories"] == found.json["metadata"]["skipped_repositories"]
    for answer in answers:
        assert answer["success"] is True and answer["metadata"]["skipped_repositories"][0]["repository"] == "r"
    assert reply["ok"]["metadata"]["skipped_repositories"][0]["repository"] == "r", reply
    by_keywords = tools.search_documents(PLANTED, "r", mode="lexical")  # the keyword index alone still answers
    assert by_keywords["documents"][0]["document_path"] == "b.md", by_keywords


def test_with_every_repository_damaged_the_error_names_them_all_and_one_index_run_repairs_them(tmp_path, home):
    repositories = _two_repositories(tmp_path, home)
    shutil.rmtree(repositories / "r" / "chroma")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{repositories / 'o' / 'lexical.sqlite'}{suffix}").unlink(missing_ok=True)

    error = kb("search", QUERY, "--json").json["error"]
    repaired = kb("index", "--json")
    next_process()

    assert error["code"] == "INDEX_DAMAGED" and "o too" in error["message"], error
    assert error["suggestions"] == ["Run: researcher index (repairs every repository's index)"]
    assert repaired.code == 0, repaired.stdout
    found = kb("search", QUERY, "--json")
    assert found.json["documents"][0]["document_path"] == "b.md" and "skipped_repositories" not in found.json[
        "metadata"], found.stdout


@pytest.mark.parametrize("embedded", [True, False], ids=["vectors answer", "nothing embedded"])
def test_recall_names_a_damaged_memory_index_with_the_index_run_as_its_fix(cli, home, monkeypatch, embedded):
    """With vectors to answer, recall answers by meaning with a note; without, MEMORY_CORRUPT; either way the fix is
    the index run (never `recall --clear`, which deletes the kept pages), and after it recall answers."""
    from gsd_research.researcher import api, embed_worker

    monkeypatch.setattr(api, "schedule_embedding", lambda name: {"running": False})
    seed_model()
    memory_entries(5).close()
    if embedded:
        embed_worker.embed_now("research-memory")
    lexical = Path(api.repo_dir("research-memory")) / "lexical.sqlite"
    next_process()
    for suffix in ("-wal", "-shm"):
        Path(f"{lexical}{suffix}").unlink(missing_ok=True)
    lexical.write_bytes(b"not a database " * 400)

    recalled = cli("recall", "flux capacitor gasket")
    repaired = kb("index", "research-memory", "--json")
    next_process()

    told = json.dumps(recalled.json)
    if embedded:
        assert recalled.code == 0 and recalled.json["results"], recalled.stdout
        assert "keyword ranking unavailable" in told and "researcher index research-memory" in told, told
    else:
        error = recalled.json["error"]
        assert error["code"] == "MEMORY_CORRUPT" and str(lexical) in error["message"], error
        assert error["suggestions"][0].startswith("Run: researcher index research-memory"), error
    assert repaired.code == 0, repaired.stdout
    again = cli("recall", "FLUX_9003")
    assert again.code == 0 and "FLUX_9003" in json.dumps(again.json["results"][0]), again.stdout
    assert "keyword ranking unavailable" not in json.dumps(again.json)


def test_every_surface_ranks_an_exact_identifier_first_within_the_budget(tmp_path, home, cl100k):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    _two_repositories(tmp_path, home)
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"id": i, "query": q}) + "\n" for i, q in enumerate(
        (QUERY, "sourdough bread rye flour", "frobnicator spool folder"))))
    tools = KnowledgeBaseTools(ServiceFactory())

    def tokens(text: str) -> int:
        return len(cl100k.encode(text, disallowed_special=()))

    for query in (PLANTED, f"what does {PLANTED} mean"):
        for scope in ((), ("--repo", "r")):
            docs = kb("search", query, "--documents", "3", *scope, "--json").json["documents"]
            assert (docs[0]["repository"], docs[0]["document_path"]) == ("r", "b.md"), (query, docs)
            assert PLANTED in docs[0]["top_fragments"][0]["text"]  # the passage itself, not only its id
    on_topic = kb("search", "widget cache cold after a restart", "--documents", "5", "--json").json["documents"]
    assert {d["repository"] for d in on_topic} == {"r"}, on_topic  # an unrelated repository stays out
    for budget in (250, 600):
        res = kb("search", QUERY, "--json", "--documents", "10", "--fragments", "20", "--max-tokens", str(budget))
        meta = res.json["metadata"]
        assert res.code == 0 and tokens(res.stdout) <= budget
        assert meta["max_tokens"] == budget and meta["tokens_used"] >= tokens(res.stdout) - 1
        assert meta["returned"] == {"documents": len(res.json["documents"]), "fragments": len(res.json["fragments"])}
    assert kb("search", QUERY, "--json", "--fragments", "20").json["metadata"]["max_tokens"] == 2000
    lines = kb("search", "--queries-file", str(queries), "--json", "--max-tokens", "300").stdout.splitlines()
    assert len(lines) == 3 and all(tokens(line + "\n") <= 300 for line in lines)
    for answer in (tools.search_documents(QUERY, None, 10, max_tokens=300),
                   tools.search_fragments(QUERY, None, 20, max_tokens=300)):
        assert tokens(json.dumps(answer, ensure_ascii=False)) <= 300 and answer["metadata"]["truncated"] is True
    planted = tools.search_documents(PLANTED, "r", 3)
    assert planted["documents"][0]["document_path"] == "b.md" and PLANTED in planted["documents"][0][
        "top_fragments"][0]["text"]
    tiny = kb("search", "cookies", "--json", "--max-tokens", "20")
    assert (tiny.code, tiny.json["error"]["code"]) == (2, "USAGE_ERROR") and "--max-tokens" in tiny.json["error"][
        "message"]
