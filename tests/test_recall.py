"""`gsd-research recall`: budgeted, fenced passages from the research memory, filtered, offline."""

from __future__ import annotations

import socket
import sqlite3
from datetime import datetime, timezone

import pytest

from gsd_research.core.untrusted import unfence
from gsd_research.memory.recall_command import parse_since, url_prefixes
from tests.conftest import assert_no_traceback, cl100k_tokens
from tests.injection import corpus
from tests.memory_fixtures import page
from tests.researcher_fixtures import kb, seed_model


@pytest.fixture
def read_some(cli, pages):
    """Three pages read by fetch: a widget guide, a bread recipe, an astronomy note."""
    urls = {
        "widgets": pages.url + "/pages/article",
        "bread": page(pages, "bread", "Sourdough basics", "Knead the sourdough for ten minutes, let it rise "
                      "overnight in the fridge and bake it at 250 degrees until the crust is dark brown."),
        "saturn": page(pages, "saturn", "Saturn's rings", "The rings of Saturn are made of ice particles; the "
                       "Cassini probe measured them for thirteen years before it dove into the planet in 2017."),
    }
    for url in urls.values():
        assert cli("fetch", url).json["metadata"]["memory"] == "stored"
    return urls


@pytest.fixture
def offline(monkeypatch):
    """Any connection attempt fails the test: recall must not need the network."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access during recall: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_recall_finds_what_fetch_read_offline(cli, read_some, offline):
    result = cli("recall", "which python version does the widget toolkit need")

    doc = result.json
    assert result.code == 0 and doc["success"] is True
    top = doc["results"][0]
    assert top["source_url"] == read_some["widgets"] and top["kind"] == "page"
    assert top["provider"].startswith("fetch") and top["fetched_at"].endswith("Z")
    assert "Python 3." in top["content"]
    assert doc["untrusted"] and doc["metadata"]["backend"] == "research-memory"
    assert doc["metadata"]["entries"] == 3 and doc["metadata"]["mode"] == "lexical"


def test_recall_names_several_sources_not_one_source_many_times(cli, read_some, offline):
    doc = cli("recall", "widget toolkit python sourdough saturn").json

    urls = [r["source_url"] for r in doc["results"]]
    assert all(urls.count(u) <= 2 for u in urls)
    assert set(read_some.values()) <= set(urls)


@pytest.mark.parametrize("budget", [300, 600, 2000])
def test_recall_stays_within_the_budget(cli, read_some, offline, budget):
    result = cli("recall", "widget sourdough saturn rings python", "--max-tokens", str(budget))

    assert result.code == 0
    assert cl100k_tokens(result.stdout) <= budget
    assert result.json["metadata"]["tokens_used"] <= budget


def test_url_prefix_keeps_only_matching_sources(cli, read_some, pages, offline):
    host = pages.url.split("://", 1)[1]

    only = cli("recall", "widget sourdough saturn", "--url-prefix", pages.url + "/pages/state/").json
    bare = cli("recall", "widget sourdough saturn", "--url-prefix", host + "/pages/article").json

    assert {r["source_url"] for r in only["results"]} == {read_some["bread"], read_some["saturn"]}
    assert {r["source_url"] for r in bare["results"]} == {read_some["widgets"]}
    assert only["metadata"]["filters"]["url_prefix"] == [pages.url + "/pages/state/"]


def test_since_keeps_only_what_was_read_recently(cli, read_some, home, offline):
    conn = sqlite3.connect(home / "research-memory" / "catalog.sqlite")
    with conn:
        conn.execute("UPDATE entries SET seen_at = '2020-01-01T00:00:00Z', fetched_at = '2020-01-01T00:00:00Z' "
                     "WHERE url = ?", (read_some["widgets"],))
    conn.close()

    recent = cli("recall", "widget toolkit python", "--since", "2h").json
    old = cli("recall", "widget toolkit python", "--since", "2019-06-01").json

    assert read_some["widgets"] not in {r["source_url"] for r in recent["results"]}
    assert read_some["widgets"] in {r["source_url"] for r in old["results"]}


def test_a_changed_page_shows_which_version_is_superseded(cli, pages):
    url = page(pages, "gizmo", "Gizmo release", "Version 1.0 of the gizmo ships with forty-two plugins included.")
    cli("fetch", url)
    page(pages, "gizmo", "Gizmo release", "Version 2.0 of the gizmo ships with ninety-nine plugins included.")
    cli("--no-cache", "fetch", url)

    doc = cli("recall", "gizmo plugins version").json

    by_text = {("forty-two" in r["content"]): r for r in doc["results"]}
    assert by_text[True].get("superseded") is True and "superseded" not in by_text[False]


def test_hostile_text_is_fenced_and_flagged(cli, pages):
    cli("fetch", pages.url + "/pages/injection")

    doc = cli("recall", "ignore previous instructions developer mode secrets").json

    assert doc["injection_flagged"] is True and doc["injection_warnings"]
    hostile = [r for r in doc["results"] if r.get("injection_flagged")]
    assert hostile and corpus.in_fence(doc, doc["results"])
    assert all("override" in r["source_flagged"] for r in doc["results"])
    assert "<|im_start|>" not in cli("recall", "developer mode").stdout


def test_search_results_and_deep_reports_are_recalled(cli, fake, home, monkeypatch):
    from tests.deep_fixtures import configure

    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-recall-0001")
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-test-recall-0001")
    configure(home, extra={"memory": {"embed": "off"}})
    fake.state["tavily.results"] = [{"title": "Perovskite cells", "url": "https://pv.example.org/perovskite",
                                     "content": "Perovskite tandem cells reached 33.9 percent efficiency.",
                                     "score": 0.9}]
    assert cli("search", "solar cell efficiency record").code == 0
    deep = cli("deep", "rust async runtimes").json

    found = cli("recall", "perovskite tandem efficiency").json
    report = cli("recall", "rust async runtimes deep research").json

    assert found["results"][0]["source_url"] == "https://pv.example.org/perovskite"
    assert found["results"][0]["kind"] == "search_result" and found["results"][0]["provider"] == "tavily"
    assert unfence(found["results"][0]["query"]) == "solar cell efficiency record"  # kept text: fenced
    kinds = {r["kind"]: r for r in report["results"]}
    assert kinds["deep"]["ref"] == deep["conversation_id"] and kinds["deep"]["source_url"] is None


def test_recall_after_embedding_is_hybrid_and_researcher_search_sees_the_same_store(cli, read_some, offline):
    from gsd_research.researcher import embed_worker

    seed_model()
    embed_worker.embed_now("research-memory")

    doc = cli("recall", "astronomy probe that studied a ringed planet").json
    researcher = kb("search", "astronomy probe that studied a ringed planet", "--repo", "research-memory", "--json")

    assert doc["metadata"]["mode"] == "hybrid" and doc["metadata"]["embedding"] == "complete"
    assert doc["results"][0]["source_url"] == read_some["saturn"]
    assert researcher.code == 0
    top_path = researcher.json["documents"][0]["document_path"]
    conn = sqlite3.connect(kb_home_catalog())
    assert conn.execute("SELECT url FROM entries WHERE path = ?", (top_path,)).fetchone()[0] == read_some["saturn"]


def kb_home_catalog():
    import os

    return os.path.join(os.environ["GSD_RESEARCH_HOME"], "research-memory", "catalog.sqlite")


def test_pending_embedding_is_reported_lexical_results_come_and_no_worker_restarts(cli, read_some, home,
                                                                                 monkeypatch):
    calls = []
    monkeypatch.setattr("gsd_research.researcher.api.schedule_embedding", lambda name: calls.append(name))
    cli("config", "set", "memory.embed", "background")

    doc = cli("recall", "sourdough").json

    assert doc["metadata"]["embedding"] == "pending" and calls == []  # only a write starts a worker
    assert doc["results"][0]["source_url"] == read_some["bread"]


def test_an_empty_memory_answers_with_a_note(cli, offline):
    result = cli("recall", "anything at all")

    assert result.code == 0 and result.json["results"] == []
    assert "empty" in result.json["metadata"]["note"]


def test_nothing_matching_the_filter_is_an_empty_answer(cli, read_some, offline):
    doc = cli("recall", "widget", "--url-prefix", "https://nowhere.example/").json

    assert doc["results"] == [] and "filters" in doc["metadata"]["note"]


@pytest.mark.parametrize("args,needle", [
    (("recall",), "needs a query"),
    (("recall", "  "), "needs a query"),
    (("recall", "x", "--since", "yesterday-ish"), "--since takes a duration"),
])
def test_usage_errors(cli, args, needle):
    result = cli(*args)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"
    assert needle in result.json["error"]["message"]
    assert_no_traceback(result)


def test_parse_since_and_url_prefixes():
    now = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)

    assert parse_since("30m", now) == "2026-05-01T11:30:00.000Z"
    assert parse_since("2d", now) == "2026-04-29T12:00:00.000Z"
    assert parse_since("1w", now) == "2026-04-24T12:00:00.000Z"
    assert parse_since("2026-04-30", now) == "2026-04-30T00:00:00.000Z"
    assert parse_since(None) is None
    assert url_prefixes(("www.docs.example.com/a",)) == [
        "https://docs.example.com/a", "https://www.docs.example.com/a", "http://docs.example.com/a",
        "http://www.docs.example.com/a"]
    assert url_prefixes(("https://x.org/",)) == ["https://x.org/"]


def test_the_recall_process_runs_without_network(run_bin, read_some, monkeypatch):
    monkeypatch.delenv("GSD_RESEARCH_ALLOW_HOSTS")
    result = run_bin("gsd-research", "recall", "sourdough rise overnight", env={"HTTP_PROXY": "http://127.0.0.1:9",
                                                                               "HTTPS_PROXY": "http://127.0.0.1:9"})

    assert result.code == 0, result.stdout
    assert result.json["results"][0]["source_url"] == read_some["bread"]



def test_the_memory_cannot_be_removed_as_a_repository_and_recall_still_answers(cli, read_some, offline):
    refused = kb("repo", "remove", "research-memory", "--keep-index", "--json")
    assert refused.code == 2 and "recall --clear" in refused.json["error"]["suggestions"][0]

    doc = cli("recall", "sourdough rise overnight").json

    assert doc["results"][0]["source_url"] == read_some["bread"]


def test_warnings_of_results_cut_by_the_budget_are_dropped_with_them(cli, pages):
    clean = page(pages, "parsers", "JSON parsers compared", " ".join(
        ["We measured six JSON parsers on documents from one kilobyte to one gigabyte of JSON."] * 6))
    cli("fetch", clean)
    cli("fetch", pages.url + "/pages/injection")
    full = cli("recall", "six JSON parsers measured kilobyte gigabyte", "--max-tokens", "4000").json
    assert full["injection_flagged"] is True and full["results"][0]["source_url"] == clean  # the flagged one after

    doc = cli("recall", "six JSON parsers measured kilobyte gigabyte", "--max-tokens", "400").json

    assert doc["metadata"]["truncated"] is True
    assert not any(r.get("injection_flagged") for r in doc["results"])
    assert "injection_warnings" not in doc and "injection_flagged" not in doc
    assert doc["metadata"]["tokens_used"] <= 400
