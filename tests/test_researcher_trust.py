"""researcher answers an agent can trust, end to end: an exact identifier held by one document ranks it first,
an unrelated repository stays out of on-topic answers, documents carry their passages, answers fit --max-tokens."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import SHARED, require
from tests.researcher_fixtures import kb, make_repo, seed_model

FASTAPI = SHARED / "bench" / "corpora" / "fastapi-docs" / "tutorial"
PLANTED = "QZVX_STALL_8812"
COOKING = {
    "bread.md": "# Sourdough bread\n\nFeed the starter, mix flour and water, rest the dough, then bake at 240 degrees "
                "until the crust sings.\n",
    "soup.md": "# Tomato soup\n\nRoast tomatoes with garlic, blend with stock and a little cream, season with salt "
               "and basil.\n",
    "pasta.md": "# Fresh pasta\n\nKnead eggs and flour into a smooth dough, roll it thin and cut ribbons; cook two "
                "minutes in salted water.\n",
    "curry.md": "# Chickpea curry\n\nFry onions, ginger and spices, add chickpeas and coconut milk, simmer twenty "
                "minutes and serve with rice.\n",
    "cake.md": "# Lemon cake\n\nBeat butter and sugar, add eggs, lemon zest and flour, bake forty minutes; glaze with "
               "lemon syrup.\n",
    "salad.md": "# Green salad\n\nWash the leaves, dry them well, dress with olive oil, vinegar, mustard and a pinch of "
                "salt just before serving.\n",
}
ON_TOPIC = ("How do I return an error response with a status code?", "How can I read cookies from a request?",
            "How do I declare query parameters with default values?", "How do I add CORS middleware?",
            "How do I run code after returning a response?")


def _plant(folder: Path) -> None:
    """The made-up identifier at the end of the longest prose paragraph of one document (its meaning is not
    the paragraph's, so the vector ranking cannot find it: only the exact term can)."""
    path = folder / "extra-models.md"
    paras = path.read_text(encoding="utf-8").split("\n\n")
    prose = [i for i, p in enumerate(paras) if not p.lstrip().startswith(("```", "{", "*", "|", "#", "-", "<"))]
    longest = max(prose, key=lambda i: len(paras[i]))
    paras[longest] += f" {PLANTED}"
    path.write_text("\n\n".join(paras), encoding="utf-8")


@pytest.fixture
def two_repositories(tmp_path, home):
    require(FASTAPI, "the fastapi-docs bench corpus")
    seed_model()
    api = tmp_path / "api"
    api.mkdir()
    for src in sorted(FASTAPI.glob("*.md"))[:25]:
        shutil.copy(src, api / src.name)
    _plant(api)
    kb("repo", "add", "api", str(api), "--json")
    kb("repo", "add", "cooking", str(make_repo(tmp_path / "cooking", COOKING)), "--json")
    assert kb("index", "--json").json["totals"]["documents_indexed"] == 31
    return api


def _documents(*args: str) -> list[dict]:
    res = kb("search", *args, "--json")
    assert res.code == 0, res.stdout
    return res.json["documents"]


def test_a_document_alone_holding_an_exact_identifier_ranks_first(two_repositories):
    for query in (PLANTED, f"{PLANTED} retries", f"what does {PLANTED} mean"):
        for scope in ((), ("--repo", "api")):
            docs = _documents(query, "--documents", "3", *scope)

            assert (docs[0]["repository"], docs[0]["document_path"]) == ("api", "extra-models.md"), query
            assert docs[0]["score"] > docs[1]["score"]
            assert PLANTED in docs[0]["top_fragments"][0]["text"]  # the passage itself, not only its id


def test_an_unrelated_repository_stays_out_of_on_topic_answers(two_repositories):
    for query in ON_TOPIC:
        docs = _documents(query, "--documents", "5", "--max-tokens", "8000")

        assert [d["repository"] for d in docs] == ["api"] * 5, (query, docs)
    assert _documents("how long do I bake the sourdough bread", "--documents", "1")[0]["repository"] == "cooking"


def test_search_answers_fit_max_tokens_by_cl100k(two_repositories, cl100k, tmp_path):
    def tokens(text: str) -> int:
        return len(cl100k.encode(text, disallowed_special=()))

    for budget in (250, 600, 2000):
        res = kb("search", "How do I declare query parameters with default values?", "--json", "--documents", "10",
                 "--fragments", "20", "--max-tokens", str(budget))
        meta = res.json["metadata"]

        assert res.code == 0 and tokens(res.stdout) <= budget
        assert meta["max_tokens"] == budget and meta["tokens_used"] >= tokens(res.stdout) - 1
        assert meta["truncated"] is True
        assert meta["returned"]["fragments"] < meta["total_available"]["fragments"]
        assert meta["returned"] == {"documents": len(res.json["documents"]), "fragments": len(res.json["fragments"])}
        if budget >= 600:  # 250 may hold no more than the envelope and one cut passage
            assert res.json["documents"] and res.json["documents"][0]["top_fragments"][0]["text"]
    default = kb("search", "How do I declare query parameters with default values?", "--json", "--fragments", "20")
    assert tokens(default.stdout) <= 2000 and default.json["metadata"]["max_tokens"] == 2000

    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps({"id": i, "query": q}) for i, q in enumerate(ON_TOPIC)) + "\n")
    batch = kb("search", "--queries-file", str(queries), "--json", "--max-tokens", "400")
    lines = [line for line in batch.stdout.splitlines() if line.strip()]
    assert len(lines) == len(ON_TOPIC)
    assert all(tokens(line + "\n") <= 400 for line in lines)
    assert all(json.loads(line)["metadata"]["truncated"] for line in lines)

    tiny = kb("search", "cookies", "--json", "--max-tokens", "20")
    assert (tiny.code, tiny.json["error"]["code"]) == (2, "USAGE_ERROR")
    assert "--max-tokens" in tiny.json["error"]["message"]


def test_mcp_search_tools_fit_max_tokens_and_carry_text(two_repositories, cl100k):
    from gsd_research.researcher.mcp_server import KnowledgeBaseTools
    from gsd_research.researcher.service_factory import ServiceFactory

    tools = KnowledgeBaseTools(ServiceFactory())
    for budget in (300, 1000):
        docs = tools.search_documents("How can I read cookies from a request?", None, 10, max_tokens=budget)
        frags = tools.search_fragments("How can I read cookies from a request?", None, 20, max_tokens=budget)

        for answer in (docs, frags):
            assert len(cl100k.encode(json.dumps(answer, ensure_ascii=False), disallowed_special=())) <= budget
            assert answer["metadata"]["truncated"] is True
        assert docs["documents"][0]["top_fragments"][0]["text"]
    planted = tools.search_documents(PLANTED, "api", 3)
    assert planted["documents"][0]["document_path"] == "extra-models.md"
    assert PLANTED in planted["documents"][0]["top_fragments"][0]["text"]
