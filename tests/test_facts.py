"""One voice: the agent, the skills, the slash commands and the README state the facts of
lib/gsd_research/data/facts.yaml, and no other figure or rule for them."""

from __future__ import annotations

import math
import re

import pytest
import yaml

from tests.conftest import ROOT

FACTS = yaml.safe_load((ROOT / "lib" / "gsd_research" / "data" / "facts.yaml").read_text())
# the hooks' context texts (the SubagentStart tool strategy) are read as they are written, in their source
TEXT_FILES = [ROOT / "README.md", *sorted((ROOT / "agents").glob("*.md")), *sorted((ROOT / "commands").glob("*.md")),
              *sorted((ROOT / "skills").glob("*/SKILL.md")),
              *sorted(p for p in (ROOT / "hooks").rglob("*.py") if "__pycache__" not in p.parts)]
TEXTS = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in TEXT_FILES}
STATED = [(name, rel) for name, fact in FACTS.items() for rel in fact.get("stated_in", [])]


def flat(text: str) -> str:
    """Whitespace (line wraps, list indentation) folded, so a statement wrapped differently still matches."""
    return re.sub(r"\s+", " ", text)


def without_statements(text: str) -> str:
    """The text with every fact's own statement taken out (what is left must not restate a fact otherwise)."""
    out = flat(text)
    for fact in FACTS.values():
        if "statement" in fact:
            out = out.replace(flat(fact["statement"]), " ")
    return out


def test_the_texts_exist():
    assert len(TEXTS) >= 10 and "agents/gsd-researcher.md" in TEXTS and "skills/deep-research/SKILL.md" in TEXTS


@pytest.mark.parametrize("name, rel", STATED, ids=[f"{n}-{r}" for n, r in STATED])
def test_each_fact_is_stated_verbatim_where_it_is_listed(name, rel):
    assert flat(FACTS[name]["statement"]) in flat(TEXTS[rel]), f"{rel} lacks the {name} statement"


# -- deep research: cost and calls per session --------------------------------------------------------------

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


def _allowed_dollars() -> set[float]:
    cost = FACTS["deep_cost"]
    ends = [float(x) for x in re.findall(r"\$(\d+\.\d+)", cost["range"])]
    return {*cost["usd"].values(), *ends, float(cost["warning_usd"])}


@pytest.mark.parametrize("rel", list(TEXTS))
def test_every_dollar_figure_in_the_texts_is_one_of_the_facts(rel):
    figures = [float(m) for m in re.findall(r"(?<![\w{])\$(\d+(?:\.\d+)?)\b", TEXTS[rel])]
    assert [f for f in figures if f not in _allowed_dollars()] == [], f"{rel} states a cost that is not a fact"


SESSION_RANGE = re.compile(r"(\d+)\s*(?:-|–|to)\s*(\d+)\b[^.\n|]{0,40}?\bsession", re.I)


@pytest.mark.parametrize("rel", list(TEXTS))
def test_deep_calls_per_session_are_the_one_figure(rel):
    fact = FACTS["deep_calls_per_session"]
    stated = [(int(a), int(b)) for a, b in SESSION_RANGE.findall(TEXTS[rel])]
    assert all(pair == (fact["min"], fact["max"]) for pair in stated), f"{rel}: {stated}"


# -- the year in queries --------------------------------------------------------------------------------

YEAR_ADVICE = re.compile(r"\b(include|add|put|append|insert|use)\b[^.]{0,30}\byears?\b|\byears? in (the |your )?quer",
                         re.I)
EXAMPLE_QUERY = re.compile(r"(?:gsd-research (?:search|deep|web)[^\n]*?|WebSearch\()\"([^\"]*)\"")


@pytest.mark.parametrize("rel", list(TEXTS))
def test_no_text_gives_other_advice_about_the_year(rel):
    assert not YEAR_ADVICE.search(without_statements(TEXTS[rel])), rel


@pytest.mark.parametrize("rel", list(TEXTS))
def test_example_queries_carry_no_year(rel):
    dated = [q for q in EXAMPLE_QUERY.findall(TEXTS[rel]) if re.search(r"\b(19|20)\d\d\b", q)]
    assert dated == [], f"{rel}: example queries with a year contradict the query_year rule"


# -- confidence -------------------------------------------------------------------------------------------

LEVEL = re.compile(r"^\**(HIGH|MEDIUM-HIGH|MEDIUM|LOW)\b")


def _subject(row: str) -> str | None:
    if re.search(r"(?<!un)verified against", row, re.I):
        return "verified"
    for name, pattern in (("docs", r"gsd-research docs"), ("deep", r"gsd-research deep"),
                          ("search", r"gsd-research (search|web)|WebSearch|\bweb search\b")):
        if re.search(pattern, row, re.I):
            return name
    return None


def table_claims(text: str) -> list[tuple[str, str]]:
    """(subject, confidence cell) of every Markdown table row that names a tool and a confidence level."""
    claims = []
    for line in text.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        levels = [c for c in cells if LEVEL.match(c)]
        subject = _subject(" ".join(c for c in cells if c not in levels))
        if levels and subject:
            claims.append((subject, levels[0].strip("*")))
    return claims


@pytest.mark.parametrize("rel", list(TEXTS))
def test_confidence_in_tables_is_the_facts(rel):
    wrong = [(s, c) for s, c in table_claims(TEXTS[rel]) if c != FACTS["confidence"][s]]
    assert wrong == [], f"{rel}: {wrong}"


def _skill_subject(text: str) -> str | None:
    tools = re.search(r"^allowed-tools:(.*)$", text, re.M)
    found = {_subject(f"gsd-research {cmd}") for cmd in re.findall(r"gsd-research (\w+)", tools.group(1))} if tools else set()
    found.discard(None)
    return found.pop() if len(found) == 1 else None


@pytest.mark.parametrize("rel", [r for r in TEXTS if not r.startswith(("README", "agents/"))])
def test_confidence_in_skill_and_command_prose_is_the_facts(rel):
    subject = _skill_subject(TEXTS[rel])
    stated = re.findall(r"\**(HIGH|MEDIUM-HIGH|MEDIUM|LOW)\**\s+confidence", without_statements(TEXTS[rel]))
    if subject is None:  # the knowledge base, fetch: their confidence is that of the source
        return
    assert all(level == FACTS["confidence"][subject].split()[0] for level in stated), f"{rel}: {stated}"


def test_the_table_reader_catches_a_contradiction():
    row = "| web search with a cited report | `gsd-research search QUERY --report` | Tavily | MEDIUM |"
    assert table_claims(row) == [("search", "MEDIUM")] != [("search", FACTS["confidence"]["search"])]
    assert table_claims("| verified against an official source | MEDIUM |") == [("verified", "MEDIUM")]


# -- the jobs wait loop -------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel", [r for r in TEXTS if "jobs wait" in TEXTS[r]])
def test_jobs_wait_is_described_by_the_one_rule(rel):
    text = without_statements(TEXTS[rel])
    outcomes = FACTS["jobs_wait"]["outcomes"]
    assert "STILL_RUNNING" not in text
    for code, exit_code in re.findall(r"`?(JOB_[A-Z]+|TIMEOUT)`?\)?[^.\n]{0,12}?\(?exit (\d)", TEXTS[rel]):
        if code in outcomes or code == "TIMEOUT":
            assert code in outcomes and outcomes[code]["exit"] == int(exit_code), f"{rel}: {code} exit {exit_code}"
    near = [m.group(0) for m in re.finditer(r"[^.]*(jobs wait|still running)[^.]*", text) if "TIMEOUT" in m.group(0)]
    assert near == [], f"{rel} describes the wait with TIMEOUT: {near}"
    timeouts = {int(t) for t in re.findall(r"jobs wait \S+ --timeout (\d+)", TEXTS[rel])}
    assert timeouts <= {FACTS["jobs_wait"]["timeout"]}, rel


def test_the_facts_agree_with_the_commands_suggestions():
    source = (ROOT / "lib" / "gsd_research" / "deep" / "jobs_command.py").read_text()
    assert f"--timeout {FACTS['jobs_wait']['timeout']}" in source


@pytest.mark.parametrize("bad", [
    "Budget 5-10 per research session.",
    "costs about $0.01 per query",
    "Always include the current year in queries.",
    'gsd-research search "EV market 2025 trends"',
    "if it ends with error code `TIMEOUT` (exit 6) the job is still running: run the same jobs wait again",
])
def test_each_check_fails_on_a_text_that_contradicts_the_facts(bad):
    """The checks above are not vacuous: the contradictions this file was written against are caught."""
    text = f"gsd-research jobs wait ID --timeout 100. {bad}"
    caught = [
        bool(SESSION_RANGE.findall(text)) and SESSION_RANGE.findall(text) != [("3", "5")],
        any(float(f) not in _allowed_dollars() for f in re.findall(r"(?<![\w{])\$(\d+(?:\.\d+)?)\b", text)),
        bool(YEAR_ADVICE.search(text)),
        any(re.search(r"\b(19|20)\d\d\b", q) for q in EXAMPLE_QUERY.findall(text)),
        any("TIMEOUT" in m.group(0) for m in re.finditer(r"[^.]*(jobs wait|still running)[^.]*", text)),
    ]
    assert any(caught), bad


# -- the jobs wait loop, as the command answers it ------------------------------------------------------------

@pytest.mark.parametrize("outcome", ["done", "JOB_RUNNING", "JOB_FAILED", "JOB_CANCELLED"])
def test_jobs_wait_answers_as_the_facts_say(cli, fake, home, monkeypatch, outcome):
    from tests.test_deep import CANARY, configure

    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home, http={"max_retries": 0})
    if outcome == "JOB_FAILED":
        fake.add_fault("/perplexity/async/chat/completions", "status", status=500, times=100, method="POST")
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
    text = flat(TEXTS[rel])
    # global installs turn GSD's commands into skills: /gsd-plan-phase; /gsd:research-phase is gone
    assert re.findall(r"/gsd:(?!research-phase)[a-z-]+", text) == [], rel
    old = [m.start() for m in re.finditer(r"/gsd:research-phase", text)]
    assert all(text[max(0, i - 10):i].endswith("replaced `") for i in old), f"{rel} still sends users to /gsd:research-phase"


def test_gsd_researchers_context7_routes_are_named_where_docs_are_explained():
    for rel in ("agents/gsd-researcher.md", "skills/library-docs/SKILL.md", "README.md"):
        assert "mcp__context7__" in TEXTS[rel] and "ctx7" in TEXTS[rel], rel
    assert "--research-phase N" in TEXTS["README.md"] and "--research-phase N" in TEXTS["agents/gsd-researcher.md"]
