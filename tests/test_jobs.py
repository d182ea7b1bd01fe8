"""gsd-research jobs: the queue's order, retries, failures, cancellation, recovery and the detached worker."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import assert_no_traceback
from tests.deep_fixtures import (
    CANARY,
    all_state_text,
    configure,
    enqueue,
    is_worker,
    read,
    reap_worker,
    status_of,
    submitted_queries,
)

# (fault, options, error code of each attempt, HTTP requests per try: the HTTP layer itself retries
# 408/429/5xx/timeouts once more with http.max_retries 1, attempts: a rejected key is not retried).
# A job that failed for good answers JOB_FAILED (exit 5) with the attempts' code as its cause.
FAULTS = [
    ("status", {"status": 429}, "RATE_LIMITED", 2, 3),
    ("status", {"status": 500}, "UPSTREAM_ERROR", 2, 3),
    ("status", {"status": 503}, "UPSTREAM_ERROR", 2, 3),
    ("timeout", {"delay": 0.6}, "TIMEOUT", 2, 3),
    ("malformed", {}, "UPSTREAM_ERROR", 1, 3),
    ("html", {}, "INVALID_API_KEY", 1, 1),
]


@pytest.fixture
def pplx(fake, home, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home)
    return fake


@pytest.fixture
def reap(home):
    yield
    reap_worker(home)


# -- whether the worker runs: one answer from every command ---------------------------------------

@pytest.mark.parametrize("who, running, needed, in_progress", [
    ("nobody", False, True, False),  # deep.autostart off: the job waits for a worker
    ("the worker", True, False, False),  # alive (its lock held), between two jobs
    ("a blocking call", False, False, True),  # the job is run by another process; nothing else waits
])
def test_jobs_list_and_status_agree_on_whether_the_worker_runs(cli, pplx, home, who, running, needed, in_progress):
    from gsd_research.deep.queue import lock_path
    from gsd_research.deep.store import JobStore, file_lock

    job_id = enqueue(cli, "who runs me")
    with contextlib.ExitStack() as held:
        if who == "the worker":
            assert held.enter_context(file_lock(lock_path(), blocking=False))
        if who == "a blocking call":
            held.callback(JobStore().claim(job_id).release)

        listed, shown = cli("jobs", "list").json, cli("jobs", "status", job_id).json

    assert listed["worker"] == shown["worker"]
    assert (shown["worker"]["running"], shown["worker"]["needed"]) == (running, needed)
    assert shown["in_progress"] is in_progress


# -- order ---------------------------------------------------------------------------------------

def test_higher_priority_first_then_fifo(cli, pplx):
    for name, priority in [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", 1), ("f", -1), ("g", 1)]:
        enqueue(cli, name, "--priority", str(priority))

    cli("jobs", "worker", "--once")

    assert submitted_queries(pplx) == ["b", "d", "e", "g", "a", "c", "f"]


def test_status_shows_queue_position_and_result_is_not_ready(cli, pplx):
    first = enqueue(cli, "first")
    second = enqueue(cli, "second")

    status = cli("jobs", "status", second).json
    pending = cli("jobs", "result", second)

    assert status["status"] == "pending" and status["position"] == 2
    assert status["next"] == f"gsd-research jobs wait {second} --timeout 100"
    assert pending.code == 0 and pending.json["ready"] is False and pending.json["status"] == "pending"
    assert cli("jobs", "status", first).json["position"] == 1


def test_list_counts_and_filters(cli, pplx):
    done = enqueue(cli, "done one")
    cli("jobs", "worker", "--once")
    waiting = enqueue(cli, "waiting one")

    everything = cli("jobs", "list").json
    pending = cli("jobs", "list", "--status", "pending").json

    assert everything["counts"]["completed"] == 1 and everything["counts"]["pending"] == 1
    assert [j["conversation_id"] for j in everything["jobs"]] == [waiting, done]
    assert [j["conversation_id"] for j in pending["jobs"]] == [waiting]
    assert everything["metadata"]["tokens_used"] <= 2000


def test_list_respects_max_tokens(cli, pplx):
    for i in range(30):
        enqueue(cli, f"question number {i} about a fairly long research topic with many words in it")

    docs = {budget: cli("jobs", "list", "--limit", "30", "--max-tokens", str(budget)).json
            for budget in range(400, 800, 9)}  # one of them ends a few tokens under: its own count must fit

    assert all(doc["success"] for doc in docs.values()), [d["error"] for d in docs.values() if not d["success"]]
    assert all(doc["metadata"]["tokens_used"] <= budget for budget, doc in docs.items())
    assert 0 < docs[598]["metadata"]["returned"] < 30 and docs[598]["metadata"]["total_available"] == 30
    assert docs[598]["metadata"]["truncated"] is True


# -- retries and failures ------------------------------------------------------------------------

@pytest.mark.parametrize("kind, opts, code, per_try, tries", FAULTS, ids=[f"{f[0]}-{f[2]}" for f in FAULTS])
def test_faults_are_retried_then_the_job_fails_with_the_error_code(cli, pplx, home, kind, opts, code, per_try,
                                                                   tries):
    configure(home, http={"max_retries": 1, "read_timeout": 0.3})
    pplx.add_fault("/perplexity/async/chat/completions", kind, times=100, method="POST", **opts)
    job_id = enqueue(cli, "doomed")

    cli("jobs", "worker", "--once")
    result = cli("jobs", "result", job_id)

    status = status_of(home, job_id)
    assert status["status"] == "failed" and status["attempts"] == tries and status["failedAt"]
    assert status["error"]["code"] == code and [e["code"] for e in status["errors"]] == [code] * tries
    assert not (home / "conversation-logs" / job_id / "job.json").exists()
    posts = pplx.hits("/perplexity/async/chat/completions", method="POST")
    assert len(posts) == tries * per_try
    assert len({p.json()["idempotency_key"] for p in posts}) == 1  # every try under the same key: never paid twice
    assert result.code == 5 and result.json["error"]["code"] == "JOB_FAILED"
    assert result.json["error"]["details"]["cause"] == code
    assert CANARY not in result.stdout and CANARY not in all_state_text(home)
    assert_no_traceback(result)


def test_a_failed_attempt_is_recorded_then_retried_to_success(cli, pplx, home):
    configure(home, http={"max_retries": 0})
    pplx.add_fault("/perplexity/async/chat/completions", "status", status=502, times=1, method="POST")
    pplx.state["pplx_async_fail"] = 1  # and the second try's remote run fails
    job_id = enqueue(cli, "flaky")

    worker = cli("jobs", "worker", "--once").json

    status = status_of(home, job_id)
    assert status["status"] == "completed" and status["attempts"] == 3
    assert [e["code"] for e in status["errors"]] == ["UPSTREAM_ERROR", "UPSTREAM_ERROR"]
    assert status["errors"][1]["provider_message"] == "[UNTRUSTED TEXT]\nResearch run failed upstream\n[END UNTRUSTED TEXT]"
    assert worker["retried"] == 2 and worker["completed"] == 1


def test_polling_timeout_fails_the_attempt(cli, pplx, home):
    configure(home, deep={"max_attempts": 2, "timeout": 0.4})
    pplx.state["pplx_async_delay"] = 30
    job_id = enqueue(cli, "never finishes")

    cli("jobs", "worker", "--once")

    status = status_of(home, job_id)
    assert status["status"] == "failed" and status["error"]["code"] == "TIMEOUT" and status["attempts"] == 2
    assert len(pplx.hits("/perplexity/async/chat/completions", method="POST")) == 1  # resumed, not bought again
    assert status["error"]["remote_id"] == status["remoteId"]


def test_budget_spent_fails_a_queued_job_without_retry(cli, pplx, home):
    job_id = enqueue(cli, "queued before the budget ran out")
    cli("deep", "spend it")
    configure(home, deep={"daily_budget_usd": 0.1})

    cli("jobs", "worker", "--once")

    status = status_of(home, job_id)
    assert status["status"] == "failed" and status["attempts"] == 1
    assert status["error"]["code"] == "BUDGET_EXCEEDED"


def test_admitted_jobs_run_within_the_budget_that_admitted_them(cli, pplx, home):
    configure(home, deep={"daily_budget_usd": 1.0})  # two medium calls ($0.464 typically) fit, not three
    ids = [enqueue(cli, "admitted one"), enqueue(cli, "admitted two")]
    refused = cli("deep", "--async", "admitted three")

    cli("jobs", "worker", "--once")

    assert refused.json["error"]["code"] == "BUDGET_EXCEEDED"
    assert [status_of(home, job_id)["status"] for job_id in ids] == ["completed", "completed"]
    assert sum(json.loads(line)["cost_usd"] for line in (home / "usage" / "ledger.jsonl").read_text().splitlines()) <= 1.0


def test_of_queued_jobs_a_lowered_budget_still_fits_the_first_runs(cli, pplx, home):
    """Regression: each job, checked again before paying, counted the other (still waiting) as held, and
    both failed although one fitted."""
    configure(home, deep={"daily_budget_usd": 1.0})
    ids = [enqueue(cli, "first in line"), enqueue(cli, "second in line")]
    configure(home, deep={"daily_budget_usd": 0.5})  # one medium call ($0.464 typically) fits

    cli("jobs", "worker", "--once")

    statuses = sorted(status_of(home, job_id)["status"] for job_id in ids)
    assert statuses == ["completed", "failed"]


def test_a_model_the_price_table_lacks_holds_its_dearest_price():
    from gsd_research.deep.accounting import typical_cost
    from gsd_research.deep.cost import price_table

    table = price_table()
    priced = [typical_cost(table, model, "high") for model in table["perplexity"]]

    assert typical_cost(table, "sonar-unpriced-preview", "high") == max(priced) > 0


def test_a_revived_job_whose_request_the_ledger_counts_holds_nothing_more(cli, pplx, home):
    configure(home, deep={"max_attempts": 1, "timeout": 0.4})
    pplx.state["pplx_async_delay"] = 30
    job_id = enqueue(cli, "paid, then lost")
    cli("jobs", "worker", "--once")  # fails on its timeout: its request's typical cost ($0.464) is in the ledger
    configure(home, deep={"daily_budget_usd": 1.0, "max_attempts": 1, "timeout": 0.4})
    revived = cli("deep", "--async", "paid, then lost")  # resumes the request paid for

    other = cli("deep", "--async", "another question")

    assert revived.json["metadata"]["attached_to_job"] == job_id
    assert other.code == 0, other.json


# -- cancel, wait, errors ------------------------------------------------------------------------

def test_cancel_a_pending_job(cli, pplx, home):
    job_id = enqueue(cli, "cancel me")

    result = cli("jobs", "cancel", job_id)
    cli("jobs", "worker", "--once")

    assert result.json == {"success": True, "command": "jobs cancel", "conversation_id": job_id,
                           "cancelled": True, "status": "cancelled", "was": "pending"}
    assert status_of(home, job_id)["status"] == "cancelled"
    assert pplx.hits("/perplexity") == []
    again = cli("jobs", "cancel", job_id).json
    assert again["cancelled"] is False and again["status"] == "cancelled"
    gone = cli("jobs", "result", job_id)
    assert gone.code == 1 and gone.json["error"]["code"] == "JOB_CANCELLED"
    assert gone.json["error"]["suggestions"] == ["Enqueue it again: gsd-research deep 'cancel me' --async"]


def test_wait_returns_the_report_of_a_completed_job(cli, pplx):
    job_id = enqueue(cli, "wait for me")
    cli("jobs", "worker", "--once")

    result = cli("jobs", "wait", job_id, "--timeout", "5")

    assert result.code == 0 and result.json["command"] == "jobs wait"
    assert result.json["status"] == "completed" and result.json["citations"]


def test_wait_times_out_with_exit_6_while_pending(cli, pplx):
    pplx.state["pplx_async_delay"] = 5  # jobs wait runs it (no worker runs), and it takes longer than the wait
    job_id = enqueue(cli, "nobody runs me")

    result = cli("jobs", "wait", job_id, "--timeout", "0.3")

    assert result.code == 6 and result.json["error"]["code"] == "JOB_RUNNING"
    assert result.json["error"]["details"]["status"] == "pending"
    assert "after 0.3 s" in result.json["error"]["message"]


@pytest.mark.parametrize("sub", ["status", "result", "wait", "cancel"])
def test_unknown_and_invalid_ids(cli, pplx, sub):
    missing = cli("jobs", sub, "dr-20990101-000000000-deadbeef")
    invalid = cli("jobs", sub, "../../etc")

    assert missing.code == 4 and missing.json["error"]["code"] == "JOB_NOT_FOUND"
    assert missing.json["command"] == f"jobs {sub}"
    assert invalid.code == 2 and invalid.json["error"]["code"] == "USAGE_ERROR"


def test_jobs_without_subcommand_is_a_usage_error(cli):
    result = cli("jobs")

    assert result.code == 2 and result.json["command"] == "jobs"
    assert "status ID" in result.json["error"]["message"]


def test_second_worker_exits_at_once_while_one_holds_the_lock(cli, pplx, home):
    from gsd_research.deep.queue import lock_path
    from gsd_research.deep.store import file_lock

    with file_lock(lock_path()) as held:
        assert held
        doc = cli("jobs", "worker", "--once").json

    assert doc["worker"] == "already running" and doc["processed"] == 0


# -- recovery ------------------------------------------------------------------------------------

def test_a_job_left_running_resumes_its_remote_request(cli, pplx, home):
    job_id = enqueue(cli, "resume me")
    body = {"request": {"model": "sonar-deep-research", "messages": [{"role": "user", "content": "resume me"}]}}
    remote = requests.post(pplx.url + "/perplexity/async/chat/completions", json=body,
                           headers={"Authorization": f"Bearer {CANARY}"}, timeout=5).json()["id"]
    path = home / "conversation-logs" / job_id / "status.json"
    path.write_text(json.dumps(dict(read(path), status="running", remoteId=remote, remoteApi="sonar")))

    worker = cli("jobs", "worker", "--once").json

    status = status_of(home, job_id)
    assert worker["recovered"] == 1 and status["status"] == "completed" and status["interruptions"] == 1
    assert len(pplx.hits("/perplexity/async/chat/completions", method="POST")) == 1  # only ours: no resubmission


def test_an_answer_committed_before_a_crash_completes_exactly_once(cli, pplx, home):
    job_id = enqueue(cli, "committed")
    folder = home / "conversation-logs" / job_id
    conv = read(folder / "conversation.json")
    conv["messages"].append({"role": "assistant", "content": "the answer", "usage": {"total_tokens": 5},
                             "cost": {"usd": 0.1, "source": "api"}})
    (folder / "conversation.json").write_text(json.dumps(conv))
    (folder / "status.json").write_text(json.dumps(dict(read(folder / "status.json"), status="running")))
    (folder / ".status.json.999.abc.tmp").write_text('{"half": ')
    os.utime(folder / ".status.json.999.abc.tmp", (time.time() - 3600, time.time() - 3600))

    cli("jobs", "worker", "--once")

    assert pplx.hits("/perplexity") == []
    assert [m["role"] for m in read(folder / "conversation.json")["messages"]] == ["user", "assistant"]
    assert read(folder / "status.json")["status"] == "completed" and not (folder / "job.json").exists()
    assert not list(folder.glob("*.tmp")) and not list(folder.glob(".*.tmp"))


# -- the detached worker (real processes) --------------------------------------------------------

def test_enqueue_starts_a_detached_worker_that_outlives_the_caller(run_bin, pplx, home, reap):
    # It idles 30 s (reap stops it): under load the wait below can outlast a shorter idle time.
    configure(home, deep={"autostart": True, "idle_exit": 30})

    queued = run_bin("gsd-research", "deep", "--async", "detached")

    assert queued.code == 0 and queued.json["worker"]["started"] is True
    pid = queued.json["worker"]["pid"]
    log = home / "logs" / "worker.log"  # the caller's pipes are not held open by the worker: its output goes here
    assert {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (1, 2)} == {str(log)}
    done = run_bin("gsd-research", "jobs", "wait", queued.json["conversation_id"], "--timeout", "20")
    assert done.code == 0 and done.json["status"] == "completed"
    assert is_worker(pid) and os.getsid(pid) != os.getsid(0)  # still alive, in its own session
    assert "completed " + queued.json["conversation_id"] in (home / "logs" / "worker.log").read_text()
    assert run_bin("gsd-research", "jobs", "list").json["worker"]["needed"] is False


def test_cancel_while_running_discards_the_answer(cli, run_bin, pplx, home, reap):
    configure(home, deep={"autostart": True, "idle_exit": 0.5})
    pplx.state["pplx_async_delay"] = 30  # still running whatever the machine's load
    job_id = cli("deep", "--async", "cancel mid-run").json["conversation_id"]  # starts the real worker
    deadline = time.monotonic() + 20
    while status_of(home, job_id)["status"] != "running" and time.monotonic() < deadline:
        time.sleep(0.05)

    cancelled = run_bin("gsd-research", "jobs", "cancel", job_id).json
    while f"cancelled {job_id}" not in (home / "logs" / "worker.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)  # the worker saw it at its next poll

    assert cancelled["was"] == "running" and cancelled["cancelled"] is True
    assert status_of(home, job_id)["status"] == "cancelled"
    messages = read(home / "conversation-logs" / job_id / "conversation.json")["messages"]
    assert [m["role"] for m in messages] == ["user"]


def test_status_restarts_a_dead_worker(cli, run_bin, pplx, home, reap):
    configure(home, deep={"autostart": False, "idle_exit": 0.5})
    job_id = enqueue(cli, "orphaned")
    configure(home, deep={"autostart": True, "idle_exit": 0.5})

    status = run_bin("gsd-research", "jobs", "status", job_id).json
    done = cli("jobs", "wait", job_id, "--timeout", "20").json

    assert status["worker"]["started"] is True
    assert done["status"] == "completed"


def test_retry_waits_at_least_the_servers_retry_after(cli, pplx, home):
    from gsd_research.deep.files import parse_iso

    configure(home, http={"max_retries": 0}, deep={"retry_backoff": 0.01, "retry_backoff_max": 2})
    pplx.add_fault("/perplexity/async/chat/completions", "status", status=429, times=1, method="POST",
                   retry_after="1")
    job_id = enqueue(cli, "slow down")

    cli("jobs", "worker", "--once")

    status = status_of(home, job_id)
    failed_at, retry_at = parse_iso(status["errors"][0]["at"]), parse_iso(status["retryAt"])
    assert status["status"] == "completed" and retry_at - failed_at >= 1.0  # scheduled by Retry-After, not 0.01 s
    assert parse_iso(status["attemptStartedAt"]) >= retry_at  # and the retry waited for it


def test_the_worker_runs_up_to_concurrency_jobs_at_once_in_priority_order(cli, pplx, home):
    configure(home, deep={"concurrency": 3})
    pplx.state["pplx_async_delay"] = 0.6
    ids = [enqueue(cli, f"parallel {i}", "--priority", str(i)) for i in range(4)]

    worker = cli("jobs", "worker", "--once").json

    statuses = [status_of(home, i) for i in ids]
    assert worker["completed"] == 4 and all(s["status"] == "completed" for s in statuses)
    assert set(submitted_queries(pplx)[:3]) == {"parallel 3", "parallel 2", "parallel 1"}  # threads race
    assert submitted_queries(pplx)[3] == "parallel 0"  # started when a slot freed
    first_done = min(s["completedAt"] for s in statuses)
    assert sum(s["startedAt"] < first_done for s in statuses) == 3  # three ran at the same time


def test_a_completed_job_whose_report_is_damaged_is_an_error_not_an_empty_report(cli, pplx, home):
    """Regression: a damaged conversation.json gave success with report '' and cost 0."""
    job_id = enqueue(cli, "damaged report")
    cli("jobs", "worker", "--once")
    assert cli("jobs", "result", job_id).json["report"]
    (home / "conversation-logs" / job_id / "conversation.json").write_text("{not json")

    for sub in ("result", "wait"):
        r = cli("jobs", sub, job_id)
        assert r.code == 4 and r.json["error"]["code"] == "JOB_NOT_FOUND", r.stdout
        assert "unreadable" in r.json["error"]["message"]
        assert r.json["error"]["suggestions"] == ["Run the research again: gsd-research deep 'damaged report' --async"]
    assert cli("jobs", "status", job_id).json["status"] == "completed"


# -- damaged job folders: named with their fix, never sinking the others ------------------------------

BAD = "dr-20200101-000000000-0badf00d"
PLANTED_STATUS = {"id": BAD, "status": "pending", "attempts": 0, "priority": 9, "seq": 1, "mode": "async",
                  "createdAt": "2020-01-01T00:00:00.000Z", "query": "planted question"}
PLANTED_JOB = {"id": BAD, "query": "planted question", "priority": 9, "seq": 1}
# (case, file, its text; None: no such file, the file the problem names)
DAMAGED = [
    ("status-not-json", "status.json", "{not json", "status.json"),
    ("status-not-an-object", "status.json", "[1, 2]", "status.json"),
    ("status-huge-number", "status.json", '{"status": "pending", "attempts": 1e999}', "status.json"),
    ("status-nan", "status.json", '{"status": "pending", "priority": NaN}', "status.json"),
    ("status-wrong-type", "status.json", '{"status": "pending", "priority": "high"}', "status.json"),
    ("status-attempts-text", "status.json", '{"status": "failed", "error": "boom", "attempts": "x"}', "status.json"),
    ("status-unknown-state", "status.json", '{"status": "weird"}', "status.json"),
    ("status-uppercase", "status.json", '{"status": "COMPLETED"}', "status.json"),
    ("status-without-state", "status.json", '{"attempts": 0}', "status.json"),
    ("running-without-job-json", "job.json", None, "job.json"),
    ("job-not-json", "job.json", "{not json", "job.json"),
    ("job-wrong-type", "job.json", json.dumps({**PLANTED_JOB, "priority": "high"}), "job.json"),
    ("job-huge-number", "job.json", json.dumps(PLANTED_JOB)[:-1] + ', "timeout": 1e999}', "job.json"),
    ("job-of-another-folder", "job.json", json.dumps({**PLANTED_JOB, "id": "dr-20200101-000000000-00000000"}),
     "job.json"),
    ("job-without-query", "job.json", json.dumps({"id": BAD}), "job.json"),
]


def plant(home: Path, file: str, text: str | None) -> None:
    """A job folder as the product writes it, with `file` replaced by `text` (removed when None)."""
    folder = home / "conversation-logs" / BAD
    folder.mkdir(parents=True)
    status = dict(PLANTED_STATUS, status="running") if text is None else PLANTED_STATUS
    docs = {"conversation.json": json.dumps({"id": BAD, "messages": [{"role": "user", "content": "planted question"}]}),
            "status.json": json.dumps(status), "job.json": json.dumps(PLANTED_JOB), file: text}
    for name, body in docs.items():
        if body is not None:
            (folder / name).write_text(body)


@pytest.mark.parametrize("file, text, named", [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_a_damaged_job_folder_is_named_with_its_fix_and_the_others_are_listed_waited_on_and_run(
        cli, pplx, home, file, text, named):
    waited_on, run_by_worker = enqueue(cli, "waited on"), enqueue(cli, "run by the worker")
    plant(home, file, text)

    listed = cli("jobs", "list")
    shown = cli("jobs", "status", waited_on)
    bad = cli("jobs", "wait", BAD, "--timeout", "5")
    waited = cli("jobs", "wait", waited_on, "--timeout", "20")
    worker = cli("jobs", "worker", "--once")

    rows = {j["conversation_id"]: j for j in listed.json["jobs"]}
    assert listed.code == 0 and rows[waited_on]["status"] == "pending" and listed.json["counts"]["damaged"] == 1
    assert rows[BAD]["status"] == "damaged" and named in rows[BAD]["problem"]
    assert rows[BAD]["fix"].startswith("rm -r ") and "planted question" in rows[BAD]["fix"]
    assert shown.code == 0 and shown.json["status"] == "pending"
    assert bad.code == 4 and bad.json["error"]["code"] == "JOB_NOT_FOUND" and named in bad.json["error"]["message"]
    assert any(tip.startswith("rm -r ") for tip in bad.json["error"]["suggestions"])
    assert waited.code == 0 and waited.json["status"] == "completed", waited.stdout
    assert worker.code == 0 and worker.json["completed"] == 1 and status_of(home, run_by_worker)["status"] == "completed"
    assert "planted question" not in submitted_queries(pplx)  # a damaged job is never run
    for out in (listed.stdout, bad.stdout):  # strict JSON: no non-finite number repeated from the file
        json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in the output"))


def test_an_enqueue_cut_short_is_failed_or_removed_by_the_next_worker(cli, pplx, home):
    from gsd_research.deep.store import JobStore

    store = JobStore()
    logs = home / "conversation-logs"
    old = time.time() - 3600
    # killed after status.json, before job.json: pending forever, and nobody got its id
    cut, _ = store.create("cut short", {"model": "sonar-deep-research"}, enqueue=False)
    status = read(logs / cut / "status.json")
    (logs / cut / "status.json").write_text(json.dumps(dict(status, mode="async", createdAt="2026-01-01T00:00:00.000Z")))
    # killed right after mkdir: an empty folder
    (logs / "dr-20260101-000000000-deadbeef").mkdir()
    os.utime(logs / "dr-20260101-000000000-deadbeef", (old, old))
    # just being enqueued by another process right now: left alone
    fresh, _ = store.create("in flight", {"model": "sonar-deep-research"}, enqueue=False)
    (logs / fresh / "status.json").write_text(json.dumps(dict(read(logs / fresh / "status.json"), mode="async")))
    queued = enqueue(cli, "a real job")

    worker = cli("jobs", "worker", "--once").json

    failed = status_of(home, cut)
    assert failed["status"] == "failed" and "died before the job was queued" in failed["error"]["message"]
    assert not (logs / "dr-20260101-000000000-deadbeef").exists()
    assert status_of(home, fresh)["status"] == "pending"
    assert status_of(home, queued)["status"] == "completed"
    assert worker["failed"] == 1 and worker["completed"] == 1
    listed = {j["conversation_id"]: j["status"] for j in cli("jobs", "list").json["jobs"]}
    assert listed[cut] == "failed" and listed[queued] == "completed"
