"""Crash and concurrency harness for the deep research job queue (real processes, fake Perplexity).

    .venv/bin/python -m bench.jobs_crash [--jobs 20 --kills 10 --seed 1] [--procs 8 --per-proc 25]

crash:      enqueue N jobs, start the background worker (`jobs list` starts it), kill -9 the worker K times at random
            moments while jobs run, restart it the way an agent would (`jobs list` revives it), wait:
            every job must end completed exactly once, and every JSON file under the home must parse.
concurrent: P processes enqueue M jobs each at the same moment (worker autostart off), then one
            `jobs worker --once` drains the queue: ids must be distinct, sequence numbers gap-free,
            and the processing order must be priority first, then FIFO.
Prints one JSON document with the figures (tests/test_jobs_crash.py runs both and checks them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

BIN = Path(sys.executable).parent / "gsd-research"
KEY = "pplx-canary-bench-5e1f0a9c"
FAST = {"poll_interval": 0.02, "retry_backoff": 0.05, "retry_backoff_max": 0.2, "idle_exit": 1.0}
HTTP = {"connect_timeout": 2, "read_timeout": 2, "max_retries": 2, "backoff_base": 0.01, "backoff_max": 0.05,
        "deadline": 20}


def prepare_home(home: Path, **deep) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"http": HTTP, "deep": {**FAST, **deep}}))


def env_for(home: Path, url: str) -> dict:
    env = dict(os.environ)
    env.update(GSD_RESEARCH_HOME=str(home), PERPLEXITY_BASE_URL=url + "/perplexity", PERPLEXITY_API_KEY=KEY,
               TIKTOKEN_CACHE_DIR=str(Path(__file__).resolve().parents[2] / "shared" / "tokenizers" / "tiktoken"))
    env.pop("PERPLEXITY_ENABLE_ASYNC_DEEP_RESEARCH", None)
    return env


def gsd(env: dict, *args: str, timeout: float = 60) -> dict:
    proc = subprocess.run([str(BIN), *args], env=env, capture_output=True, text=True, timeout=timeout)
    return json.loads(proc.stdout)


def live_worker_pid(home: Path, wait: float = 3.0) -> int | None:
    """The pid of the worker that holds the lock now (checked by its command line), waiting a little."""
    from gsd_research.deep.store import read_json

    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        pid = (read_json(home / "jobs" / "worker.json") or {}).get("pid")
        try:
            if pid and b"jobs\x00worker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
        except OSError:
            pass
        time.sleep(0.01)
    return None


def _status(home: Path, job_id: str) -> str:
    from gsd_research.deep.store import read_json

    return (read_json(home / "conversation-logs" / job_id / "status.json") or {}).get("status", "")


def wait_running(home: Path, ids: list[str], wait: float = 10.0) -> bool:
    """Wait until some job is running (a kill then lands mid-job, however slowly the worker started)."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if any(_status(home, job_id) == "running" for job_id in ids):
            return True
        time.sleep(0.01)
    return False


def _finished(home: Path, job_id: str) -> bool:
    from gsd_research.deep.store import read_json

    return (read_json(home / "conversation-logs" / job_id / "status.json") or {}).get("status") == "completed"


def check_files(home: Path) -> dict:
    """Parse every *.json under the home; count assistant messages per conversation."""
    corrupt, parsed, answers = [], 0, {}
    for path in home.rglob("*.json"):
        try:
            doc = json.loads(path.read_text())
            parsed += 1
        except ValueError:
            corrupt.append(str(path.relative_to(home)))
            continue
        if path.name == "conversation.json":
            answers[path.parent.name] = sum(1 for m in doc.get("messages", []) if m.get("role") == "assistant")
    return {"json_files": parsed, "corrupt": corrupt, "answers": answers,
            "leftover_job_files": len(list(home.glob("conversation-logs/*/job.json")))}


def crash(server, home: Path, jobs: int = 20, kills: int = 10, seed: int = 1, job_seconds: float = 0.5) -> dict:
    """Enqueue `jobs`, kill -9 the worker `kills` times while they run, restart, wait, check."""
    from gsd_research.core.usage_ledger import summarize

    server.state["pplx_async_delay"] = job_seconds
    prepare_home(home, autostart=False, concurrency=3)  # every job queued before the first one runs, however
    env = env_for(home, server.url)                     # slowly the enqueuers start on a loaded machine
    rng = random.Random(seed)
    enqueuers = [subprocess.Popen([str(BIN), "deep", "--async", f"crash question {i}", "--priority", str(i % 3)],
                                  env=env, stdout=subprocess.PIPE, text=True) for i in range(jobs)]
    ids = [json.loads(p.communicate(timeout=60)[0])["conversation_id"] for p in enqueuers]
    prepare_home(home, autostart=True, concurrency=3)  # several jobs in flight when a kill lands
    started = time.monotonic()
    gsd(env, "jobs", "list")  # an agent's poll starts the worker
    killed = 0
    kill_moments = []
    for _ in range(kills):
        wait_running(home, ids)
        time.sleep(rng.uniform(0.05, 0.6))
        pid = live_worker_pid(home, wait=10.0)
        if pid is None:  # revived by an agent's next poll, or every job is done already
            gsd(env, "jobs", "list")
            pid = live_worker_pid(home, wait=10.0)
            if pid is None:
                break
        os.kill(pid, signal.SIGKILL)
        killed += 1
        kill_moments.append(round(time.monotonic() - started, 2))
        gsd(env, "jobs", "list")  # what an agent's next poll does: it revives the worker
    deadline = time.monotonic() + 90
    while not all(_finished(home, job_id) for job_id in ids) and time.monotonic() < deadline:
        time.sleep(0.1)
    listed = gsd(env, "jobs", "list", "--limit", str(jobs))
    elapsed = time.monotonic() - started
    files = check_files(home)
    statuses = [json.loads((home / "conversation-logs" / i / "status.json").read_text()) for i in ids]
    remote = server.state.get("pplx_async", {})
    ledger = summarize(None, home / "usage" / "ledger.jsonl")
    return {
        "jobs": jobs, "kills": killed, "kill_moments_s": kill_moments, "elapsed_s": round(elapsed, 2),
        "completed": sum(s["status"] == "completed" for s in statuses),
        "listed_completed": listed["counts"]["completed"],
        "answers_per_job": sorted(set(files["answers"].get(i, 0) for i in ids)),
        "interruptions": sum(int(s.get("interruptions") or 0) for s in statuses),
        "remote_requests": len(remote), "ledger_calls": ledger["totals"]["calls"],
        "json_files": files["json_files"], "corrupt_json": files["corrupt"],
        "leftover_job_files": files["leftover_job_files"],
        "key_in_state": any(KEY in p.read_text(errors="replace") for p in home.rglob("*") if p.is_file()
                            and p.name != "config.yaml"),
    }


_ENQUEUER = """
import io, json, os, sys, time
from contextlib import redirect_stdout
from gsd_research.cli import cli, run
proc, per, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.001)
out = []
for j in range(per):
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = run(cli, ["deep", "--async", f"p{proc}-j{j}", "--priority", str((proc + j) % 4)], "gsd-research", {})
    doc = json.loads(buf.getvalue())
    out.append({"id": doc.get("conversation_id"), "query": f"p{proc}-j{j}", "priority": (proc + j) % 4,
                "code": code})
print(json.dumps(out))
"""


def concurrent(server, home: Path, procs: int = 8, per: int = 25) -> dict:
    """`procs` processes enqueue `per` jobs each at once; then drain and check ids and order."""
    server.state["pplx_async_delay"] = 0
    prepare_home(home, autostart=False, concurrency=1)  # one at a time: the start order is observable
    env = env_for(home, server.url)
    go = home / "go"
    children = [subprocess.Popen([sys.executable, "-c", _ENQUEUER, str(p), str(per), str(go)], env=env,
                                 stdout=subprocess.PIPE, text=True) for p in range(procs)]
    time.sleep(0.5)  # let every process import and wait at the barrier
    started = time.monotonic()
    go.write_text("go")
    rows = [row for child in children for row in json.loads(child.communicate(timeout=120)[0])]
    enqueue_s = time.monotonic() - started
    server.reset_log()
    drained = time.monotonic()
    worker = gsd(env, "jobs", "worker", "--once", timeout=300)
    drain_s = time.monotonic() - drained
    seq = {}
    for row in rows:
        status = json.loads((home / "conversation-logs" / row["id"] / "status.json").read_text())
        seq[row["query"]] = status["seq"]
    order = [r.json()["request"]["messages"][0]["content"]
             for r in server.hits("/perplexity/async/chat/completions", method="POST")]
    prio = {r["query"]: r["priority"] for r in rows}
    expected = sorted(prio, key=lambda q: (-prio[q], seq[q]))
    fifo_per_process = all(
        [seq[f"p{p}-j{j}"] for j in range(per)] == sorted(seq[f"p{p}-j{j}"] for j in range(per))
        for p in range(procs))
    return {
        "processes": procs, "per_process": per, "enqueued": len(rows),
        "exit_codes": sorted({r["code"] for r in rows}), "distinct_ids": len({r["id"] for r in rows}),
        "seq_gap_free": sorted(seq.values()) == list(range(1, len(rows) + 1)),
        "fifo_within_process": fifo_per_process, "enqueue_wall_s": round(enqueue_s, 2),
        "processed": len(order), "order_is_priority_then_fifo": order == expected,
        "completed": worker.get("completed"), "drain_s": round(drain_s, 2),
        "corrupt_json": check_files(home)["corrupt"],
    }


def main() -> None:
    from tests.fakes.server import make_server

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--per-proc", type=int, default=25)
    parser.add_argument("--only", choices=["crash", "concurrent"], default=None)
    args = parser.parse_args()
    server = make_server("perplexity")
    report = {}
    try:
        with tempfile.TemporaryDirectory(prefix="gsd-jobs-bench-") as tmp:
            if args.only in (None, "crash"):
                report["crash"] = crash(server, Path(tmp) / "crash", args.jobs, args.kills, args.seed)
            if args.only in (None, "concurrent"):
                report["concurrent"] = concurrent(server, Path(tmp) / "concurrent", args.procs, args.per_proc)
            time.sleep(1.2)  # let the idle worker exit before its home disappears
    finally:
        server.stop()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
