"""researcher at its edges: hostile MCP arguments are usage errors, errors name the caller's own parameter,
a huge query is echoed cut instead of refused, a queries-file line keeps its id, a state home that is a file
is refused."""

from __future__ import annotations

import json

import pytest

from tests.researcher_fixtures import indexed_copy, kb, seed_model


@pytest.fixture
def tools(tmp_path, home):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    indexed_copy(tmp_path, home, "r", {"a.md": "# A\n\nThe axolotl regrows limbs.\n",
                                       "b.md": "# B\n\nThe okapi is shy.\n"})
    return KnowledgeBaseTools(ServiceFactory())


@pytest.mark.parametrize("path", ["a\x00.md", "x" * 100_000, "d/" * 3000 + "a.md", "y" * 300 + ".md", ""])
def test_mcp_file_paths_that_no_file_system_takes_are_usage_errors(tools, path):
    for answer in (tools.add_to_index("r", path), tools.remove_from_index("r", path)):
        assert answer["success"] is False
        assert answer["error"]["code"] == "USAGE_ERROR", answer


@pytest.mark.parametrize("n", [-1, 0, 101, "5", 2.5, True])
def test_mcp_n_results_out_of_range_is_a_usage_error(tools, n):
    for answer in (tools.search_fragments("axolotl", None, n), tools.search_documents("axolotl", None, n)):
        assert answer["success"] is False and answer["error"]["code"] == "USAGE_ERROR", answer
        assert "n_results" in answer["error"]["message"]
    assert tools.search_fragments("axolotl", None, 1)["fragments"]


def test_mcp_budget_errors_name_the_max_tokens_parameter(tools):
    answer = tools.search_fragments("axolotl", None, 5, max_tokens=20)

    assert answer["error"]["code"] == "USAGE_ERROR"
    assert "max_tokens" in answer["error"]["message"] and "--max-tokens" not in json.dumps(answer)


def test_a_huge_query_is_echoed_cut_not_refused(tools):
    from tests.conftest import cl100k_tokens as cl100k_count

    query = "axolotl limbs " * 20_000

    cli = kb("search", query, "--json", "--max-tokens", "600")
    mcp = tools.search_documents(query, None, 3, max_tokens=600)

    for out, size in ((cli.json, cl100k_count(cli.stdout)), (mcp, cl100k_count(json.dumps(mcp)))):
        assert out.get("success") is not False, out
        assert size <= 600
        assert out["metadata"]["query_truncated"] is True and out["query"].endswith("…")
        assert out["documents"][0]["document_path"] == "a.md"


def test_a_queries_file_line_without_a_query_keeps_its_id(tools, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join([json.dumps({"id": "first", "query": "axolotl"}), json.dumps({"id": "no-query"}),
                                  json.dumps({"id": "blank", "query": "  "}), "not json",
                                  json.dumps({"id": 7, "query": 42})]) + "\n")

    lines = [json.loads(x) for x in kb("search", "--queries-file", str(queries), "--json").stdout.splitlines()]

    assert [x["id"] for x in lines] == ["first", "no-query", "blank", 4, 7]
    assert [x.get("error", {}).get("code") for x in lines] == [None] + ["USAGE_ERROR"] * 4
    assert "line 2" in lines[1]["error"]["message"]


def test_a_state_home_that_is_a_file_is_refused(tmp_path, monkeypatch):
    home_file = tmp_path / "passwd"
    home_file.write_text("root:x:0:0::/root:/bin/sh\n")
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(home_file))

    for args in (("repo", "list"), ("status",), ("search", "x"), ("repo", "add", "r", str(tmp_path))):
        res = kb("--json", *args)

        assert res.code != 0, (args, res.stdout)
        assert res.json["error"]["code"] == "STATE_NOT_WRITABLE", (args, res.stdout)
    assert home_file.read_text() == "root:x:0:0::/root:/bin/sh\n"


def test_a_lone_surrogate_in_a_query_is_searched_and_an_undecodable_argument_refused(tools):
    """An MCP client's JSON may hold half a surrogate pair (`\\udfff`): the model's tokenizer refused it
    (INTERNAL_ERROR); a command-line byte that is not UTF-8 arrives the same way and is a usage error."""
    for answer in (tools.search_fragments("axolotl \udfff limbs", None, 3),
                   tools.search_documents("axolotl \ud800 limbs", None, 3)):
        assert answer.get("success") is not False, answer
        assert (answer.get("fragments") or answer.get("documents"))[0]["document_path"] == "a.md"

    cli = kb("search", "axolotl \udcff", "--json")

    assert cli.code == 2 and cli.json["error"]["code"] == "USAGE_ERROR" and "Argument 2" in cli.json["error"]["message"]


@pytest.mark.parametrize("path", ["x" * 5000, "d/" * 3000 + "a.md", "y" * 300 + ".md", " "])
def test_the_cli_refuses_the_paths_the_mcp_tool_refuses(tools, path):
    result = kb("remove", "r", path, "--json")

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"
    assert len(result.stdout) < 600  # the path is not repeated


def test_a_made_up_id_that_equals_another_lines_id_is_told_apart_by_its_line(tools, tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(["not json", json.dumps({"id": 1, "query": "axolotl"}), "",
                                  json.dumps({"query": "okapi"})]) + "\n")

    lines = [json.loads(x) for x in kb("search", "--queries-file", str(queries), "--json").stdout.splitlines()]

    assert [(x["id"], x["line"]) for x in lines] == [(1, 1), (1, 2), (4, 4)]  # two ids 1, two lines
    assert lines[0]["error"]["code"] == "USAGE_ERROR" and lines[1]["documents"][0]["document_path"] == "a.md"
    assert lines[2]["documents"][0]["document_path"] == "b.md"


def test_an_indexed_folder_with_nothing_to_index_is_searched_not_sent_back_to_index(tmp_path, home):
    """`Not indexed yet → researcher index` after an index run looped: the run wrote no checksums."""
    seed_model()
    folder = tmp_path / "empty"
    folder.mkdir()
    kb("repo", "add", "e", str(folder), "--json")
    assert kb("search", "anything", "--repo", "e", "--json").json["error"]["code"] == "NOT_FOUND"  # not yet

    assert kb("index", "e", "--json").code == 0
    result = kb("search", "anything", "--repo", "e", "--json")

    assert result.code == 0 and result.json["documents"] == [] and result.json["fragments"] == []
