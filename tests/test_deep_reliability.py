"""Deep research that never loses, re-buys or hangs on paid work, and that an agent can drive to the end.

Blocking calls run on the same persisted job as `--async`; interrupted calls (SIGTERM, kill -9) leave a
job that finishes or resumes; one deadline bounds every request of an attempt; paid submits are never
re-sent once the provider may have accepted them; `jobs wait` outcomes differ by code and exit status.
The fake Perplexity keeps a log of the paid requests it accepted (`tests.fakes.perplexity.paid`).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess

import pytest

from gsd_research.core.untrusted import unfence
from tests.conftest import BIN, ROOT, assert_no_traceback
from tests.deep_fixtures import (
    CANARY,
    all_state_text,
    configure,
    gsd,
    ledger_lines,
    reap_worker,
    remote_id_recorded,
    start_blocking,
    status_of,
    wait_for,
)
from tests.fakes.perplexity import paid


@pytest.fixture
def pplx(fake, home, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home)
    return fake


@pytest.fixture
def reap(home):
    yield
    reap_worker(home)


# -- 1. an interrupted blocking call loses nothing and pays once -------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill-9"])
def test_a_killed_blocking_call_leaves_a_job_that_finishes_and_pays_once(pplx, home, reap, sig):
    configure(home, deep={"autostart": True, "idle_exit": 2})
    pplx.state["pplx_delay"] = 2.0  # a slow answer, whichever API the call uses
    pplx.state["pplx_async_delay"] = 2.0
    proc = start_blocking("killed mid-call")
    wait_for(lambda: paid(pplx.state) and remote_id_recorded(home))  # paid, and the call polls for it
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=10)

    code, listed = gsd("jobs", "list")
    jobs = [j for j in listed["jobs"] if j["query"] == "killed mid-call"]
    assert code == 0 and len(jobs) == 1, listed  # the paid request is a job, not lost
    job_id = jobs[0]["conversation_id"]
    if sig == signal.SIGTERM:  # told where its work went
        doc = json.loads(out)
        assert doc["error"]["code"] == "JOB_RUNNING" and doc["error"]["details"]["conversation_id"] == job_id
    code, done = gsd("jobs", "wait", job_id, "--timeout", "20")
    assert code == 0 and done["status"] == "completed" and unfence(done["report"]).startswith("## Executive summary")
    code, again = gsd("deep", "killed mid-call")  # asked again: the finished answer, nothing paid
    assert code == 0 and again["report"] == done["report"]
    assert len(paid(pplx.state)) == 1
    assert len(ledger_lines(home)) == 1


def test_a_blocking_call_killed_with_kill_9_resumes_when_asked_again(pplx, home):
    """No worker runs (autostart off): the same `deep` call takes the job over by its remote id."""
    pplx.state["pplx_async_delay"] = 1.5
    pplx.state["pplx_delay"] = 1.5
    proc = start_blocking("resume me by asking again")
    wait_for(lambda: paid(pplx.state) and remote_id_recorded(home))
    proc.kill()
    proc.communicate(timeout=10)

    code, doc = gsd("deep", "resume me by asking again")

    assert code == 0 and doc["status"] == "completed", doc
    assert doc["metadata"]["attached_to_job"] == doc["conversation_id"]
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1
    assert status_of(home, doc["conversation_id"])["status"] == "completed"


def test_the_same_question_asked_while_a_job_runs_attaches_to_it(cli, pplx, home):
    queued = cli("deep", "--async", "asked twice at once").json["conversation_id"]

    again_async = cli("deep", "--async", "asked  twice at once").json
    blocking = cli("deep", "Asked twice at once")
    done_async = cli("deep", "--async", "asked twice at once").json  # finished: served from the result cache

    doc = blocking.json
    assert again_async["conversation_id"] == queued and again_async["metadata"]["attached_to_job"] == queued
    assert again_async["status"] == "pending" and "costs nothing more" in again_async["note"]
    assert blocking.code == 0 and doc["conversation_id"] == queued and doc["status"] == "completed"
    assert doc["metadata"]["attached_to_job"] == queued
    assert done_async["status"] == "completed" and done_async["metadata"]["cache_hit"] is True
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


def test_a_finished_job_is_attached_within_the_ttl_when_its_cached_result_is_gone(cli, pplx, home):
    first = cli("deep", "answered before").json
    for path in (home / "cache" / "deep").glob("*.json"):
        path.unlink()  # e.g. killed between the commit and the cache write

    again = cli("deep", "answered before").json
    fresh = cli("--no-cache", "deep", "answered before").json

    assert again["conversation_id"] == first["conversation_id"] and again["report"] == first["report"]
    assert again["metadata"]["attached_to_job"] == first["conversation_id"]
    assert fresh["conversation_id"] != first["conversation_id"] and "attached_to_job" not in fresh["metadata"]
    assert len(paid(pplx.state)) == 2


def test_blocking_submits_through_the_async_api_and_records_the_remote_id_first(cli, pplx, home):
    doc = cli("deep", "persisted blocking").json

    status = status_of(home, doc["conversation_id"])
    assert [p["api"] for p in paid(pplx.state)] == ["sonar-async"]
    assert status["remoteId"] == paid(pplx.state)[0]["id"] and status["mode"] == "blocking"
    assert doc["metadata"]["mode"] == "blocking" and "attached_to_job" not in doc["metadata"]


# -- 2. jobs wait outcomes an agent tells apart ------------------------------------------------------

def _failed_job(cli, pplx, home) -> str:
    configure(home, deep={"max_attempts": 1})
    pplx.state["pplx_async_fail"] = 1
    job_id = cli("deep", "--async", "doomed research").json["conversation_id"]
    cli("jobs", "worker", "--once")
    assert status_of(home, job_id)["status"] == "failed"
    return job_id


def test_wait_on_a_failed_job_is_job_failed_exit_5_with_the_cause(cli, pplx, home):
    job_id = _failed_job(cli, pplx, home)

    result = cli("jobs", "wait", job_id, "--timeout", "1")

    err = result.json["error"]
    assert result.code == 5 and err["code"] == "JOB_FAILED"
    assert "deep research failed" in err["message"] and "upstream" not in err["message"]  # our words only
    assert "failed upstream" in err["details"]["errors"][-1]["provider_message"]  # Perplexity's, fenced
    assert err["details"]["cause"] == "UPSTREAM_ERROR" and err["details"]["remote_id"] == paid(pplx.state)[0]["id"]


def test_wait_on_a_running_job_is_job_running_exit_6(cli, pplx):
    pplx.state["pplx_async_delay"] = 5  # longer than the wait (which runs the job: no worker runs)
    job_id = cli("deep", "--async", "nobody runs me").json["conversation_id"]

    result = cli("jobs", "wait", job_id, "--timeout", "0.2")

    assert result.code == 6 and result.json["error"]["code"] == "JOB_RUNNING"
    assert result.json["error"]["details"]["status"] in ("pending", "running")


def test_wait_on_a_cancelled_job_is_job_cancelled_exit_1(cli, pplx):
    job_id = cli("deep", "--async", "cancel me").json["conversation_id"]
    cli("jobs", "cancel", job_id)

    result = cli("jobs", "wait", job_id, "--timeout", "1")

    assert result.code == 1 and result.json["error"]["code"] == "JOB_CANCELLED"


OUTCOME = re.compile(r"exit (\d+)(?:, `?error\.code`? `?(\w+)`?)?\s*(?:→|->)\s*(.+)")


def skill_loop() -> tuple[str, dict[int, tuple[str | None, bool]]]:
    """The wait command and its outcomes (exit -> (code, wait again?)) as the skill writes them."""
    text = (ROOT / "skills" / "deep-research" / "SKILL.md").read_text()
    block = re.search(r"```text\n(gsd-research jobs wait .+?)\n```", text, re.S)
    assert block, "the skill has no wait loop block"
    lines = block.group(1).splitlines()
    outcomes = {}
    for line in lines[1:]:
        match = OUTCOME.search(line)
        if match:
            outcomes[int(match.group(1))] = (match.group(2), "again" in match.group(3))
    return lines[0].split("#")[0].strip(), outcomes


def test_the_skills_wait_loop_ends_on_a_job_that_fails(pplx, home, reap, monkeypatch):
    """The agent's loop as SKILL.md writes it, run for real against a job whose provider never answers."""
    command, outcomes = skill_loop()
    assert outcomes == {0: (None, False), 6: ("JOB_RUNNING", True), 5: ("JOB_FAILED", False),
                        1: ("JOB_CANCELLED", False)}
    configure(home, deep={"autostart": True, "max_attempts": 2, "retry_backoff": 0.2, "idle_exit": 1})
    monkeypatch.setenv("PERPLEXITY_POLLING_TIMEOUT_MS", "600")
    pplx.state["pplx_hang"] = {"submit": float("inf")}
    code, queued = gsd("deep", "--async", "a provider that never answers")
    job_id = queued["conversation_id"]

    rounds, outcome = 0, None
    while rounds < 20:  # the loop must end by itself long before this guard
        rounds += 1
        args = command.replace("CONVERSATION_ID", job_id).split()[1:]
        args[args.index("--timeout") + 1] = "1"  # shorter rounds than an agent's 100 s
        code, doc = gsd(*args)
        outcome = (code, (doc.get("error") or {}).get("code"))
        assert code in outcomes and outcomes[code][0] == outcome[1], doc
        if not outcomes[code][1]:
            break
    assert outcome == (5, "JOB_FAILED") and rounds < 20
    assert doc["error"]["details"]["cause"] == "TIMEOUT"


@pytest.mark.parametrize("where", ["skills/deep-research/SKILL.md", "agents/research-scout.md", "README.md",
                                   "--help"])
def test_the_wait_contract_is_written_the_same_everywhere(cli, where):
    if where == "--help":
        text = subprocess.run([str(BIN / "gsd-research"), "jobs", "wait", "--help"], capture_output=True,
                              text=True).stdout
        text = json.loads(text)["help"]
    else:
        text = (ROOT / where).read_text()
    flat = " ".join(text.split())
    for needle in ("JOB_RUNNING", "JOB_FAILED", "JOB_CANCELLED"):
        assert needle in flat, (where, needle)
    assert re.search(r"exit 6[^0-9]{0,40}?JOB_RUNNING|JOB_RUNNING[^0-9]{0,40}?exit 6", flat), where
    assert re.search(r"exit 5[^0-9]{0,40}?JOB_FAILED|JOB_FAILED[^0-9]{0,40}?exit 5", flat), where
    assert re.search(r"exit 1[^0-9]{0,40}?JOB_CANCELLED|JOB_CANCELLED[^0-9]{0,40}?exit 1", flat), where
    assert "`TIMEOUT` (exit 6) the job is still running" not in flat and "exit 6 = wait again" not in flat


# -- 3. one deadline per attempt; paid submits never re-sent -----------------------------------------

def test_a_never_answering_submit_fails_the_job_within_its_deadlines(cli, pplx, home, monkeypatch):
    configure(home, deep={"max_attempts": 2, "retry_backoff": 0.2}, http={"read_timeout": 3600, "max_retries": 1})
    monkeypatch.setenv("PERPLEXITY_POLLING_TIMEOUT_MS", "600")
    pplx.state["pplx_hang"] = {"submit": float("inf")}
    job_id = cli("deep", "--async", "never answered").json["conversation_id"]

    cli("jobs", "worker", "--once")  # waiting out the hour-long reads would outlast the call's timeout

    status = status_of(home, job_id)
    assert status["status"] == "failed" and status["attempts"] == 2 and status["error"]["code"] == "TIMEOUT"


def test_an_attempt_that_times_out_resumes_the_same_remote_request(cli, pplx, home):
    configure(home, deep={"max_attempts": 3, "timeout": 1})
    pplx.state["pplx_async_delay"] = 1.6
    job_id = cli("deep", "--async", "slower than one attempt").json["conversation_id"]

    cli("jobs", "worker", "--once")

    status = status_of(home, job_id)
    assert status["status"] == "completed" and status["errors"][0]["code"] == "TIMEOUT"
    assert len(paid(pplx.state)) == 1  # attempt 2 polled the request attempt 1 paid for


def test_a_lost_submit_answer_is_resent_only_under_its_idempotency_key(cli, pplx, home):
    pplx.state["pplx_lose"] = 1  # accepted, but the answer is a 500

    doc = cli("deep", "accepted then lost").json

    posts = pplx.hits("/perplexity/async/chat/completions", method="POST")
    assert doc["status"] == "completed" and len(posts) == 2
    assert len({p.json()["idempotency_key"] for p in posts}) == 1
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


@pytest.mark.parametrize("mode", ["blocking", "async"])
@pytest.mark.parametrize("lose", ["500", "hang"])
def test_a_lost_submit_answer_never_pays_twice_in_either_mode(cli, pplx, home, mode, lose):
    configure(home, http={"read_timeout": 0.5})
    pplx.state.update(pplx_lose=1, pplx_lose_kind=lose)  # accepted, then a 500 or no answer at all

    result = cli("deep", *(["--async"] if mode == "async" else []), f"accepted then lost ({mode}, {lose})")
    if mode == "async":
        cli("jobs", "worker", "--once")
    doc = cli("jobs", "result", result.json["conversation_id"]).json

    posts = pplx.hits("/perplexity/async/chat/completions", method="POST")
    assert doc["status"] == "completed" and len(posts) == 2
    assert len({p.json()["idempotency_key"] for p in posts}) == 1  # re-sent only under the same key
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


# (fault on every poll once the provider has accepted the request, error code, exit status)
POLL_FAULTS = [
    ("status", {"status": 429}, "RATE_LIMITED", 5),
    ("status", {"status": 500}, "UPSTREAM_ERROR", 5),
    ("status", {"status": 503}, "UPSTREAM_ERROR", 5),
    ("timeout", {"delay": 0.8}, "TIMEOUT", 6),
    ("malformed", {}, "UPSTREAM_ERROR", 5),
    ("html", {}, "INVALID_API_KEY", 3),
]


@pytest.mark.parametrize("kind, opts, code, exit_code", POLL_FAULTS, ids=[f"{f[0]}-{f[2]}" for f in POLL_FAULTS])
def test_faults_after_acceptance_in_blocking_mode_keep_the_request(cli, pplx, home, kind, opts, code, exit_code):
    configure(home, http={"max_retries": 1, "read_timeout": 0.3})
    pplx.add_fault("/perplexity/async/chat/completions/", kind, times=1000, method="GET", **opts)

    result = cli("deep", "accepted, then every poll fails", "--timeout", "5")

    err = result.json["error"]
    job_id = err["details"]["conversation_id"]
    status = status_of(home, job_id)
    assert status["remoteId"] == paid(pplx.state)[0]["id"]
    if code == "INVALID_API_KEY":  # no retry fixes a rejected key: failed at once, the request kept
        assert result.code == 5 and err["code"] == "JOB_FAILED" and err["details"]["cause"] == code
        assert status["status"] == "failed" and status["attempts"] == 1
        assert any("nothing is paid twice" in tip for tip in err["suggestions"])
    else:
        assert result.code == exit_code and err["code"] == code and status["status"] == "pending"
        assert f"gsd-research jobs wait {job_id} --timeout 100" in err["suggestions"]
    pplx.clear_faults()  # the provider recovers: the kept request is finished, not bought again
    if status["status"] == "failed":
        assert cli("deep", "accepted, then every poll fails").json["metadata"]["attached_to_job"] == job_id
    else:
        cli("jobs", "worker", "--once")
    assert status_of(home, job_id)["status"] == "completed"
    assert len(pplx.hits("/perplexity/async/chat/completions", method="POST")) == 1
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1
    assert CANARY not in result.stdout + result.stderr
    assert_no_traceback(result)


@pytest.mark.parametrize("kind, opts, code, exit_code", POLL_FAULTS, ids=[f"{f[0]}-{f[2]}" for f in POLL_FAULTS])
def test_faults_after_acceptance_in_async_mode_fail_the_job_without_rebuying(cli, pplx, home, kind, opts, code,
                                                                             exit_code):
    configure(home, deep={"max_attempts": 2}, http={"max_retries": 1, "read_timeout": 0.3})
    pplx.add_fault("/perplexity/async/chat/completions/", kind, times=1000, method="GET", **opts)
    job_id = cli("deep", "--async", "accepted, then every poll fails").json["conversation_id"]

    cli("jobs", "worker", "--once")
    waited = cli("jobs", "wait", job_id, "--timeout", "1")

    status = status_of(home, job_id)
    tries = 1 if code == "INVALID_API_KEY" else 2  # no retry fixes a rejected key
    assert status["status"] == "failed" and [e["code"] for e in status["errors"]] == [code] * tries
    assert waited.code == 5 and waited.json["error"]["code"] == "JOB_FAILED"
    remote_id = paid(pplx.state)[0]["id"]
    assert waited.json["error"]["details"] == {**waited.json["error"]["details"], "cause": code,
                                               "remote_id": remote_id}
    assert len(pplx.hits("/perplexity/async/chat/completions", method="POST")) == 1  # attempt 2 resumed by id
    lines = ledger_lines(home)  # the accepted request is paid for without a report: one estimated line
    assert len(paid(pplx.state)) == 1 and len(lines) == 1
    assert lines[0]["estimated"] is True and lines[0]["ref"] == f"{job_id}:{remote_id}" and lines[0]["cost_usd"] > 0


def test_an_agent_submit_that_may_have_been_accepted_is_never_sent_again(cli, pplx, home):
    configure(home, deep={"api": "agent"})
    pplx.state["pplx_lose"] = 1

    result = cli("deep", "--async", "agent accepted then lost")
    cli("jobs", "worker", "--once")

    job_id = result.json["conversation_id"]
    status = status_of(home, job_id)
    assert len(pplx.hits("/perplexity/v1/agent", method="POST")) == 1 and len(paid(pplx.state)) == 1
    assert status["status"] == "failed" and "may have accepted" in status["error"]["message"]
    waited = cli("jobs", "wait", job_id, "--timeout", "1")
    assert waited.code == 5 and waited.json["error"]["code"] == "JOB_FAILED"


def test_the_http_layer_never_resends_a_non_idempotent_post_on_5xx(pplx):
    from gsd_research.core.config import Config
    from gsd_research.core.errors import ProviderError
    from gsd_research.core.http import HttpClient

    pplx.add_fault("/perplexity/v1/agent", "status", status=500, times=5)
    http = HttpClient(Config())

    with pytest.raises(ProviderError) as err:
        http.request("perplexity", "POST", pplx.url + "/perplexity/v1/agent", json={}, cache=False,
                     idempotent=False)

    assert len(pplx.hits("/perplexity/v1/agent")) == 1
    assert err.value.details["maybe_accepted"] is True


# -- 4. actionable errors; damaged jobs listed --------------------------------------------------------

def test_blocking_timeout_points_at_jobs_wait_and_async_not_http_settings(cli, pplx, home):
    pplx.state["pplx_delay"] = 3.0
    pplx.state["pplx_async_delay"] = 3.0

    result = cli("deep", "slow question", "--timeout", "1")

    err = result.json["error"]
    text = json.dumps(err)
    assert result.code == 6 and err["code"] == "TIMEOUT"
    job_id = err["details"]["conversation_id"]
    assert f"gsd-research jobs wait {job_id}" in text and "--async" in text and "deep.timeout" in text
    assert "http.read_timeout" not in text
    assert status_of(home, job_id)["remoteId"]  # the paid request is kept, to finish in the background


# -- 5. seed: disclaimer, logged errors, near-timeout warning, client-timeout guidance ----------------

def test_security_disclaimer_is_optional(cli, pplx, monkeypatch):
    plain_help = cli("deep", "--help").json["help"]
    plain = cli("deep", "no disclaimer").json
    monkeypatch.setenv("PERPLEXITY_ENABLE_SECURITY_DISCLAIMER", "true")

    shown_help = cli("deep", "--help").json["help"]
    shown = cli("deep", "with disclaimer").json

    assert "sensitive" not in plain_help and "disclaimer" not in plain
    assert shown["disclaimer"] in " ".join(shown_help.split())
    assert "sensitive information" in shown["disclaimer"] and "minutes" in shown["disclaimer"]


def test_tool_descriptions_recommend_a_client_timeout_of_180_s_or_more(cli):
    help_text = " ".join(cli("deep", "--help").json["help"].split())
    skill = " ".join((ROOT / "skills" / "deep-research" / "SKILL.md").read_text().split())
    agent = " ".join((ROOT / "agents" / "research-scout.md").read_text().split())

    for text in (help_text, skill, agent):
        assert re.search(r"180 s", text) and "--async" in text


def test_blocking_errors_are_logged_with_full_context_never_the_key(cli, pplx, home):
    pplx.add_fault("/perplexity/async/chat/completions", "status", status=500, times=10, method="POST")

    result = cli("deep", "logged failure")

    log = (home / "logs" / "deep.log").read_text()
    entry = json.loads(log.splitlines()[-1])
    assert result.json["error"]["code"] == "UPSTREAM_ERROR"
    assert entry["query"] == "logged failure" and entry["code"] == "UPSTREAM_ERROR" and entry["mode"] == "blocking"
    assert {"conversation_id", "effort", "model", "attempt", "elapsed_s", "message", "details"} <= set(entry)
    assert CANARY not in log and CANARY not in all_state_text(home)
    assert_no_traceback(result)


def test_a_warning_is_logged_as_a_run_nears_its_timeout(cli, pplx, home, monkeypatch):
    from gsd_research.deep import research

    monkeypatch.setattr(research, "WARN_SHARE", 0.01)  # the warning at 0.3 s of 30 s: far from both ends
    pplx.state["pplx_async_delay"] = 1.0
    monkeypatch.setenv("PERPLEXITY_POLLING_TIMEOUT_MS", "30000")

    result = cli("deep", "almost too slow")

    assert result.code == 0
    assert "nears its timeout" in result.stderr
    assert "nears its timeout" in (home / "logs" / "deep.log").read_text()
