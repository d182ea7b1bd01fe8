"""Knowledge-base latency: a fresh `researcher search` process vs `python -c "import chromadb"`, side by
side, and batch search (`--queries-file`) ms/query on SciFact.

Each round runs, in turn: the baseline import; a search answered by the resident search process (started
by the call before the rounds, as any first search starts it); a search in its own process
(GSD_RESEARCH_RESIDENT_IDLE=0: what a first call, or any call with the resident process off, pays).

Usage: python bench/kb_latency.py [--runs N] [--scenario scifact-all]
(needs the SciFact index of kb_indexing.py --part memory or kb_retrieval.py; --scenario quality-int8-all
uses the one of kb_indexing.py --part quality)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kb_indexing import BIN, SCIFACT, WORK, bench_env  # noqa: E402

RUNS = 5


def timed(cmd: list[str], env: dict, stdin: str | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, input=stdin, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:3]} failed: {proc.stdout[-500:]} {proc.stderr[-1500:]}")
    return time.perf_counter() - started, proc.stdout


def resident_up(env: dict, timeout: float = 180.0) -> int:
    """Wait until the resident search process of this home listens; its pid."""
    sock = Path(env["GSD_RESEARCH_HOME"]) / "run" / "search.sock"
    lock = sock.with_name("search.lock")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fields = lock.read_text().split() if sock.exists() and lock.exists() else []
        if fields and fields[0].isdigit():  # the pid, then (when known) its own search time
            return int(fields[0])
        time.sleep(0.2)
    raise SystemExit("the resident search process did not start")


def stats(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def single_queries(env: dict, queries: list[dict], runs: int) -> dict:
    search = [str(BIN / "researcher"), "search", "--repo", "scifact", "--json"]
    alone = dict(env, GSD_RESEARCH_RESIDENT_IDLE="0")
    timed(search + [queries[-1]["text"]], env)  # the first search of the home starts the resident process
    pid = resident_up(env)
    baseline, resident, own = [], [], []
    try:
        for i in range(runs):  # interleaved, so all three see the same machine load
            baseline.append(timed([sys.executable, "-c", "import chromadb"], env)[0])
            resident.append(timed(search + [queries[i]["text"]], env)[0])
            own.append(timed(search + [queries[i]["text"]], alone)[0])
        assert resident_up(env, 1) == pid, "the resident process changed during the runs"
        status = Path(f"/proc/{pid}/status").read_text()
        rss = {k: round(int(v.split()[0]) / 1024, 1) for k, _, v in (line.partition(":") for line in status.splitlines())
               if k in ("VmRSS", "VmHWM")}
    finally:
        os.kill(pid, 15)
    base = statistics.median(baseline)
    return {"runs": runs, "import_chromadb_s": stats(baseline), "search_resident_s": stats(resident),
            "search_own_process_s": stats(own), "resident_rss_mib": rss["VmRSS"], "resident_peak_rss_mib": rss["VmHWM"],
            "ratio_resident_over_import_chromadb": round(statistics.median(resident) / base, 2),
            "ratio_own_process_over_import_chromadb": round(statistics.median(own) / base, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--scenario", default="scifact-all", help="the bench home holding the SciFact index")
    from _common import compile_bytecode

    compile_bytecode()  # as an install has it: start-up figures must not include compiling our sources
    args = parser.parse_args()
    env = bench_env(args.scenario)
    state = Path(env["GSD_RESEARCH_HOME"]) / "repositories" / "scifact"
    if not any((state / name).exists() for name in ("state.jsonl", "checksums.json")):  # this tree's or an older one's
        raise SystemExit("index SciFact first: python bench/kb_indexing.py --part memory")
    queries = [json.loads(line) for line in (SCIFACT / "queries-train.jsonl").read_text().splitlines()]
    figures = single_queries(env, queries, args.runs)
    env = dict(env, GSD_RESEARCH_RESIDENT_IDLE="0")
    qfile = WORK / "scifact-queries.jsonl"
    qfile.write_text("".join(json.dumps({"id": q["_id"], "query": q["text"]}) + "\n" for q in queries))
    batch_s, out = timed([str(BIN / "researcher"), "search", "--queries-file", str(qfile), "--repo", "scifact",
                          "--json"], env)
    lines = out.strip().splitlines()
    assert len(lines) == len(queries)
    one_s, _ = timed([str(BIN / "researcher"), "search", "--queries-file", "-", "--repo", "scifact", "--json"],
                     env, stdin=json.dumps({"id": 1, "query": queries[0]["text"]}) + "\n")
    figures.update({
        "batch_queries": len(queries),
        "batch_total_s": round(batch_s, 2),
        "batch_ms_per_query_incl_startup": round(1000 * batch_s / len(queries), 1),
        "batch_ms_per_query_excl_startup": round(1000 * (batch_s - one_s) / (len(queries) - 1), 1),
    })
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
