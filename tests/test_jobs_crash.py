"""The queue under kill -9 and under concurrent enqueueing (real processes; harness in bench/jobs_crash.py)."""

from __future__ import annotations

from bench.jobs_crash import concurrent, crash


def test_jobs_survive_repeated_worker_kills_and_complete_exactly_once(fake, tmp_path):
    report = crash(fake, tmp_path / "crash-home", jobs=6, kills=3, seed=7, job_seconds=0.6)  # two waves of 3 at once

    assert report["kills"] == 3
    assert report["interruptions"] >= 1  # kills really landed while a job was running
    assert report["completed"] == 6 and report["listed_completed"] == 6
    assert report["answers_per_job"] == [1]  # one assistant message in every conversation
    assert report["remote_requests"] == 6 and report["ledger_calls"] == 6  # no job paid twice
    # every job's conversation.json and status.json parsed (result-cache files come on top; a job killed
    # between its commit point and the cache write is finished without caching its result)
    assert report["corrupt_json"] == [] and report["json_files"] >= 12
    assert report["leftover_job_files"] == 0 and report["key_in_state"] is False


def test_processes_enqueueing_at_once_get_distinct_ids_and_priority_then_fifo_order(fake, tmp_path):
    report = concurrent(fake, tmp_path / "concurrent-home", procs=3, per=5)  # every process queues all 4 priorities

    assert report["enqueued"] == 15 and report["exit_codes"] == [0]
    assert report["distinct_ids"] == 15 and report["seq_gap_free"] and report["fifo_within_process"]
    assert report["processed"] == 15 and report["completed"] == 15
    assert report["order_is_priority_then_fifo"] is True
    assert report["corrupt_json"] == []
