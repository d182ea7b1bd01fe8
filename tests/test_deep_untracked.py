"""A Sonar async submit Perplexity accepted (and billed) whose answer carries no usable request id: the job fails
at once saying the request could not be tracked, and the request gets its estimated ledger line (once)."""

from __future__ import annotations

import pytest

from tests.conftest import assert_no_traceback
from tests.deep_fixtures import CANARY, SUBMIT, configure, job_dirs, ledger_lines, status_of
from tests.fakes.perplexity import paid

MISSING = object()
BAD_IDS = [MISSING, None, "", 12.5, "../../v1/agent", "abc?x=1", f"x/{CANARY}"]


@pytest.fixture
def pplx(fake, home, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home, deep={"max_attempts": 3})
    return fake


def answer_without_a_usable_id(fake, value) -> None:
    fake.state["pplx_bad_id"] = 1
    if value is not MISSING:
        fake.state["pplx_bad_id_value"] = value


def everything_written(home) -> str:
    return "\n".join(p.read_text(errors="replace") for p in home.rglob("*") if p.is_file() and p.suffix != ".sqlite")


@pytest.mark.parametrize("value", BAD_IDS, ids=lambda v: "missing" if v is MISSING else repr(v))
def test_the_job_fails_saying_the_request_could_not_be_tracked_and_the_ledger_has_its_estimated_line(
        cli, pplx, home, value):
    answer_without_a_usable_id(pplx, value)

    result = cli("deep", "what is new in python")

    err = result.json["error"]
    assert result.code == 5 and err["code"] == "JOB_FAILED", result.stdout
    assert "could not be tracked" in err["message"] and "gsd-research usage" in err["message"]
    assert len(pplx.hits(SUBMIT, method="POST")) == 1 and len(paid(pplx.state)) == 1  # never sent again
    (job,) = job_dirs(home)
    status = status_of(home, job.name)
    assert status["status"] == "failed" and status["attempts"] == 1 and "remoteId" not in status
    [line] = ledger_lines(home)
    assert line["provider"] == "perplexity" and line["api"] == "sonar" and line["model"] == "sonar-deep-research"
    assert line["estimated"] is True and line["cost_source"] == "estimated" and line["cost_usd"] > 0
    assert line["untracked"] is True and "untracked" in line["reason"] and line["ref"].startswith(job.name + ":")
    totals = cli("usage").json["totals"]
    assert totals["estimated_calls"] == 1 and totals["cost_usd"] == pytest.approx(line["cost_usd"])
    assert CANARY not in result.stdout + result.stderr and CANARY not in everything_written(home)
    if isinstance(value, str) and len(value) > 3:
        assert value not in result.stdout  # the answer's text is never repeated
    assert_no_traceback(result)


def test_an_async_job_fails_the_same_way_and_its_line_is_written_once(cli, pplx, home):
    answer_without_a_usable_id(pplx, "a/b")
    job_id = cli("deep", "--async", "what is new in python").json["conversation_id"]

    cli("jobs", "worker", "--once")
    cli("jobs", "worker", "--once")
    shown = cli("jobs", "status", job_id)

    assert status_of(home, job_id)["status"] == "failed" and "could not be tracked" in shown.stdout
    assert len(ledger_lines(home)) == 1 and len(paid(pplx.state)) == 1
    waited = cli("jobs", "wait", job_id)
    assert waited.code == 5 and "could not be tracked" in waited.json["error"]["message"]


def test_asking_again_is_a_new_paid_request_beside_the_untracked_one(cli, pplx, home):
    answer_without_a_usable_id(pplx, MISSING)
    first = cli("deep", "what is new in python")

    again = cli("deep", "what is new in python")

    assert first.code == 5 and again.code == 0, again.stdout
    keys = [r.json()["idempotency_key"] for r in pplx.hits(SUBMIT, method="POST")]
    assert len(keys) == 2 and len(set(keys)) == 2 and len(paid(pplx.state)) == 2
    lines = ledger_lines(home)
    assert [bool(e.get("estimated")) for e in lines] == [True, False] and len({e["ref"] for e in lines}) == 2


def test_the_line_is_written_before_the_job_is_marked_failed(cli, pplx, home, monkeypatch):
    """A process killed between the two leaves the paid request counted (the job, still running, is taken up again
    later and the line is not written twice: its ref is the submit's key)."""
    from gsd_research.deep.store import JobStore

    answer_without_a_usable_id(pplx, "a/b")
    finish = JobStore.finish

    def killed(self, job_id, status, **changes):
        if status == "failed":
            raise KeyboardInterrupt  # as a kill arriving between the ledger line and the job's end
        return finish(self, job_id, status, **changes)

    monkeypatch.setattr(JobStore, "finish", killed)
    cli("deep", "what is new in python")  # interrupted: whatever it prints, the job was never marked failed

    assert status_of(home, job_dirs(home)[0].name)["status"] != "failed"
    [line] = ledger_lines(home)
    assert line["untracked"] is True and len(paid(pplx.state)) == 1


def test_a_submit_taken_without_an_id_while_a_cancel_ran_gets_its_line(cli, pplx, home):
    from gsd_research.core.config import Config
    from gsd_research.deep import failures, settings
    from gsd_research.deep.perplexity import untracked
    from gsd_research.deep.store import JobStore

    job_id = cli("deep", "--async", "what is new in python").json["conversation_id"]
    store = JobStore()
    with store.lock(job_id):
        store.update_status(job_id, submitKey="k-123")  # the submit was on its way: its key is in the job file
    assert cli("jobs", "cancel", job_id).json["cancelled"] is True
    assert ledger_lines(home) == []  # nothing had been accepted as far as the job file knew
    config = Config()

    state = failures.record(store, settings.load(config), config, job_id, untracked(None), "jobs worker")
    again = failures.record(store, settings.load(config), config, job_id, untracked(None), "jobs worker")

    assert (state, again) == ("cancelled", "cancelled")
    [line] = ledger_lines(home)
    assert line["untracked"] is True and line["ref"] == f"{job_id}:untracked:k-123" and line["cost_usd"] > 0
