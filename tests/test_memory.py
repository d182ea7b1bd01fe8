"""Research memory: what fetch, search and deep read is kept (one entry per source and content), never
failing the command that read it, without keys, with its injection flags, within memory.max_mb."""

from __future__ import annotations

import json

import pytest

from gsd_research.memory import api as memory_api
from gsd_research.memory.store import Entry, MemoryStore
from tests.conftest import assert_no_traceback
from tests.memory_fixtures import entries, page


def document(home, entry: dict) -> str:
    return (home / "research-memory" / "documents" / entry["path"]).read_text()


# -- fetch -----------------------------------------------------------------------------------------

def test_fetch_keeps_the_extracted_markdown_with_its_source(cli, pages, home):
    url = pages.url + "/pages/article"

    result = cli("fetch", url)

    assert result.code == 0 and result.json["metadata"]["memory"] == "stored"
    [entry] = entries(home)
    assert (entry["kind"], entry["url"], entry["title"]) == ("page", url, "Install guide | Widgets")
    assert entry["provider"].startswith("fetch") and entry["fetched_at"].endswith("Z")
    assert len(entry["content_hash"]) == 64
    text = document(home, entry)
    assert "pip install widget_toolkit==4.2.0" in text  # the page's content, not the summary
    assert "| Windows | experimental |" in text and "FOOTERTEXT" not in text
    assert text[entry["body_offset"]:].startswith("# Installing the widget toolkit")


def test_the_same_page_twice_is_one_entry(cli, pages, home):
    url = pages.url + "/pages/article"

    first = cli("fetch", url).json
    again = cli("--no-cache", "fetch", url).json

    assert first["metadata"]["memory"] == "stored" and again["metadata"]["memory"] == "known"
    assert len(entries(home)) == 1


def test_a_changed_page_is_a_new_version_and_the_old_one_is_kept(cli, pages, home):
    url = page(pages, "news", "Release news", "Version 1.0 of the gizmo ships with forty-two plugins included.")
    cli("fetch", url)
    page(pages, "news", "Release news", "Version 2.0 of the gizmo ships with ninety-nine plugins included.")

    second = cli("--no-cache", "fetch", url).json

    assert second["metadata"]["memory"] == "stored"
    kept = entries(home)
    assert [e["url"] for e in kept] == [url, url] and kept[0]["content_hash"] != kept[1]["content_hash"]
    assert "forty-two" in document(home, kept[0]) and "ninety-nine" in document(home, kept[1])


def test_extract_mode_is_kept_too(cli, pages, home):
    result = cli("fetch", "--extract", pages.url + "/pages/notes.txt")

    assert result.json["metadata"]["memory"] == "stored"
    assert "Python 3.10" in document(home, entries(home)[0])


@pytest.mark.parametrize("args", [("--max-tokens", "100"), ("--page", "99")])
def test_a_fetch_that_fails_keeps_nothing(cli, pages, home, args):
    result = cli("fetch", "--extract", pages.url + "/pages/article", *args)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"
    assert entries(home) == []
    assert not list((home / "research-memory" / "documents").rglob("*.md"))
    again = cli("fetch", "--extract", pages.url + "/pages/article")  # then answered: kept
    assert again.json["metadata"]["memory"] == "stored" and len(entries(home)) == 1


def test_a_page_already_kept_stays_when_a_later_fetch_fails(cli, pages, home):
    cli("fetch", "--extract", pages.url + "/pages/article")
    assert cli("fetch", "--extract", pages.url + "/pages/article", "--page", "99").code == 2

    assert len(entries(home)) == 1


def test_memory_off_keeps_nothing(cli, pages, home):
    assert cli("config", "set", "memory.enabled", "false").code == 0

    result = cli("fetch", pages.url + "/pages/article")

    assert result.json["metadata"]["memory"] == "off"
    assert entries(home) == [] and not (home / "research-memory").exists()


def test_a_memory_failure_never_fails_the_command(cli, pages, home):
    (home / "research-memory").write_text("a file where the memory folder should be")

    result = cli("fetch", pages.url + "/pages/article")

    assert result.code == 0 and result.json["metadata"]["memory"] == "failed"
    assert_no_traceback(result)
    assert "record:" in (home / "logs" / "memory.log").read_text()


def test_a_bad_memory_setting_never_fails_the_command(cli, pages, home):
    with (home / "config.yaml").open("a") as fh:
        fh.write("  max_mb: lots\n")  # under memory: (hand-edited; `config set` refuses it)

    result = cli("fetch", pages.url + "/pages/article")

    assert result.code == 0 and result.json["metadata"]["memory"] == "failed"


def test_injection_flags_are_kept_with_the_text(cli, pages, home):
    cli("fetch", pages.url + "/pages/injection")

    [entry] = entries(home)
    flags = json.loads(entry["flags"])
    assert {"override", "fake_tag"} <= set(flags)


def test_a_new_entry_asks_for_the_background_embedding(cli, pages, home, monkeypatch):
    calls = []
    monkeypatch.setattr("gsd_research.researcher.api.schedule_embedding", lambda name: calls.append(name))
    cli("config", "set", "memory.embed", "background")

    cli("fetch", pages.url + "/pages/article")
    cli("--no-cache", "fetch", pages.url + "/pages/article")  # known: nothing new to embed

    assert calls == ["research-memory"]


# -- search and deep -----------------------------------------------------------------------------

@pytest.fixture
def tavily(fake, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-memory-0001")
    return fake


def test_search_keeps_each_result_the_result_set_and_the_report(cli, tavily, home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    result = cli("search", "solid state batteries", "--max-sources", "3", "--report")

    assert result.code == 0 and result.json["metadata"]["memory"] == "stored"
    kept = entries(home)
    kinds = sorted(e["kind"] for e in kept)
    assert kinds == ["report", "search", "search_result", "search_result", "search_result"]
    results = [e for e in kept if e["kind"] == "search_result"]
    assert {e["url"] for e in results} == {f"https://site{i}.example.org/solid-state-batteries" for i in (1, 2, 3)}
    assert all(e["provider"] == "tavily" and e["query"] == "solid state batteries" for e in results)
    report = next(e for e in kept if e["kind"] == "report")
    assert report["ref"] == result.json["report"]
    assert "Source 2 reports finding number 2" in document(home, report)


def test_deep_keeps_the_report_with_its_citations(cli, fake, home, monkeypatch):
    from tests.deep_fixtures import configure

    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-test-memory-0001")
    configure(home)

    result = cli("deep", "rust async runtimes")

    assert result.code == 0
    [entry] = entries(home)
    assert (entry["kind"], entry["provider"], entry["ref"]) == ("deep", "perplexity", result.json["conversation_id"])
    text = document(home, entry)
    from gsd_research.core.untrusted import unfence

    assert unfence(result.json["report"])[:80] in text and "## Sources" in text


def test_a_deep_job_finished_by_the_worker_is_kept(cli, fake, home, monkeypatch):
    from tests.deep_fixtures import configure

    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-test-memory-0001")
    configure(home)
    queued = cli("deep", "--async", "zig build system").json

    cli("jobs", "worker", "--once")

    [entry] = entries(home)
    assert (entry["kind"], entry["ref"], entry["query"]) == ("deep", queued["conversation_id"], "zig build system")


def test_a_search_that_echoes_keys_is_kept_without_them(cli, tavily, home):
    key = "tvly-test-memory-0001"
    tavily.state["tavily.results"] = [{"title": f"Leak {key}", "url": f"https://x.example.org/?k={key}",
                                       "content": f"The page printed the key {key} in its text.", "score": 0.9}]

    assert cli("search", "echo my key").code == 0

    for path in (home / "research-memory").rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    for path in (home / "repositories").rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


# -- the store -------------------------------------------------------------------------------------

def test_memory_max_mb_evicts_the_least_recently_seen_first(home):
    store = MemoryStore()
    for i in range(6):
        store.put(Entry(kind="page", body=f"page {i} " + "x" * 4000, url=f"https://e.example/{i}",
                        fetched_at=f"2026-01-0{i + 1}T00:00:00Z"))
        store.conn.execute("UPDATE entries SET seen_at = fetched_at")
    store.conn.commit()
    store.put(Entry(kind="page", body="page 0 " + "x" * 4000, url="https://e.example/0"))  # seen again: newest

    removed = store.evict(3 * 4200)

    kept = sorted(e["url"] for e in entries(home))
    assert removed == 3 and kept == ["https://e.example/0", "https://e.example/4", "https://e.example/5"]
    assert store.total_bytes() <= 3 * 4200
    files = sorted(p.name for p in (home / "research-memory" / "documents").rglob("*.md"))
    assert len(files) == 3


def test_settings_defaults_and_parsing():
    from gsd_research.core.config import Config

    assert memory_api.settings(Config({})) == {"enabled": True, "max_mb": 500, "embed": "background",
                                               "page_cap_kb": 512}
    conf = memory_api.settings(Config({"memory": {"enabled": "no", "max_mb": 1, "embed": False, "page_cap_kb": 0}}))
    assert conf == {"enabled": False, "max_mb": 1, "embed": "off", "page_cap_kb": 1}


def test_memory_files_are_private(cli, pages, home):
    cli("fetch", pages.url + "/pages/article")

    for path in [home / "research-memory", home / "research-memory" / "catalog.sqlite",
                 *(home / "research-memory" / "documents").rglob("*")]:
        assert path.stat().st_mode & 0o077 == 0, path


def test_a_deep_answer_served_again_from_the_cache_is_the_same_entry(cli, fake, home, monkeypatch):
    from tests.deep_fixtures import configure

    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-test-memory-0001")
    configure(home)

    first = cli("deep", "rust async runtimes").json
    again = cli("deep", "rust async runtimes").json

    assert first["metadata"]["mode"] != "cache" and again["metadata"]["mode"] == "cache"
    assert len(entries(home)) == 1


def test_memory_embed_takes_only_its_words(cli):
    assert cli("config", "set", "memory.embed", "off").code == 0
    refused = cli("config", "set", "memory.embed", "sometimes")

    assert refused.code == 2 and "background" in refused.json["error"]["message"]


def test_the_memory_log_is_private_and_never_written_through_a_planted_link(cli, pages, home, tmp_path):
    (home / "research-memory").write_text("a file where the memory folder should be")
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched\n")
    (home / "logs").mkdir(mode=0o700, exist_ok=True)
    (home / "logs" / "memory.log").symlink_to(target)

    result = cli("fetch", pages.url + "/pages/article")

    log = home / "logs" / "memory.log"
    assert result.code == 0 and result.json["metadata"]["memory"] == "failed"
    assert target.read_text() == "untouched\n" and not log.is_symlink()
    assert "record:" in log.read_text() and log.stat().st_mode & 0o077 == 0
