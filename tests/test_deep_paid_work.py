"""Paid deep research work under races, odd provider answers, short client waits, signals and crashes:
one job and one payment per question, never bought again by a retry, never a wait that cannot end, and
one ledger line per request Perplexity accepted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import BIN
from tests.deep_fixtures import (
    CANARY,
    POLL,
    SUBMIT,
    configure,
    gsd,
    job_dirs,
    ledger_lines,
    read,
    reap_worker,
    remote_id_recorded,
    status_of,
    wait_for,
)
from tests.fakes.perplexity import paid

# Runs the CLI with one patch applied first (argv[1] names it), as a real process.
WRAPPER = r"""
import os, signal, sys
from gsd_research.deep import store, result_cache
patch, args = sys.argv[1], sys.argv[2:]
signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell's background job starts with SIGINT ignored
if patch == "term-after-job-json":  # SIGTERM the moment a new job's job.json is written
    original = store.write_json
    def write_json(path, doc, durable=True):
        original(path, doc, durable)
        if path.name == "job.json":
            os.kill(os.getpid(), signal.SIGTERM)
    store.write_json = write_json
elif patch in ("term-before-job", "int-before-job"):  # the signal lands before any job exists
    sig = signal.SIGTERM if patch.startswith("term") else signal.SIGINT
    def get(*a, **k):
        os.kill(os.getpid(), sig)
        return None
    result_cache.get = get
elif patch == "die-after-ledger":  # kill -9 between the ledger line and the completed status
    finish = store.JobStore.finish
    def dying_finish(self, job_id, status, **changes):
        if status == "completed":
            os._exit(137)
        return finish(self, job_id, status, **changes)
    store.JobStore.finish = dying_finish
sys.argv = ["gsd-research", *args]
from gsd_research.cli import main
main()
"""


@pytest.fixture
def pplx(fake, home, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home)
    return fake


@pytest.fixture
def reap(home):
    yield
    reap_worker(home)


def patched(patch: str, *args: str, timeout: float = 60) -> tuple[int, dict | None]:
    import os

    proc = subprocess.run([sys.executable, "-c", WRAPPER, patch, *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ))
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None


# -- one job and one payment per question ------------------------------------------------------------

@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_identical_calls_made_at_once_share_one_job_and_one_payment(cli, pplx, home, reap, mode):
    import os

    configure(home, deep={"autostart": True, "idle_exit": 2, "concurrency": 2})
    pplx.state["pplx_async_delay"] = 0.5  # a late caller attaches to the job, or gets its cached answer
    args = [str(BIN / "gsd-research"), "deep", *(["--async"] if mode == "async" else []), "asked three times at once"]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
             for _ in range(3)]
    docs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]

    ids = {d["conversation_id"] for d in docs}
    assert [p.returncode for p in procs] == [0] * 3 and len(ids) == 1, docs
    if mode == "async":
        assert cli("jobs", "wait", ids.pop(), "--timeout", "30").code == 0
    assert len(job_dirs(home)) == 1
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


def test_async_calls_made_at_once_are_admitted_only_while_their_typical_costs_fit_the_budget(pplx, home):
    import os

    configure(home, deep={"daily_budget_usd": 1.0})  # two medium calls ($0.464 typically) fit, not three
    procs = [subprocess.Popen([str(BIN / "gsd-research"), "deep", "--async", f"asked at once {n}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
             for n in range(4)]
    docs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]

    codes = sorted(d["error"]["code"] if "error" in d else "queued" for d in docs)
    assert codes == ["BUDGET_EXCEEDED", "BUDGET_EXCEEDED", "queued", "queued"], docs
    assert len(job_dirs(home)) == 2


# -- a poll that answers 404, or about another request ------------------------------------------------

@pytest.mark.parametrize("api", ["sonar", "agent"])
def test_one_404_on_a_poll_is_polled_again_never_bought_again(cli, pplx, home, api):
    configure(home, deep={"api": api})
    pplx.state["pplx_async_delay"] = 0.3
    pplx.add_fault(POLL if api == "sonar" else "/perplexity/v1/responses/", "status", status=404, times=1,
                   method="GET")

    result = cli("deep", "a passing 404")

    assert result.code == 0 and result.json["status"] == "completed", result.stdout
    assert len(pplx.hits("/perplexity", method="POST")) == 1
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


def test_404s_in_a_row_fail_the_job_naming_its_remote_request_never_resubmitted(cli, pplx, home):
    pplx.add_fault(POLL, "status", status=404, times=1000, method="GET")
    job_id = cli("deep", "--async", "forgotten by the provider").json["conversation_id"]

    cli("jobs", "worker", "--once")
    waited = cli("jobs", "wait", job_id, "--timeout", "1")

    remote_id = paid(pplx.state)[0]["id"]
    err = waited.json["error"]
    assert waited.code == 5 and err["code"] == "JOB_FAILED" and err["details"]["remote_id"] == remote_id
    assert "404" in err["message"] and status_of(home, job_id)["attempts"] == 1
    assert len(pplx.hits(SUBMIT, method="POST")) == 1 and len(paid(pplx.state)) == 1
    assert any("new, paid request" in tip for tip in err["suggestions"])
    pplx.clear_faults()  # asked again: the old request is gone, so this one is new (and paid), not a revival
    again = cli("deep", "forgotten by the provider").json
    assert again["status"] == "completed" and again["conversation_id"] != job_id and len(paid(pplx.state)) == 2


def test_a_poll_answer_about_another_request_is_never_taken_as_the_report(cli, pplx, home):
    other = {"id": "OTHER-JOB", "status": "COMPLETED", "model": "sonar-deep-research",
             "response": {"id": "OTHER-JOB", "model": "sonar-deep-research",
                          "choices": [{"message": {"content": "REPORT OF ANOTHER JOB"}}], "usage": {}}}
    pplx.add_fault(POLL, "status", status=200, times=1000, method="GET", body=other)

    result = cli("deep", "whose report is this")

    assert result.code == 5 and result.json["error"]["code"] == "UPSTREAM_ERROR"
    assert "REPORT OF ANOTHER JOB" not in result.stdout and "OTHER-JOB" in result.json["error"]["message"]
    job_id = result.json["error"]["details"]["conversation_id"]
    assert status_of(home, job_id)["remoteId"] == paid(pplx.state)[0]["id"]
    pplx.clear_faults()
    cli("jobs", "worker", "--once")
    assert "REPORT OF ANOTHER JOB" not in cli("jobs", "result", job_id).stdout
    assert status_of(home, job_id)["status"] == "completed" and len(paid(pplx.state)) == 1


# -- Retry-After longer than any backoff; a retry time from a clock set back ---------------------------

def test_a_retry_after_longer_than_any_backoff_fails_the_job_saying_when_to_retry(cli, pplx, home):
    configure(home, deep={"retry_backoff_max": 5}, http={"max_retries": 0})
    pplx.add_fault(POLL, "status", status=429, times=1000, method="GET", retry_after="100000")
    job_id = cli("deep", "--async", "come back tomorrow").json["conversation_id"]

    cli("jobs", "worker", "--once")  # sleeping out the Retry-After would outlast the call's timeout
    result = cli("jobs", "wait", job_id, "--timeout", "1")
    code, waited = result.code, result.json

    status = status_of(home, job_id)
    assert status["status"] == "failed" and status["attempts"] == 1
    retry_after = status["error"]["retryAfter"]
    assert abs(time.mktime(time.strptime(retry_after[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
               - (time.time() + 100000)) < 60
    assert code == 5 and waited["error"]["code"] == "JOB_FAILED" and waited["error"]["details"]["cause"] == "RATE_LIMITED"
    assert f"retry after {retry_after}" in waited["error"]["message"]
    assert any(tip.startswith(f"After {retry_after}, ask again") for tip in waited["error"]["suggestions"])
    assert len(paid(pplx.state)) == 1 and len(pplx.hits(SUBMIT, method="POST")) == 1


def test_a_retry_time_further_ahead_than_any_backoff_is_due_now(cli, pplx, home):
    job_id = cli("deep", "--async", "the clock was set back").json["conversation_id"]
    path = home / "conversation-logs" / job_id / "status.json"
    path.write_text(json.dumps(dict(read(path), retryAt="2099-01-01T00:00:00.000Z", attempts=1)))

    cli("jobs", "worker", "--once")

    assert status_of(home, job_id)["status"] == "completed"


# -- the client's --timeout bounds its wait, never the job's attempt ---------------------------------

def test_a_short_client_timeout_never_shortens_the_jobs_attempt(cli, pplx, home):
    configure(home, deep={"max_attempts": 1})
    pplx.state["pplx_async_delay"] = 2.0

    result = cli("deep", "slow research", "--timeout", "1")

    err = result.json["error"]
    job_id = err["details"]["conversation_id"]
    assert result.code == 6 and err["code"] == "TIMEOUT"  # the job's report was still 1 s away
    assert read(home / "conversation-logs" / job_id / "job.json")["timeout"] == 600  # deep.timeout, not 1 s
    status = status_of(home, job_id)
    assert status["status"] == "pending" and status["attempts"] == 0  # handed over, not a failed attempt
    cli("jobs", "worker", "--once")  # the one attempt allowed resumes the same request and gets its report
    assert status_of(home, job_id)["status"] == "completed"
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


def test_asking_again_after_a_job_failed_resumes_the_request_it_paid_for(cli, pplx, home):
    configure(home, deep={"max_attempts": 1, "timeout": 0.5})
    pplx.state["pplx_async_delay"] = 1.0

    first = cli("deep", "outlived its job")
    err = first.json["error"]
    job_id = err["details"]["conversation_id"]
    assert first.code == 5 and err["code"] == "JOB_FAILED" and err["details"]["cause"] == "TIMEOUT"
    assert any("nothing is paid twice" in tip for tip in err["suggestions"])
    time.sleep(0.6)  # the remote request finishes meanwhile
    again = cli("deep", "outlived its job")

    assert again.code == 0 and again.json["conversation_id"] == job_id, again.stdout
    assert again.json["metadata"]["attached_to_job"] == job_id
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1
    status = status_of(home, job_id)
    assert status["status"] == "completed" and status["revivals"] == 1


def test_asking_again_after_every_submit_answer_was_lost_resends_under_the_same_key(cli, pplx, home):
    configure(home, deep={"max_attempts": 2}, http={"max_retries": 1})
    pplx.state["pplx_lose"] = 100  # accepted (and billed) once, every answer lost

    first = cli("deep", "answers lost")
    cli("jobs", "worker", "--once")  # the job's second (last) attempt, in the background
    job_id = first.json["error"]["details"]["conversation_id"]
    assert status_of(home, job_id)["status"] == "failed" and len(paid(pplx.state)) == 1
    pplx.state["pplx_lose"] = 0  # the provider recovers
    again = cli("deep", "answers lost")

    posts = pplx.hits(SUBMIT, method="POST")
    assert again.code == 0 and again.json["conversation_id"] == job_id, again.stdout
    assert len({p.json()["idempotency_key"] for p in posts}) == 1 and len(paid(pplx.state)) == 1
    assert len(ledger_lines(home)) == 1


def test_a_billed_request_whose_answer_was_lost_resumes_although_the_budget_was_lowered(cli, pplx, home):
    """Regression: the budget check before paying stopped a resend under the same key (free), leaving the
    billed request unrecorded and its report unread."""
    configure(home, deep={"max_attempts": 2, "daily_budget_usd": 5}, http={"max_retries": 1})
    pplx.state["pplx_lose"] = 100
    job_id = cli("deep", "answers lost").json["error"]["details"]["conversation_id"]
    cli("jobs", "worker", "--once")
    pplx.state["pplx_lose"] = 0
    configure(home, deep={"max_attempts": 2, "daily_budget_usd": 0.3}, http={"max_retries": 1})

    again = cli("deep", "answers lost")

    assert again.code == 0 and again.json["conversation_id"] == job_id, again.stdout
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


def test_asking_again_after_the_provider_ended_the_run_is_a_new_request(cli, pplx, home):
    configure(home, deep={"max_attempts": 1})
    pplx.state["pplx_async_fail"] = 1

    first = cli("deep", "failed upstream")
    again = cli("deep", "failed upstream")

    assert first.code == 5 and first.json["error"]["code"] == "JOB_FAILED"
    assert again.code == 0 and again.json["conversation_id"] != first.json["error"]["details"]["conversation_id"]
    lines = ledger_lines(home)  # two paid requests: the one that failed upstream (estimated) and the answer
    assert len(paid(pplx.state)) == 2 and len(lines) == 2 and [bool(e.get("estimated")) for e in lines] == [True,
                                                                                                           False]


def test_a_cancelled_jobs_paid_request_is_fetched_when_asked_again(cli, pplx, home, reap):
    configure(home, deep={"autostart": True, "idle_exit": 2})
    pplx.state["pplx_async_delay"] = 1.0
    job_id = cli("deep", "--async", "cancelled then wanted").json["conversation_id"]
    wait_for(lambda: paid(pplx.state) and remote_id_recorded(home))  # cancelled mid-poll

    assert cli("jobs", "cancel", job_id).json["cancelled"] is True
    lines = ledger_lines(home)
    assert len(lines) == 1 and lines[0]["estimated"] is True and lines[0]["reason"] == "cancelled"
    again = cli("deep", "cancelled then wanted")

    assert again.code == 0 and again.json["conversation_id"] == job_id
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


# -- signals: the truth about what exists ------------------------------------------------------------

def test_sigterm_right_after_the_job_is_written_names_the_job_and_the_question_finds_it(pplx, home):
    """No worker runs (autostart off, the pplx fixture's config), so the job is still queued when the question is
    asked again, whatever the timing: the second call attaches to it and runs it (with a worker it could finish
    first, and the answer would come from the finished job instead)."""
    code, doc = patched("term-after-job-json", "deep", "interrupted while created")

    err = doc["error"]
    assert code == 6 and err["code"] == "JOB_RUNNING", doc
    job_id = err["details"]["conversation_id"]
    again = gsd("deep", "interrupted while created")[1]
    assert again["conversation_id"] == job_id and again["metadata"]["attached_to_job"] == job_id
    assert len(job_dirs(home)) == 1 and len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


@pytest.mark.parametrize("patch, exit_code", [("term-before-job", 143), ("int-before-job", 130)])
def test_an_interrupt_before_any_job_exists_says_nothing_was_sent(pplx, home, patch, exit_code):
    code, doc = patched(patch, "deep", "interrupted early")

    assert code == exit_code and doc["error"]["code"] == "INTERRUPTED", doc
    assert "nothing was sent" in doc["error"]["message"]
    assert job_dirs(home) == [] and paid(pplx.state) == []


# -- the ledger: one line per accepted request --------------------------------------------------------

def test_a_crash_between_the_ledger_line_and_the_status_leaves_one_line(cli, pplx, home):
    code, _ = patched("die-after-ledger", "deep", "--async", "crash after the ledger")
    patched("die-after-ledger", "jobs", "worker", "--once")
    assert len(ledger_lines(home)) == 1  # written, then the runner died before the completed status

    cli("jobs", "worker", "--once")  # the next runner finishes the bookkeeping

    job_id = job_dirs(home)[0].name
    assert status_of(home, job_id)["status"] == "completed"
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


def test_an_agent_submit_lost_without_an_answer_is_job_failed_with_its_estimated_line(cli, pplx, home):
    configure(home, deep={"api": "agent"}, http={"read_timeout": 0.5})
    pplx.state.update(pplx_lose=1, pplx_lose_kind="hang")  # accepted (and billed), the answer never comes

    result = cli("deep", "agent answer lost")

    err = result.json["error"]
    assert result.code == 5 and err["code"] == "JOB_FAILED" and err["details"]["cause"] == "TIMEOUT"
    assert len(pplx.hits("/perplexity/v1/agent", method="POST")) == 1 and len(paid(pplx.state)) == 1
    lines = ledger_lines(home)
    assert len(lines) == 1 and lines[0]["estimated"] is True and lines[0]["api"] == "agent"
    assert lines[0]["cost_usd"] > 0
    assert cli("usage").json["totals"]["cost_usd"] == pytest.approx(lines[0]["cost_usd"])


# -- a job file from an older version (damaged ones: tests/test_jobs.py) ------------------------------

def test_a_failed_job_whose_error_is_a_string_answers_job_failed(cli, pplx, home):
    job_id = "dr-20200101-000000000-0badf00d"
    folder = home / "conversation-logs" / job_id
    folder.mkdir(parents=True)
    (folder / "status.json").write_text(json.dumps({"status": "failed", "error": "boom", "attempts": 1}))

    waited = cli("jobs", "wait", job_id, "--timeout", "1")

    assert waited.code == 5 and waited.json["error"]["code"] == "JOB_FAILED" and "boom" in waited.json["error"]["message"]


def test_without_autostart_jobs_wait_runs_a_job_nothing_else_runs(cli, pplx, home):
    import os
    import signal

    pplx.state["pplx_async_delay"] = 1.0
    proc = subprocess.Popen([str(BIN / "gsd-research"), "deep", "runner killed, no worker"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    wait_for(lambda: paid(pplx.state))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    job_id = job_dirs(home)[0].name
    assert status_of(home, job_id)["status"] == "running"  # its runner is dead; autostart is off

    waited = cli("jobs", "wait", job_id, "--timeout", "20")

    assert waited.code == 0 and waited.json["status"] == "completed"
    assert len(paid(pplx.state)) == 1 and len(ledger_lines(home)) == 1


def test_a_cached_answer_served_again_adds_no_conversation(cli, pplx, home):
    first = cli("deep", "served many times").json

    again = [cli("deep", "served many times").json for _ in range(3)]

    assert {d["conversation_id"] for d in again} == {first["conversation_id"]}
    assert all(d["metadata"]["cache_hit"] for d in again) and len(job_dirs(home)) == 1
    assert cli("jobs", "list").json["counts"]["completed"] == 1 and len(paid(pplx.state)) == 1
