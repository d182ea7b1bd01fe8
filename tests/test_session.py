"""A research session: passages returned once, then named by reference; spend in every answer; a private,
bounded ledger that parallel calls cannot corrupt."""

from __future__ import annotations

import json
import stat
from concurrent.futures import ThreadPoolExecutor

import pytest

from gsd_research.core import session
from tests.hooks_fixtures import hook
from tests.memory_fixtures import PAGE

DOCS = ("docs", "react", "useEffect cleanup", "--max-tokens", "1200")


def ledger_files(home):
    return sorted((home / "sessions").glob("*.json"))


def full(results):
    return [r for r in results if "repeat" not in r and not r.get("truncated")]


def test_a_passage_the_session_returned_comes_back_as_a_reference(cli, fake):
    first = cli(*DOCS, "--session", "s1").json

    second = cli(*DOCS, "--session", "s1").json

    refs = [r for r in second["results"] if "repeat" in r]
    assert {r["source_url"] for r in full(first["results"])} <= {r["source"] for r in refs}
    assert all(set(r) == {"repeat", "seen", "source"} and r["seen"].startswith("docs ") for r in refs)
    assert second["metadata"]["expand"] == "gsd-research expand REF"


def test_a_passage_returned_in_part_comes_back_as_its_reference_and_its_rest(cli, fake):
    first = cli(*DOCS, "--session", "s1").json
    cut = first["results"][-1]

    second = cli(*DOCS, "--session", "s1").json

    rest = next(r for r in second["results"] if r.get("continued"))
    assert cut["truncated"] and rest["source_url"] == cut["source_url"]
    assert not rest["content"].startswith(cut["content"][:40])


def test_the_room_references_free_is_not_refilled_with_lower_ranked_results(cli, fake):
    first = cli(*DOCS, "--session", "s1").json

    second = cli(*DOCS, "--session", "s1").json

    assert second["metadata"]["tokens_used"] < first["metadata"]["tokens_used"]
    assert second["metadata"]["next"].startswith("gsd-research expand c")


def test_a_repeated_page_comes_back_as_a_reference_without_its_text(cli, fake, monkeypatch):
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    url = fake.url + "/pages/article"
    first = cli("fetch", url, "--session", "s1").json

    second = cli("fetch", url, "--session", "s1").json

    assert first["summary"] and second["summary"] == "" and "title" not in second
    assert second["metadata"]["repeat"]["source"] == url


def test_expand_of_a_repeated_page_gives_back_what_the_repeat_left_out(cli, fake, monkeypatch):
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    url = fake.url + "/pages/article"
    first = cli("fetch", url, "--session", "s1").json
    ref = cli("fetch", url, "--session", "s1").json["metadata"]["repeat"]["repeat"]

    doc = cli("expand", ref, "--session", "s1").json

    keys = list(doc)
    assert doc["content"] == first["summary"] and doc["title"] == first["title"]
    assert keys.index("untrusted") < keys.index("title") < keys.index("untrusted_end")


def test_expand_gives_the_passage_again_inside_the_fence(cli, fake):
    first = cli(*DOCS, "--session", "s1").json
    ref = cli(*DOCS, "--session", "s1").json["results"][0]["repeat"]

    doc = cli("expand", ref, "--session", "s1").json

    keys = list(doc)
    assert doc["content"] == full(first["results"])[0]["content"]
    assert keys.index("untrusted") < keys.index("content") < keys.index("untrusted_end")


def test_a_subagent_session_expands_a_reference_its_client_session_returned(cli, fake):
    first = cli(*DOCS, "--session", "s1").json
    ref = cli(*DOCS, "--session", "s1").json["results"][0]["repeat"]

    doc = cli("expand", ref, "--session", "s1.agent7").json

    assert doc["content"] == full(first["results"])[0]["content"]


def test_expand_of_a_reference_without_its_session_is_a_usage_error(cli, fake):
    cli(*DOCS, "--session", "s1")
    ref = cli(*DOCS, "--session", "s1").json["results"][0]["repeat"]

    result = cli("expand", ref)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"


@pytest.mark.parametrize("how", ["--fresh", "--session s2", "no session"])
def test_a_passage_comes_back_in_full_with_fresh_another_session_or_none(cli, fake, how):
    first = cli(*DOCS, "--session", "s1").json
    extra = {"--fresh": ["--session", "s1", "--fresh"], "--session s2": ["--session", "s2"], "no session": []}[how]

    again = cli(*DOCS, *extra).json

    assert not any("repeat" in r for r in again["results"])
    assert again["results"][0]["content"] == first["results"][0]["content"]


def test_the_environment_names_the_session(cli, fake, monkeypatch):
    monkeypatch.setenv("GSD_RESEARCH_SESSION", "from-env")
    cli(*DOCS)

    again = cli(*DOCS).json

    assert any("repeat" in r for r in again["results"]) and again["metadata"]["session"]["id"] == "from-env"


def test_every_answer_says_what_the_session_has_spent(cli, fake):
    first = cli(*DOCS, "--session", "s1").json["metadata"]

    second = cli("docs", "react", "state hooks", "--session", "s1").json["metadata"]

    assert first["session"] == {"id": "s1", "calls": 1, "tokens": first["tokens_used"]}
    assert second["session"] == {"id": "s1", "calls": 2, "tokens": first["tokens_used"] + second["tokens_used"]}


def test_the_ledger_and_the_cursors_are_private(cli, fake, home):
    assert "next" in cli(*DOCS, "--session", "s1").json["metadata"]

    files = ledger_files(home) + sorted((home / "sessions" / "cursors").glob("c*.json"))

    assert len(files) == 2 and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert all(stat.S_IMODE(p.parent.stat().st_mode) & 0o077 == 0 for p in files)


def test_parallel_calls_of_one_session_keep_its_ledger_whole(run_bin, fake, home):
    queries = ["useEffect cleanup", "state hooks", "context api", "refs"]  # four processes writing at once

    with ThreadPoolExecutor(len(queries)) as pool:
        codes = list(pool.map(lambda q: run_bin("gsd-research", "docs", "react", q, "--session", "p").code, queries))

    [path] = ledger_files(home)
    data = json.loads(path.read_text())
    assert codes == [0] * len(queries) and data["calls"] == len(queries) and data["passages"]


@pytest.mark.parametrize("damage", [
    '{"passages": [tru',  # cut short
    '{"v": 1, "calls": "x", "tokens": 0, "passages": {}}',  # valid JSON, a count of the wrong type
    '{"v": 1, "calls": 1, "tokens": 0, "passages": {"abc": "text"}}',  # a passage that is no entry
])
def test_a_damaged_ledger_is_set_aside_and_the_call_still_answers(cli, fake, home, damage):
    cli(*DOCS, "--session", "s1")
    [path] = ledger_files(home)
    path.write_text(damage)

    result = cli(*DOCS, "--session", "s1")

    assert result.code == 0 and result.json["metadata"]["session"]["calls"] == 1
    assert list(path.parent.glob(path.stem + ".damaged-*"))


def test_the_ledger_keeps_only_the_newest_passages(cli, fake, home, monkeypatch):
    monkeypatch.setattr(session, "MAX_PASSAGES", 3)

    cli(*DOCS, "--session", "s1")

    [path] = ledger_files(home)
    assert len(json.loads(path.read_text())["passages"]) == 3


def test_session_start_exports_the_client_session_id(tmp_path):
    env_file = tmp_path / "env"

    hook("session-start", {"session_id": "4f1c2a9e-0d1b", "hook_event_name": "SessionStart"},
         env={"CLAUDE_ENV_FILE": str(env_file)})

    assert "export GSD_RESEARCH_SESSION=4f1c2a9e-0d1b\n" in env_file.read_text()


def test_session_start_never_writes_a_session_id_that_is_not_plain(tmp_path):
    env_file = tmp_path / "env"

    hook("session-start", {"session_id": "x; rm -rf ~", "hook_event_name": "SessionStart"},
         env={"CLAUDE_ENV_FILE": str(env_file)})

    assert "GSD_RESEARCH_SESSION" not in (env_file.read_text() if env_file.exists() else "")


def test_a_key_quoted_by_a_page_never_reaches_the_ledger(cli, fake, home, monkeypatch):
    canary = "pplx-canary-session-7Qz"
    monkeypatch.setenv("PERPLEXITY_API_KEY", canary)
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    fake.state.setdefault("pages", {})["leak"] = PAGE.format(
        title="Leak", text=f"The debug log printed the key {canary} in the middle of a long and boring sentence.")

    cli("fetch", fake.url + "/pages/state/leak", "--extract", "--session", "s1")

    [path] = ledger_files(home)
    assert canary not in path.read_text() and "***" in path.read_text()
