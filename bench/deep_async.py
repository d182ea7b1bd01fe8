"""Wall time of `gsd-research deep --async` as fresh processes, against `gsd-research --version` run alongside.

    .venv/bin/python -m bench.deep_async [--runs 10]

Each run is a new process (as an agent's Bash call is), with a distinct query so nothing is cached,
against the fake Perplexity server; the background worker starts on the first enqueue (that run is
reported on its own as well) and keeps running. Runs of the two commands alternate so machine load
affects both alike. Prints one JSON document: medians, ratio and every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.jobs_crash import BIN, env_for, live_worker_pid, prepare_home


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], env: dict, cpu: list | None = None) -> tuple[float, dict]:
    """Wall seconds of one fresh process (and its CPU seconds appended to `cpu`)."""
    cpu_before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - started
    if cpu is not None:
        cpu.append(_children_cpu() - cpu_before)
    return elapsed, json.loads(proc.stdout)


def main() -> None:
    from bench._common import compile_bytecode
    from tests.fakes.server import make_server

    compile_bytecode()  # as an install has it: start-up figures must not include compiling our sources

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    server = make_server("perplexity")
    server.state["pplx_async_delay"] = 0.05
    tmp = Path(tempfile.mkdtemp(prefix="gsd-deep-async-"))
    try:
        home = tmp / "home"
        prepare_home(home, autostart=True, idle_exit=5)
        env = env_for(home, server.url)
        baseline, enqueue, first = [], [], None
        base_cpu, deep_cpu = [], []
        for i in range(args.runs + 1):
            base_s, _ = timed([str(BIN), "--version"], env, base_cpu)
            deep_s, doc = timed([str(BIN), "deep", "--async", f"benchmark question {i}"], env, deep_cpu)
            assert doc.get("success") and doc.get("status") == "pending", doc
            if i == 0:
                first = {"seconds": round(deep_s, 4), "worker_started": doc["worker"]["started"]}
                continue  # the spawn run is reported apart; the 10 measured runs follow
            baseline.append(base_s)
            enqueue.append(deep_s)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            listed = json.loads(subprocess.run([str(BIN), "jobs", "list", "--limit", "1"], env=env,
                                               capture_output=True, text=True).stdout)
            if listed["counts"]["completed"] == args.runs + 1:
                break
            time.sleep(0.2)
        pid = live_worker_pid(home, wait=0.5)
        report = {
            "command": "gsd-research deep --async QUERY",
            "runs": args.runs,
            "median_s": round(statistics.median(enqueue), 4),
            "min_s": round(min(enqueue), 4), "max_s": round(max(enqueue), 4),
            "baseline_command": "gsd-research --version",
            "baseline_median_s": round(statistics.median(baseline), 4),
            "ratio_to_baseline": round(statistics.median(enqueue) / statistics.median(baseline), 2),
            "cpu_median_s": round(statistics.median(deep_cpu[1:]), 4),
            "baseline_cpu_median_s": round(statistics.median(base_cpu[1:]), 4),
            "load_average_1m": round(os.getloadavg()[0], 2),
            "first_run_with_worker_spawn": first,
            "jobs_completed_by_worker": listed["counts"]["completed"],
            "samples_s": [round(s, 4) for s in enqueue],
            "baseline_samples_s": [round(s, 4) for s in baseline],
        }
        if pid:
            subprocess.run(["kill", str(pid)], check=False)
    finally:
        server.stop()
        time.sleep(0.3)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.exit(main())
