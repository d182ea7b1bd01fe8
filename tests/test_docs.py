"""gsd-research docs against the fake Context7 server."""

from __future__ import annotations

from tests.conftest import assert_no_traceback


def test_docs_resolves_a_name_and_returns_budgeted_snippets(cli, fake):
    result = cli("docs", "react", "useEffect cleanup")

    doc = result.json
    assert result.code == 0
    assert doc["success"] is True and doc["command"] == "docs"
    assert doc["metadata"]["library_id"] == "/facebook/react"
    assert doc["metadata"]["confidence"] == "HIGH"
    assert doc["metadata"]["backend"] == "context7"
    assert 0 < doc["metadata"]["returned"] <= doc["metadata"]["total_available"]
    assert doc["metadata"]["tokens_used"] <= 2000
    assert all({"title", "content", "source_url", "tokens"} <= set(r) for r in doc["results"])
    assert_no_traceback(result)
