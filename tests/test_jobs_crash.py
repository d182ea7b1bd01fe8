"""The queue under kill -9 and under concurrent enqueueing (real processes; harness in bench/jobs_crash.py)."""

from __future__ import annotations

import pytest
from bench.jobs_crash import concurrent, crash

pytestmark = pytest.mark.slow


def test_jobs_survive_repeated_worker_kills_and_complete_exactly_once(fake, tmp_path):
    report = crash(fake, tmp_path / "crash-home", jobs=8, kills=4, seed=7, job_seconds=1.0)  # long enough that all 4 kills land mid-queue

    assert report["kills"] == 4
    assert report["interruptions"] >= 1  # kills really landed while a job was running
    assert report["completed"] == 8 and report["listed_completed"] == 8
    assert report["answers_per_job"] == [1]  # one assistant message in every conversation
    assert report["remote_requests"] == 8 and report["ledger_calls"] == 8  # no job paid twice
    # every job's conversation.json and status.json parsed (result-cache files come on top; a job killed
    # between its commit point and the cache write is finished without caching its result)
    assert report["corrupt_json"] == [] and report["json_files"] >= 16
    assert report["leftover_job_files"] == 0 and report["key_in_state"] is False


def test_processes_enqueueing_at_once_get_distinct_ids_and_priority_then_fifo_order(fake, tmp_path):
    report = concurrent(fake, tmp_path / "concurrent-home", procs=4, per=8)

    assert report["enqueued"] == 32 and report["exit_codes"] == [0]
    assert report["distinct_ids"] == 32 and report["seq_gap_free"] and report["fifo_within_process"]
    assert report["processed"] == 32 and report["completed"] == 32
    assert report["order_is_priority_then_fifo"] is True
    assert report["corrupt_json"] == []
