"""One voice: every text a user or an agent is shown (README, docs/, agent, skills with all their files, slash commands,
hooks and hooks.json, plugin manifests, every `--help`, the CLI's messages and suggestions) states the facts of
lib/gsd_research/data/facts.yaml and no other figure or rule for them (the checker: tests/facts_checks.py).
The mutation tests write each known rewording of a contradiction into a copy and prove the checker catches it."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest

from tests import facts_checks as fc
from tests.conftest import ROOT, TEST_CONFIG

FACTS = fc.FACTS
TEXTS = fc.all_texts()
STATED = [(name, rel) for name, fact in FACTS.items() for rel in fact.get("stated_in", [])]


def test_every_kind_of_text_is_read():
    kinds = {"README.md", "docs/deep-research.md", "agents/research-scout.md", "skills/deep-research/SKILL.md", "commands/deep.md",
             "hooks/hooks.json", "plugin.json", ".claude-plugin/plugin.json", "help: gsd-research deep",
             "help: gsd-research jobs wait", "help: researcher status", "strings:gsd_research/deep/command.py"}
    assert kinds <= set(TEXTS), kinds - set(TEXTS)
    assert {r for r in TEXTS if r.startswith("hooks/") and r.endswith(".py")}


@pytest.mark.parametrize("name, rel", STATED, ids=[f"{n}-{r}" for n, r in STATED])
def test_each_fact_is_stated_verbatim_where_it_is_listed(name, rel):
    assert fc.flat(fc.normalize(FACTS[name]["statement"])) in fc.flat(fc.normalize(TEXTS[rel])), \
        f"{rel} lacks the {name} statement"


@pytest.mark.parametrize("rel", list(TEXTS))
def test_no_text_contradicts_the_facts(rel):
    assert fc.text_problems(rel, TEXTS[rel], TEXTS) == []


def test_deep_cost_figures_follow_the_price_table():
    from gsd_research.deep.cost import expected_cost, price_table
    from gsd_research.deep.settings import DEFAULTS

    table = price_table()
    cost = FACTS["deep_cost"]
    computed = {e: expected_cost(table, "perplexity", "sonar-deep-research", e) for e in ("low", "medium", "high")}
    assert {e: round(v, 2) for e, v in computed.items()} == cost["usd"]
    low, high = math.floor(min(computed.values()) * 10) / 10, math.ceil(max(computed.values()) * 10) / 10
    assert cost["range"] == f"${low:.2f}-${high:.2f}"
    assert cost["warning_usd"] == DEFAULTS["cost_warning_usd"]


def test_the_facts_agree_with_the_commands_suggestions():
    source = (ROOT / "lib" / "gsd_research" / "deep" / "jobs_command.py").read_text()
    assert f"--timeout {FACTS['jobs_wait']['timeout']}" in source


# -- mutation tests: each rewording written into a copy is caught --------------------------------------------------

REWORDINGS = {  # (where, text): contradictions the checker once missed, and the classic ones
    "search MEDIUM in the agent's prose": ("agents/research-scout.md", "Search results are MEDIUM confidence."),
    "search MEDIUM, word order": ("skills/read-url/SKILL.md", "For web search results: confidence MEDIUM."),
    "search MEDIUM in a skill's prose": ("skills/web-search/SKILL.md", "Treat these as **MEDIUM** confidence."),
    "search MEDIUM in a code-marked table": ("README.md", "| gsd-research search | `MEDIUM` |"),
    "search MEDIUM in an indented table": ("README.md", "   | web search with a report | gsd-research search | MEDIUM |"),
    "deep HIGH": ("commands/deep.md", "Deep research reports are HIGH confidence."),
    "verified search HIGH": ("README.md", "A search result verified against the official docs is HIGH."),
    "agreement raises confidence": ("agents/research-scout.md", "3. Do independent sources agree? YES → raise confidence"),
    "deep verifies": ("agents/research-scout.md", "Can deep research verify it? YES → raise one level"),
    "the year, as a number": ("skills/web-search/SKILL.md", "Always include 2026 in every query."),
    "the year, classic": ("agents/research-scout.md", "Always include the current year in queries."),
    "the year, in your searches": ("README.md", "Put the year in your searches for fresh results."),
    "a dated example, double quotes": ("README.md", 'gsd-research search "EV market 2025 trends"'),
    "a dated example, single quotes": ("skills/web-search/SKILL.md", "gsd-research search 'EV market 2025 trends'"),
    "a dated example, with options first": ("agents/research-scout.md", "gsd-research deep --async 'WebGPU 2026 status'"),
    "a dated example, slash command": ("README.md", "`/research:search react compiler 2025`"),
    "a dated example, WebSearch": ("agents/research-scout.md", "WebSearch('best ORM 2026')"),
    "calls per session, a range": ("skills/deep-research/SKILL.md", "Budget 5-10 per research session."),
    "calls per session, en dash": ("agents/research-scout.md", "Budget 5–10 deep research calls per session."),
    "calls per session, up to": ("agents/research-scout.md", "Run up to 10 deep research calls per session."),
    "calls per session, between": ("README.md", "Use between 5 and 10 deep calls per session."),
    "calls per session, in words": ("skills/deep-research/SKILL.md", "At most ten deep research calls a session."),
    "calls per session, full-width": ("skills/deep-research/SKILL.md", "Budget １０ deep research calls per session."),
    "a cost off the facts": ("README.md", "costs about $0.01 per query"),
    "costs swapped between efforts": ("skills/deep-research/SKILL.md", "About $0.21 at high, $1.19 at low."),
    "a cost in cents": ("skills/deep-research/SKILL.md", "Each call costs about 20 cents."),
    "a cost in dollars": ("README.md", "A deep call is roughly 0.05 dollars."),
    "another cost range": ("agents/research-scout.md", "Deep research costs $0.01-$1 per call."),
    "a range end alone": ("README.md", "Each deep call costs $0.20."),
    "JOB_RUNNING exit code 5 = stop": ("commands/deep.md", "`JOB_RUNNING` (exit code 5) = stop."),
    "JOB_FAILED = wait again": ("skills/deep-research/SKILL.md", "`JOB_FAILED` (exit 5): run the same jobs wait again."),
    "exit status before the code": ("README.md", "exit 5, error.code JOB_RUNNING → still running: run it again"),
    "TIMEOUT means still running": ("commands/deep.md",
                                    "if it ends with `TIMEOUT` (exit 6) the job is still running: wait again"),
    "STILL_RUNNING": ("skills/deep-research/SKILL.md", "`STILL_RUNNING` means wait again."),
    "another wait timeout": ("README.md", "gsd-research jobs wait ID --timeout 300"),
    "deep TIMEOUT: retry and fall back": ("agents/research-scout.md",
                                          "| `TIMEOUT`, `NETWORK_ERROR` | retry once later, then fall back |"),
}


def _mutated(rel: str, text: str) -> dict[str, str]:
    texts = dict(TEXTS)
    texts[rel] = f"{texts[rel]}\n\n{text}\n"
    return texts


@pytest.mark.parametrize("rel, text", list(REWORDINGS.values()), ids=list(REWORDINGS))
def test_each_rewording_of_a_contradiction_is_caught(rel, text):
    texts = _mutated(rel, text)
    assert fc.text_problems(rel, TEXTS[rel], TEXTS) == []  # the copy differs from a clean text by the rewording only

    # only the mutated text is checked: the other texts are checked once, by test_no_text_contradicts_the_facts
    assert fc.text_problems(rel, texts[rel], texts), f"{text!r} in {rel} went unnoticed"


@pytest.mark.parametrize("rel", ["README.md", "skills/deep-research/SKILL.md", "agents/research-scout.md"])
def test_a_reworded_statement_is_caught(rel):
    """A listed file that says the fact in other words no longer carries it verbatim."""
    texts = dict(TEXTS)
    statement = fc.normalize(FACTS["deep_cost"]["statement"])
    texts[rel] = fc.normalize(texts[rel]).replace(statement, statement.replace("Each call costs money", "Calls cost"))
    found = fc.text_problems(rel, texts[rel], texts) + [p for p in fc.statement_problems(texts)
                                                         if p.startswith(f"{rel} lacks")]
    if rel in FACTS["deep_cost"]["stated_in"]:
        assert f"{rel} lacks the deep_cost statement" in found
    else:
        assert found == []


@pytest.fixture
def copy_of_the_texts(tmp_path):
    root = tmp_path / "checkout"
    for name in ("agents", "commands", "skills", "hooks", ".claude-plugin"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("__pycache__", ".claude*"))
    for name in ("README.md", "plugin.json"):
        shutil.copy2(ROOT / name, root / name)
    assert fc.violations(fc.file_texts(root)) == {}
    return root


def _edit_json(path, key: str, extra: str) -> None:
    data = json.loads(path.read_text())
    data[key] = f"{data.get(key, '')} {extra}"
    path.write_text(json.dumps(data, indent=2))


def test_the_files_once_never_read_are_read(copy_of_the_texts):
    root = copy_of_the_texts
    (root / "skills" / "web-search" / "reference").mkdir()
    (root / "skills" / "web-search" / "reference" / "confidence.md").write_text("Search results are MEDIUM confidence.\n")
    _edit_json(root / "hooks" / "hooks.json", "description", "Run up to 10 deep research calls per session.")
    _edit_json(root / "plugin.json", "description", "Always include the current year in queries.")
    _edit_json(root / ".claude-plugin" / "plugin.json", "description", "Deep research costs $0.05 per call.")
    (root / "skills" / "deep-research" / "notes.txt").write_text("`JOB_RUNNING` (exit code 5) = stop.\n")

    found = fc.violations(fc.file_texts(root))

    assert set(found) == {"skills/web-search/reference/confidence.md", "hooks/hooks.json", "plugin.json",
                          ".claude-plugin/plugin.json", "skills/deep-research/notes.txt"}, found


def test_a_contradiction_in_a_help_text_is_caught(monkeypatch):
    from gsd_research.deep.command import deep

    monkeypatch.setattr(deep, "help", f"{deep.help}\n\nBudget up to 10 deep research calls per session.")

    found = fc.problems(fc.help_texts())

    assert list(found) == ["help: gsd-research deep"], found


def test_a_contradiction_in_a_suggestion_string_is_caught(tmp_path):
    package = tmp_path / "gsd_research"
    package.mkdir()
    shutil.copy2(ROOT / "lib" / "gsd_research" / "search" / "command.py", package / "command.py")
    assert fc.problems(fc.message_texts(package)) == {}
    (package / "command.py").write_text((package / "command.py").read_text().replace(
        "EXAMPLE = '", "EXAMPLE = 'gsd-research search \"EV market 2025 trends\"'  # '"))

    assert list(fc.problems(fc.message_texts(package))) == ["strings:gsd_research/command.py"]


# -- the jobs wait loop, as the command answers it ------------------------------------------------------------

@pytest.mark.parametrize("outcome", ["done", "JOB_RUNNING", "JOB_FAILED", "JOB_CANCELLED"])
def test_jobs_wait_answers_as_the_facts_say(cli, fake, home, monkeypatch, outcome):
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-canary-facts-0001")
    (home / "config.yaml").write_text(TEST_CONFIG.replace("max_retries: 3", "max_retries: 0")
                                      + "deep: {poll_interval: 0.02, retry_backoff: 0.02, retry_backoff_max: 0.05, "
                                        "idle_exit: 0.3, autostart: false, concurrency: 1}\n")
    if outcome == "JOB_FAILED":
        fake.add_fault("/perplexity/async/chat/completions", "status", status=500, times=100, method="POST")
    if outcome == "JOB_RUNNING":
        fake.state["pplx_async_delay"] = 5  # longer than the wait (which runs the job: no worker runs)
    job_id = cli("deep", "--async", f"question that ends {outcome}").json["conversation_id"]
    if outcome in ("done", "JOB_FAILED"):
        cli("jobs", "worker", "--once")
    if outcome == "JOB_CANCELLED":
        cli("jobs", "cancel", job_id)

    result = cli("jobs", "wait", job_id, "--timeout", "0.2")

    expected = FACTS["jobs_wait"]["outcomes"][outcome]
    assert result.code == expected["exit"], result.stdout
    if outcome == "done":
        assert result.json["success"] is True and result.json["report"]
    else:
        assert result.json["error"]["code"] == outcome


# -- today's GSD names (../shared/gsd/NOTES.md, the 2026-11 check) ------------------------------------------

@pytest.mark.parametrize("rel", list(TEXTS))
def test_texts_use_todays_gsd_command_names(rel):
    text = fc.flat(TEXTS[rel])
    # global installs turn GSD's commands into skills: /gsd-plan-phase; /gsd:research-phase is gone
    assert re.findall(r"/gsd:(?!research-phase)[a-z-]+", text) == [], rel
    old = [m.start() for m in re.finditer(r"/gsd:research-phase", text)]
    assert all(text[max(0, i - 10):i].endswith("replaced `") for i in old), f"{rel} still sends users to /gsd:research-phase"


def test_gsd_researchers_context7_routes_are_named_where_docs_are_explained():
    for rel in ("agents/research-scout.md", "skills/library-docs/SKILL.md", "README.md"):
        assert "mcp__context7__" in TEXTS[rel] and "ctx7" in TEXTS[rel], rel
    assert "--research-phase N" in TEXTS["README.md"] and "--research-phase N" in TEXTS["agents/research-scout.md"]
