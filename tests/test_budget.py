"""fit_results / fit_text: whole results first, then sentence cuts; never over budget by cl100k."""

from __future__ import annotations

import json

import pytest

from gsd_research.core import output
from gsd_research.core.budget import MIN_CUT_TOKENS, fit_results, fit_text, settle_answer
from gsd_research.core.errors import UsageError
from gsd_research.core.output import document_tokens, dumps
from gsd_research.core.tokens import count_tokens


@pytest.fixture(autouse=True)
def compact():
    output.set_pretty(False)
    yield
    output.set_pretty(False)


def printed_tokens(enc, doc, pretty=False) -> int:
    return len(enc.encode(dumps(doc, pretty) + "\n", disallowed_special=()))


def results(n: int, sentences: int = 12) -> list[dict]:
    return [{"title": f"Result {i}",
             "content": " ".join(f"Fact {j} of result {i} explains one detail of the API." for j in range(sentences)),
             "source_url": f"https://example.com/{i}"} for i in range(n)]


def envelope() -> dict:
    return {"success": True, "command": "search", "query": "how do caches work",
            "metadata": {"backend": "test", "cache_hit": False}}


@pytest.mark.parametrize("budget", [150, 300, 500, 1000, 2000, 4000])
def test_fit_results_is_never_over_budget_by_cl100k(cl100k, budget):
    doc = fit_results(envelope(), results(40), budget)

    assert doc["metadata"]["tokens_used"] <= budget
    assert printed_tokens(cl100k, doc) <= budget
    # and the budget is used: a cut shorter than MIN_CUT_TOKENS is left out, which costs small budgets most
    assert printed_tokens(cl100k, doc) >= budget - max(0.1 * budget, MIN_CUT_TOKENS + 20)


def test_fit_results_keeps_order_and_reports_what_was_left_out():
    items = results(30)

    doc = fit_results(envelope(), items, 1000)

    kept = doc["results"]
    assert [r["title"] for r in kept] == [r["title"] for r in items[: len(kept)]]
    meta = doc["metadata"]
    assert meta["total_available"] == 30 and meta["returned"] == len(kept) < 30
    assert meta["truncated"] is True and meta["max_tokens"] == 1000
    assert all(r["tokens"] == count_tokens(r["content"]) for r in kept)
    assert list(doc)[-1] == "metadata"


def test_whole_results_first_then_one_cut_on_a_sentence():
    doc = fit_results(envelope(), results(10, sentences=20), 800)

    *whole, last = doc["results"]
    assert all("truncated" not in r for r in whole)
    assert last.get("truncated") is True and last["content"].endswith("API.")


def test_everything_fits_nothing_truncated():
    doc = fit_results(envelope(), results(2, sentences=2), 2000)

    assert doc["metadata"]["returned"] == 2 and doc["metadata"]["truncated"] is False


def test_a_single_huge_result_is_cut_to_fit(cl100k):
    doc = fit_results(envelope(), results(1, sentences=2000), 500)

    assert doc["metadata"]["returned"] == 1 and doc["results"][0]["truncated"] is True
    assert printed_tokens(cl100k, doc) <= 500


def test_always_one_false_drops_a_tiny_cut():
    items = [{"title": "t", "content": "word. " * 2000, "source_url": ""}]

    kept = fit_results(envelope(), items, 110, always_one=False)["results"]
    forced = fit_results(envelope(), items, 110, always_one=True)["results"]

    assert kept == []
    assert len(forced) == 1 and forced[0]["tokens"] < MIN_CUT_TOKENS


def test_budget_smaller_than_the_envelope_is_a_usage_error():
    doc = envelope()
    doc["query"] = "q " * 300

    with pytest.raises(UsageError) as info:
        fit_results(doc, results(3), 150)

    assert "--max-tokens" in info.value.suggestions[0]


def test_fit_results_counts_pretty_printing_when_asked(cl100k):
    output.set_pretty(True)

    doc = fit_results(envelope(), results(40), 1000)

    assert printed_tokens(cl100k, doc, pretty=True) <= 1000


def test_unicode_and_escapes_are_counted_as_printed(cl100k):
    items = [{"title": "Ünïcödé ✓", "content": 'Line "quoted"\n\ttabbed — 東京 🚀. ' * 200, "source_url": ""}]

    doc = fit_results(envelope(), items, 400)

    assert printed_tokens(cl100k, doc) <= 400


@pytest.mark.parametrize("budget", [200, 700, 3000])
def test_fit_text_cuts_one_field_and_stays_in_budget(cl100k, budget):
    text = "\n\n".join(f"Paragraph {i}. It has two sentences about reading pages." for i in range(1000))
    doc = {"success": True, "command": "fetch", "url": "https://example.com", "content": text, "metadata": {}}

    doc = fit_text(doc, ("content",), budget)

    assert doc["metadata"]["truncated"] is True
    assert doc["metadata"]["tokens_used"] <= budget
    assert printed_tokens(cl100k, doc) <= budget
    assert doc["content"].endswith(".")  # a sentence boundary
    assert text.startswith(doc["content"])


def test_fit_text_on_a_nested_field_that_fits_is_untouched():
    doc = {"success": True, "answer": {"text": "short answer."}, "metadata": {}}

    doc = fit_text(doc, ("answer", "text"), 500)

    assert doc["answer"]["text"] == "short answer." and doc["metadata"]["truncated"] is False


def test_fit_text_too_small_is_a_usage_error():
    doc = {"success": True, "command": "fetch", "url": "u" * 2000, "content": "x", "metadata": {}}

    with pytest.raises(UsageError):
        fit_text(doc, ("content",), 150)


def test_an_answer_grown_after_fitting_is_counted_again():
    doc = fit_results(envelope(), results(3), 1000)
    doc["metadata"]["note"] = "a note a command added after fitting"

    settle_answer(doc, 1000)

    assert doc["metadata"]["tokens_used"] == document_tokens(doc)


def test_an_answer_grown_over_the_budget_after_fitting_is_refused():
    doc = fit_results(envelope(), results(40), 300)
    doc["metadata"]["note"] = "words " * 50

    with pytest.raises(UsageError) as info:
        settle_answer(doc, 300)

    assert "--max-tokens 300 is too small" in info.value.message


def test_json_document_is_valid_after_cutting_inside_escapes():
    text = '\\"' * 3000
    doc = fit_text({"success": True, "content": text, "metadata": {}}, ("content",), 300)

    assert json.loads(dumps(doc))["content"] == doc["content"]


LONG = "widget " * 3000


@pytest.mark.parametrize("args", [("docs", "react", LONG), ("web", LONG), ("deep", LONG), ("analyze", LONG, "-"),
                                  ("summarize", "-", "--focus", LONG), ("fetch", "https://example.org/", "--focus", LONG),
                                  ("image", "x.png", "--question", LONG)])
def test_a_query_the_answer_cannot_repeat_is_refused_before_any_provider_call(cli, fake, monkeypatch, args):
    """Regression: a 3,000-token query was sent (and paid for) before the answer, which repeats it, failed
    with 'its envelope alone needs 12,000: use --max-tokens 12,200' instead of 'shorten the query'."""
    for var, value in (("PERPLEXITY_API_KEY", "pplx-canary-123456"), ("GEMINI_API_KEY", "gk-canary-123456")):
        monkeypatch.setenv(var, value)
    r = cli(*args, stdin="some text to read")
    assert r.code == 2 and r.json["error"]["code"] == "USAGE_ERROR", r.stdout
    assert "Shorten the" in r.json["error"]["suggestions"][0]
    assert fake.hits() == []
    cli("config", "set", "deep.autostart", "false")  # no background worker from a test
    ok = cli("deep", LONG, "--async", "--max-tokens", "9000")
    assert ok.code == 0 and ok.json["status"] == "pending"


PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
PAID_COMMANDS = {  # command -> (its arguments, a budget its envelope holds and no paid answer does, the smallest answered)
    "fetch": (lambda f, t: ("fetch", f.url + "/pages/article"), 200, 240),
    "summarize": (lambda f, t: ("summarize", str(t / "notes.md")), 150, 180),
    "analyze": (lambda f, t: ("analyze", "What is the retry policy?", str(t / "notes.md")), 150, 200),
    "image": (lambda f, t: ("image", str(t / "a.png")), 140, 220),  # the path, echoed, is long here
    "web": (lambda f, t: ("web", "latest django release"), 140, 240),
    "search": (lambda f, t: ("search", "retry policy"), 140, 220),
    "deep": (lambda f, t: ("deep", "retry policies"), 200, 350),
}


@pytest.mark.parametrize("command", sorted(PAID_COMMANDS))
def test_a_budget_no_paid_answer_fits_is_refused_before_the_provider_is_paid(cli, keys, home, monkeypatch, tmp_path,
                                                                            command):
    """Regression: from 100 to each command's smallest answer, the refusal came after the provider's answer
    (and its bill). The command's answer is fitted dry first (core.budget.refuse_early); budgets it answered
    before still answer."""
    from tests.deep_fixtures import configure

    configure(home)
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-canary-123456")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-canary-XXXX-3f9a")
    (tmp_path / "notes.md").write_text("Sentence one explains the retry policy of the client. " * 60)
    (tmp_path / "a.png").write_bytes(PNG)
    args, refused, answered = PAID_COMMANDS[command]

    small = cli(*args(keys, tmp_path), "--max-tokens", str(refused))
    paid = [h.path for h in keys.hits() if h.method == "POST"]
    enough = cli(*args(keys, tmp_path), "--max-tokens", str(answered))

    assert small.code == 2 and "too small" in small.json["error"]["message"], small.stdout
    assert paid == []
    assert enough.code == 0, enough.stdout


def test_in_a_session_a_budget_that_holds_the_answer_as_a_repeat_is_answered(cli, keys, monkeypatch):
    """The dry fit before paying is refused only if the answer's shorter form, a reference to a passage of the
    same source the session returned before, does not fit either."""
    monkeypatch.setenv("GSD_RESEARCH_SESSION", "repeat-spec")
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    cli("fetch", keys.url + "/pages/article", "--max-tokens", "4000")

    again = cli("fetch", keys.url + "/pages/article", "--max-tokens", "230")

    assert again.code == 0 and "repeat" in again.json["metadata"], again.stdout


def test_in_a_session_a_first_answer_is_refused_before_paying_as_alone(cli, keys, monkeypatch):
    """Only a source the session returned before can come back as the shorter reference."""
    monkeypatch.setenv("GSD_RESEARCH_SESSION", "first-spec")
    cli("web", "another question entirely", "--max-tokens", "4000")
    keys.reset_log()

    first = cli("web", "latest django release", "--max-tokens", "140")

    assert first.code == 2 and [h.path for h in keys.hits() if h.method == "POST"] == []


@pytest.fixture
def sources(pages, monkeypatch, tmp_path):
    """Research memory holding two fetched pages, a Tavily key, no keyless search, and a file citing a page:
    every command below answers from the fake server (docs from its Context7)."""
    from gsd_research.search import keyless
    from tests.fakes.tavily import FakeKeyless
    from tests.memory_fixtures import page

    monkeypatch.setenv("TAVILY_API_KEY", "tvly-canary-XXXX-3f9a")
    monkeypatch.setattr(keyless, "make_backend", lambda cfg: FakeKeyless())
    article = pages.url + "/pages/article"
    page(pages, "bread", "Sourdough basics", "Knead the sourdough for ten minutes and let it rise overnight.")
    research = tmp_path / "RESEARCH.md"
    research.write_text(f'# R\n\nThe toolkit "installs with pip on Python 3.10 and newer" [CITED: {article}].\n'
                        f"It runs on Windows [CITED: {article}].\n")
    notes = tmp_path / "notes.md"
    notes.write_text("The widget toolkit needs Python 3.10. It runs on Linux, macOS and Windows. " * 40)
    return {"article": article, "bread": f"{pages.url}/pages/state/bread", "research": str(research),
            "notes": str(notes)}


COMMANDS = {
    "recall": lambda s: ("recall", "windows support"),
    "search": lambda s: ("search", "EV market"),
    "docs": lambda s: ("docs", "react", "useEffect cleanup"),
    "fetch": lambda s: ("fetch", s["article"]),
    "summarize": lambda s: ("summarize", s["notes"]),
    "verify": lambda s: ("verify", s["research"]),
}


def _session_near_a_thousand(monkeypatch, budget: int) -> None:
    """A research session whose total, reserved at this answer's whole budget, reaches 1,001 (two cl100k tokens)
    and falls below 1,000 (one) once the answer's real size is counted: its digits count in the answer too."""
    from gsd_research.core import session

    monkeypatch.setenv("GSD_RESEARCH_SESSION", "budget-spec")
    led = session.Ledger("budget-spec", False)
    led.path.parent.mkdir(parents=True, exist_ok=True)
    led.path.write_text(json.dumps({"v": 1, "calls": 1, "tokens": 1001 - budget, "passages": {}}))


@pytest.mark.parametrize("in_session", [False, True], ids=["alone", "in-a-session"])
@pytest.mark.parametrize("budget", [100, 110, 120, 150, 200, 400])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_answer_never_exceeds_its_budget_and_counts_what_it_prints(cli, sources, monkeypatch, command, budget,
                                                                      in_session):
    """Regression: at small budgets recall (100), docs (110) and search (150) printed a cut answer's cursor
    that the envelope check had not counted, and answered over --max-tokens; in a session, the total it shows
    was counted at its reserved width."""
    for url in (sources["article"], sources["bread"]):
        assert cli("fetch", url).code == 0  # into the research memory
    if in_session:
        _session_near_a_thousand(monkeypatch, budget)

    result = cli(*COMMANDS[command](sources), "--max-tokens", str(budget))

    doc, printed = result.json, count_tokens(result.stdout)
    assert printed <= budget
    if doc["success"]:
        assert doc["metadata"]["tokens_used"] == printed
    else:
        assert doc["error"]["code"] == "USAGE_ERROR" and "too small" in doc["error"]["message"]
