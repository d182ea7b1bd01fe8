"""Every surface answers from one diagnosis: a repository whose keyword index was replaced by another
repository's is named with the same error and fix by the command, each --queries-file line and the MCP tools;
a fresh MCP server's concurrent first searches all answer."""

from __future__ import annotations

import json
import shutil
import threading

from tests.researcher_fixtures import kb, make_repo, next_process, seed_model
from tests.test_researcher_damage import DOCS, OTHER, PLANTED, QUERY


def _two_repositories(tmp_path, home):
    seed_model()
    kb("repo", "add", "r", str(make_repo(tmp_path / "repo", DOCS)), "--json")
    kb("repo", "add", "o", str(make_repo(tmp_path / "other", OTHER)), "--json")
    assert kb("index", "--json").code == 0
    next_process()
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
