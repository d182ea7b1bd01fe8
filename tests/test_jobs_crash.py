"""The queue under kill -9 and under concurrent enqueueing (real processes; harness in bench/jobs_crash.py)."""

from __future__ import annotations

import pytest
from bench.jobs_crash import concurrent, crash

pytestmark = pytest.mark.slow


def test_twenty_jobs_survive_ten_worker_kills_and_complete_exactly_once(fake, tmp_path):
    report = crash(fake, tmp_path / "crash-home", jobs=20, kills=10, seed=7, job_seconds=1.0)  # long enough that all 10 kills land mid-queue

    assert report["kills"] == 10
    assert report["interruptions"] >= 1  # kills really landed while a job was running
    assert report["completed"] == 20 and report["listed_completed"] == 20
    assert report["answers_per_job"] == [1]  # one assistant message in every conversation
    assert report["remote_requests"] == 20 and report["ledger_calls"] == 20  # no job paid twice
    # every job's conversation.json and status.json parsed (result-cache files come on top; a job killed
    # between its commit point and the cache write is finished without caching its result)
    assert report["corrupt_json"] == [] and report["json_files"] >= 40
    assert report["leftover_job_files"] == 0 and report["key_in_state"] is False


def test_eight_processes_enqueue_twenty_five_jobs_each_at_once(fake, tmp_path):
    report = concurrent(fake, tmp_path / "concurrent-home", procs=8, per=25)

    assert report["enqueued"] == 200 and report["exit_codes"] == [0]
    assert report["distinct_ids"] == 200 and report["seq_gap_free"] and report["fifo_within_process"]
    assert report["processed"] == 200 and report["completed"] == 200
    assert report["order_is_priority_then_fifo"] is True
    assert report["corrupt_json"] == []
