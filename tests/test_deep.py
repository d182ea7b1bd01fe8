"""gsd-research deep against the fake Perplexity server: blocking, async enqueue, fallback, cost, cache."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_no_traceback
from tests.deep_fixtures import CANARY, SUBMIT, all_state_text, configure, job_dirs, read
from tests.fakes.perplexity import paid
from tests.injection import corpus


@pytest.fixture
def pplx(fake, home, monkeypatch):
    """The fake server with a canary Perplexity key and fast deep research settings."""
    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home)
    return fake


# -- blocking ------------------------------------------------------------------------------------

def test_blocking_returns_report_citations_usage_and_cost_without_think(cli, pplx, home):
    result = cli("deep", "WebGPU", "browser", "support")

    doc = result.json
    assert result.code == 0, doc
    assert doc["command"] == "deep" and doc["status"] == "completed"
    assert "<think>" not in result.stdout and "Planning searches" not in result.stdout
    assert doc["report"].startswith("## Executive summary") and "[1]" in doc["report"]
    assert corpus.in_fence(doc, doc["report"]) and corpus.in_fence(doc, doc["citations"])
    assert [c["n"] for c in doc["citations"]] == [1, 2, 3]
    assert doc["citations"][0]["url"] == "https://example.org/source-1"
    assert doc["usage"]["completion_tokens"] == 3000 and doc["usage"]["reasoning_tokens"] == 80000
    assert doc["cost"] == {"usd": 0.464038, "source": "api"}
    assert doc["metadata"]["confidence"] == "MEDIUM-HIGH" and doc["metadata"]["api"] == "sonar-async"
    assert doc["metadata"]["tokens_used"] <= 2000
    sent = pplx.hits(SUBMIT, method="POST")[0].json()["request"]
    assert sent["model"] == "sonar-deep-research" and sent["reasoning_effort"] == "medium"
    assert pplx.hits(SUBMIT, method="POST")[0].headers["authorization"] == f"Bearer {CANARY}"
    assert result.stderr == ""  # the foreground run logs nothing on success


def test_blocking_stores_a_completed_conversation(cli, pplx, home):
    doc = cli("deep", "--effort", "low", "rust async runtimes").json

    folder = home / "conversation-logs" / doc["conversation_id"]
    conv, status = read(folder / "conversation.json"), read(folder / "status.json")
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant"]
    assert conv["messages"][0]["content"] == "rust async runtimes"
    assert "<think>" not in conv["messages"][1]["content"]
    assert status["status"] == "completed" and status["completedAt"] and status["effort"] == "low"
    assert status["mode"] == "blocking" and status["remoteId"] == paid(pplx.state)[0]["id"]
    assert not (folder / "job.json").exists()
    assert pplx.hits(SUBMIT, method="POST")[0].json()["request"]["reasoning_effort"] == "low"


# (fault on every submit of the first call, error code, exit status); "timeout" answers after the read timeout
SUBMIT_FAULTS = [
    ("status", {"status": 429}, "RATE_LIMITED", 5),
    ("status", {"status": 500}, "UPSTREAM_ERROR", 5),
    ("status", {"status": 503}, "UPSTREAM_ERROR", 5),
    ("timeout", {"delay": 0.8}, "TIMEOUT", 6),
    ("malformed", {}, "UPSTREAM_ERROR", 5),
    ("truncate", {}, "NETWORK_ERROR", 5),
    ("html", {"status": 502}, "UPSTREAM_ERROR", 5),
    ("html", {}, "INVALID_API_KEY", 3),
]


@pytest.mark.parametrize("kind, opts, code, exit_code", SUBMIT_FAULTS,
                         ids=[f"{f[0]}-{f[1].get('status', '')}-{f[2]}" for f in SUBMIT_FAULTS])
def test_a_blocking_call_failing_before_any_request_id_fails_and_the_same_call_then_succeeds(
        cli, pplx, home, kind, opts, code, exit_code):
    """Nothing the provider accepted with an id is kept waiting on a backoff: asked again once the fault
    clears, the call runs at once (within a --timeout far shorter than the backoff) and pays once."""
    configure(home, deep={"retry_backoff": 30, "retry_backoff_max": 600},
              http={"max_retries": 1, "read_timeout": 0.3})
    pplx.add_fault(SUBMIT, kind, times=100, method="POST", **opts)

    failed = cli("deep", "asked during an outage")
    pplx.clear_faults()
    again = cli("deep", "asked during an outage", "--timeout", "5")

    assert (failed.code, failed.json["error"]["code"]) == (exit_code, code), failed.json
    assert again.code == 0 and again.json["status"] == "completed", again.json
    assert len(paid(pplx.state)) == 1
    assert CANARY not in failed.stdout + failed.stderr
    assert_no_traceback(failed)


def test_a_submit_taken_but_never_answered_is_resent_under_its_key_when_asked_again(cli, pplx, home):
    configure(home, deep={"retry_backoff": 30, "retry_backoff_max": 600}, http={"max_retries": 1})
    pplx.state["pplx_lose"] = 100  # every submit of the first call is accepted (paid), its answer lost

    failed = cli("deep", "taken, answer lost")
    pplx.state["pplx_lose"] = 0
    again = cli("deep", "taken, answer lost", "--timeout", "5")

    assert failed.code == 5 and failed.json["error"]["code"] == "UPSTREAM_ERROR"
    assert again.code == 0 and again.json["conversation_id"] == failed.json["error"]["details"]["conversation_id"]
    assert len({p.json()["idempotency_key"] for p in pplx.hits(SUBMIT, method="POST")}) == 1
    assert len(paid(pplx.state)) == 1


def test_a_paid_request_whose_polls_failed_is_resumed_at_once_when_asked_again(cli, pplx, home):
    configure(home, deep={"retry_backoff": 30, "retry_backoff_max": 600}, http={"max_retries": 1})
    pplx.add_fault(SUBMIT + "/", "status", status=500, times=100, method="GET")

    failed = cli("deep", "accepted, polls failing")
    pplx.clear_faults()
    again = cli("deep", "accepted, polls failing", "--timeout", "5")

    job_id = failed.json["error"]["details"]["conversation_id"]
    assert failed.code == 5 and f"gsd-research jobs wait {job_id} --timeout 100" in failed.json["error"]["suggestions"]
    assert again.code == 0 and again.json["metadata"]["attached_to_job"] == job_id
    assert len(pplx.hits(SUBMIT, method="POST")) == 1 and len(paid(pplx.state)) == 1


def test_blocking_timeout_is_exit_6_and_keeps_the_paid_request(cli, pplx, home):
    pplx.state["pplx_async_delay"] = 1.5

    result = cli("deep", "slow question", "--timeout", "1")

    assert result.code == 6 and result.json["error"]["code"] == "TIMEOUT"
    status = read(job_dirs(home)[0] / "status.json")
    assert status["remoteId"] == paid(pplx.state)[0]["id"] and status["status"] == "pending"


def test_rate_limit_then_success_is_retried_transparently(cli, pplx):
    pplx.add_fault(SUBMIT, "status", status=429, times=1, retry_after="0", method="POST")

    result = cli("deep", "retry me")

    assert result.code == 0 and result.json["status"] == "completed"
    assert len(pplx.hits(SUBMIT, method="POST")) == 2


def test_missing_key_is_exit_3_and_no_request(cli, pplx, monkeypatch):
    monkeypatch.delenv("PERPLEXITY_API_KEY")

    result = cli("deep", "no key")

    assert result.code == 3 and result.json["error"]["code"] == "MISSING_API_KEY"
    assert pplx.hits("/perplexity") == []


@pytest.mark.parametrize("args", [("deep",), ("deep", "  "), ("deep", "q", "--effort", "extreme"),
                                  ("deep", "q", "--timeout", "0")])
def test_usage_errors(cli, pplx, args):
    result = cli(*args)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"
    assert pplx.hits("/perplexity") == []


# -- fallback to the Agent API -------------------------------------------------------------------

@pytest.mark.parametrize("gone", ["404", "410", "400"])
def test_falls_back_to_agent_api_when_sonar_is_gone(cli, pplx, gone):
    pplx.state["pplx_sonar_gone"] = gone

    result = cli("deep", "post-sonar world")

    doc = result.json
    assert result.code == 0, doc
    assert doc["metadata"]["api"] == "agent" and doc["metadata"]["fallback"] is True
    assert doc["citations"][0]["url"] == "https://example.org/agent-1"
    assert "<think>" not in doc["report"] and doc["cost"] == {"usd": 0.03005, "source": "api"}
    body = pplx.hits("/perplexity/v1/agent")[0].json()
    assert body["preset"] == "high" and body["input"][0]["content"] == "post-sonar world"

    again = cli("--no-cache", "deep", "post-sonar world")  # remembered: straight to the Agent API

    assert again.json["metadata"]["api"] == "agent"
    assert len(pplx.hits(SUBMIT, method="POST")) == 1


def test_an_ordinary_bad_request_does_not_fall_back(cli, pplx):
    pplx.add_fault(SUBMIT, "status", status=400, method="POST")

    result = cli("deep", "bad request")

    assert result.code == 5 and result.json["error"]["code"] == "UPSTREAM_ERROR"
    assert pplx.hits("/perplexity/v1/agent") == []


def test_api_sonar_only_reports_gone_without_fallback(cli, pplx, home):
    configure(home, deep={"api": "sonar"})
    pplx.state["pplx_sonar_gone"] = "410"

    result = cli("deep", "strict sonar")

    assert result.code == 5 and "deep.api agent" in json.dumps(result.json["error"])
    assert pplx.hits("/perplexity/v1/agent") == []


def test_api_agent_by_config_and_preset_per_effort(cli, pplx, home):
    configure(home, deep={"api": "agent"})

    doc = cli("deep", "--effort", "low", "agent only").json

    assert doc["metadata"]["api"] == "agent" and doc["metadata"]["fallback"] is False
    assert pplx.hits(SUBMIT) == []
    assert pplx.hits("/perplexity/v1/agent")[0].json() == {
        "preset": "medium", "input": [{"type": "message", "role": "user", "content": "agent only"}], "stream": False,
        "background": True}


# -- cost, budget, cache -------------------------------------------------------------------------

def test_cost_is_estimated_from_the_price_table_when_the_api_gives_none(cli, pplx):
    pplx.state["pplx_no_cost"] = True

    doc = cli("deep", "estimate me").json

    # 19 in @2 + 3000 out @8 + 50000 citation @2 + 80000 reasoning @3 per 1M + 20 searches @5 per 1K
    assert doc["cost"] == {"usd": round(19 * 2e-6 + 3000 * 8e-6 + 50000 * 2e-6 + 80000 * 3e-6 + 20 * 5e-3, 6),
                           "source": "estimated"}


def test_price_table_is_overridable_from_config(cli, pplx, home):
    configure(home, extra={"pricing": {"perplexity": {"sonar-deep-research": {"search_per_k": 0,
                                                                              "reasoning_per_m": 0}}}})
    pplx.state["pplx_no_cost"] = True

    doc = cli("deep", "cheaper searches").json

    assert doc["cost"]["usd"] == round(19 * 2e-6 + 3000 * 8e-6 + 50000 * 2e-6, 6)


def test_high_effort_warns_that_it_likely_exceeds_one_dollar(cli, pplx):
    high = cli("deep", "--effort", "high", "expensive").json
    medium = cli("deep", "--effort", "medium", "cheap").json

    assert any("$1.00" in w for w in high["warnings"])
    assert "warnings" not in medium


def test_every_call_is_recorded_in_the_ledger(cli, pplx, home):
    cli("deep", "first")
    cli("deep", "second")

    lines = (home / "usage" / "ledger.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["provider"] for e in entries] == ["perplexity", "perplexity"]
    assert entries[0]["cost_usd"] == 0.464038 and entries[0]["command"] == "deep"
    assert entries[0]["tokens_in"] == 19 + 50000 and entries[0]["tokens_out"] == 3000 + 80000


def test_daily_budget_refuses_a_call_whose_typical_cost_would_pass_it(cli, pplx, home):
    configure(home, deep={"daily_budget_usd": 0.5})  # a medium call typically costs $0.464

    first = cli("deep", "within budget")
    second = cli("deep", "over budget")  # $0.036 left: less than the call typically costs
    queued = cli("deep", "--async", "over budget too")

    assert first.code == 0
    assert second.code == 1 and second.json["error"]["code"] == "BUDGET_EXCEEDED"
    assert queued.json["error"]["code"] == "BUDGET_EXCEEDED"
    assert len(paid(pplx.state)) == 1 and len(job_dirs(home)) == 1


def test_queued_jobs_hold_their_typical_cost_until_they_settle(cli, pplx, home):
    configure(home, deep={"daily_budget_usd": 1.0})  # two medium calls fit, not three
    cli("deep", "--async", "held one")
    second = cli("deep", "--async", "held two").json["conversation_id"]

    refused = cli("deep", "--async", "held three")
    cli("jobs", "cancel", second)  # settled without a paid request: its hold is released
    admitted = cli("deep", "--async", "held three")

    assert refused.json["error"]["code"] == "BUDGET_EXCEEDED" and refused.json["error"]["details"]["held_usd"] > 0.9
    assert admitted.code == 0 and paid(pplx.state) == []


def test_budget_exceeded_leaves_raising_the_budget_to_the_user(cli, pplx, home):
    configure(home, deep={"daily_budget_usd": 0.1})

    error = cli("deep", "too dear").json["error"]

    assert error["code"] == "BUDGET_EXCEEDED"
    assert any("the user's decision" in s for s in error["suggestions"])
    assert not any("config set" in s for s in error["suggestions"])


def test_identical_query_and_effort_is_served_from_cache(cli, pplx, home):
    first = cli("deep", "cache", "me").json
    second = cli("deep", "cache  me").json
    other_effort = cli("deep", "--effort", "low", "cache me").json
    fresh = cli("--no-cache", "deep", "cache me").json

    assert first["metadata"]["cache_hit"] is False
    assert second["metadata"]["cache_hit"] is True and second["report"] == first["report"]
    assert second["cost"]["source"] == "cache"
    assert other_effort["metadata"]["cache_hit"] is False and fresh["metadata"]["cache_hit"] is False
    assert len(paid(pplx.state)) == 3
    assert len((home / "usage" / "ledger.jsonl").read_text().splitlines()) == 3


def test_cache_expires_after_the_deep_ttl(cli, pplx, home):
    configure(home, extra={"cache": {"ttl": {"deep": 0}}})

    cli("deep", "short lived")
    again = cli("deep", "short lived").json

    assert again["metadata"]["cache_hit"] is False
    assert len(paid(pplx.state)) == 2


def test_report_is_cut_to_max_tokens_with_a_pointer_to_the_rest(cli, pplx):
    doc = cli("deep", "--effort", "high", "budgeted", "--max-tokens", "500").json

    assert doc["metadata"]["tokens_used"] <= 500 and doc["metadata"]["truncated"] is True
    assert doc["metadata"]["more"].startswith("gsd-research jobs result ")


def test_a_report_paid_for_then_refused_by_its_budget_names_where_to_read_it(cli, pplx):
    """A budget that holds the report's shortest answer but not this one (its citations) is refused after the
    call: the report is kept, and reading it at a larger budget costs nothing more."""
    refused = cli("deep", "budgeted", "--max-tokens", "250").json

    read = refused["error"]["suggestions"][0]
    assert refused["error"]["code"] == "USAGE_ERROR" and read.startswith("gsd-research jobs result dr-")
    assert cli(*read.split()[1:]).json["status"] == "completed"


def test_a_report_read_again_in_a_session_expands_with_its_citations(cli, pplx):
    first = cli("deep", "cited question", "--session", "s1").json
    again = cli("jobs", "result", first["conversation_id"], "--session", "s1").json

    doc = cli("expand", again["metadata"]["repeat"]["repeat"], "--session", "s1").json

    assert again["report"] == "" and again["metadata"]["citations_returned"] == 0
    assert doc["content"] == first["report"] and doc["citations"] == first["citations"] and len(doc["citations"]) == 3
    assert corpus.in_fence(doc, doc["citations"])


# -- async enqueue -------------------------------------------------------------------------------

def test_async_enqueue_writes_pending_job_files_and_tells_how_to_poll(cli, pplx, home):
    result = cli("deep", "--async", "--priority", "3", "--effort", "high", "queued question")

    doc = result.json
    assert result.code == 0 and doc["status"] == "pending"
    folder = home / "conversation-logs" / doc["conversation_id"]
    assert read(folder / "status.json")["status"] == "pending"
    job = read(folder / "job.json")
    assert job["priority"] == 3 and job["effort"] == "high" and job["query"] == "queued question"
    assert read(folder / "conversation.json")["messages"] == [
        {"role": "user", "content": "queued question", "timestamp": job["createdAt"]}]
    assert doc["next"]["wait"] == f"gsd-research jobs wait {doc['conversation_id']} --timeout 100"
    assert doc["worker"]["running"] is False and any("jobs worker" in w for w in doc["warnings"])
    assert pplx.hits("/perplexity") == []


def test_env_switch_makes_async_the_default(cli, pplx, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_ENABLE_ASYNC_DEEP_RESEARCH", "true")

    queued = cli("deep", "async by default").json
    blocking = cli("deep", "--blocking", "explicitly blocking").json

    assert queued["status"] == "pending"
    assert blocking["status"] == "completed"


def test_polling_timeout_env_sets_the_job_timeout(cli, pplx, home, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_POLLING_TIMEOUT_MS", "90000")

    doc = cli("deep", "--async", "timeout from env").json

    assert read(home / "conversation-logs" / doc["conversation_id"] / "job.json")["timeout"] == 90.0


def test_async_then_worker_then_result(cli, pplx, home):
    job_id = cli("deep", "--async", "background question").json["conversation_id"]

    worker = cli("jobs", "worker", "--once")
    result = cli("jobs", "result", job_id)

    assert worker.json["completed"] == 1
    doc = result.json
    assert result.code == 0 and doc["command"] == "jobs result"
    assert doc["status"] == "completed" and "<think>" not in result.stdout
    assert doc["report"].startswith("## Executive summary") and len(doc["citations"]) == 3
    assert corpus.in_fence(doc, doc["report"])
    assert doc["cost"] == {"usd": 0.464038, "source": "api"} and doc["usage"]["total_tokens"] == 3019
    folder = home / "conversation-logs" / job_id
    assert not (folder / "job.json").exists()
    assert read(folder / "status.json")["completedAt"]
    assert len(pplx.hits("/perplexity/async/chat/completions", method="POST")) == 1


# -- keys ----------------------------------------------------------------------------------------

def test_canary_key_never_reaches_logs_status_ledger_or_cache(cli, pplx, home):
    pplx.state["pplx_echo_auth"] = True  # the provider leaks the Authorization header into its answer
    blocking = cli("deep", "leaky blocking")
    queued = cli("deep", "--async", "leaky async")
    cli("jobs", "worker", "--once")
    result = cli("jobs", "result", queued.json["conversation_id"])
    pplx.add_fault(SUBMIT, "html", times=10, method="POST")
    failed = cli("--no-cache", "deep", "leaky failure")

    assert "Debug: request authorized with" in result.json["report"]
    for res in (blocking, queued, result, failed):
        assert CANARY not in res.stdout + res.stderr
    state = all_state_text(home)
    assert "request authorized with" in state  # the files were really read
    assert CANARY not in state
    assert (home / "usage" / "ledger.jsonl").exists() and list((home / "cache" / "deep").glob("*.json"))


def test_async_with_a_cached_answer_completes_at_once(cli, pplx, home):
    first = cli("deep", "asked twice").json

    again = cli("deep", "--async", "asked twice").json

    assert again["status"] == "completed" and again["metadata"]["cache_hit"] is True
    assert again["report"] == first["report"] and again["conversation_id"] == first["conversation_id"]
    assert not (home / "conversation-logs" / again["conversation_id"] / "job.json").exists()
    assert len(paid(pplx.state)) == 1 and len(job_dirs(home)) == 1  # served from its conversation, not a copy


@pytest.mark.parametrize("raw, clean", [
    ("<think>plan</think>\n\n## Report [1]", "## Report [1]"),
    ("<think>a</think>Intro <think>b\nc</think> end", "Intro  end"),
    ("## Report\n<think>cut off mid-thought", "## Report"),
    ("<THINK>upper</THINK>ok</think>", "ok"),
    ("no thinking at all", "no thinking at all"),
])
def test_strip_think(raw, clean):
    from gsd_research.deep.perplexity import strip_think

    assert strip_think(raw) == clean


def test_reports_are_untrusted_evidence_and_injections_are_fenced(cli, pplx):
    clean = cli("deep", "clean report").json
    pplx.state["pplx_inject"] = True

    result = cli("deep", "poisoned report")

    doc = result.json
    assert "untrusted" in clean and "injection_flagged" not in clean
    assert doc["injection_flagged"] is True and {k for w in doc["injection_warnings"] for k in w["kinds"]} >= {"override"}
    assert corpus.in_fence(clean, clean["report"])  # fenced whether or not anything was found
    assert corpus.in_fence(doc, doc["report"])
    assert "</search_results>" not in result.stdout  # tags that could close a fence are defanged
    assert doc["metadata"]["tokens_used"] <= 2000
