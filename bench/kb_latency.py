"""Knowledge-base latency: a fresh `researcher search` process vs `python -c "import chromadb"`, side by
side, and batch search (`--queries-file`) ms/query on SciFact.

Usage: python bench/kb_latency.py   (needs the SciFact index of kb_indexing.py --part memory or kb_retrieval.py)
"""

from __future__ import annotations

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


def main() -> None:
    env = bench_env("scifact-all")
    if not (Path(env["GSD_RESEARCH_HOME"]) / "repositories" / "scifact" / "checksums.json").exists():
        raise SystemExit("index SciFact first: python bench/kb_indexing.py --part memory")
    queries = [json.loads(line) for line in (SCIFACT / "queries-train.jsonl").read_text().splitlines()]
    search, baseline = [], []
    for i in range(RUNS):  # interleaved, so both see the same machine load
        baseline.append(timed([sys.executable, "-c", "import chromadb"], env)[0])
        search.append(timed([str(BIN / "researcher"), "search", queries[i]["text"], "--repo", "scifact",
                             "--json"], env)[0])
    qfile = WORK / "scifact-queries.jsonl"
    qfile.write_text("".join(json.dumps({"id": q["_id"], "query": q["text"]}) + "\n" for q in queries))
    batch_s, out = timed([str(BIN / "researcher"), "search", "--queries-file", str(qfile), "--repo", "scifact",
                          "--json"], env)
    lines = out.strip().splitlines()
    assert len(lines) == len(queries)
    one_s, _ = timed([str(BIN / "researcher"), "search", "--queries-file", "-", "--repo", "scifact", "--json"],
                     env, stdin=json.dumps({"id": 1, "query": queries[0]["text"]}) + "\n")
    figures = {
        "fresh_search_process_s_median": round(statistics.median(search), 3),
        "import_chromadb_s_median": round(statistics.median(baseline), 3),
        "ratio_search_over_import_chromadb": round(statistics.median(search) / statistics.median(baseline), 2),
        "batch_queries": len(queries),
        "batch_total_s": round(batch_s, 2),
        "batch_ms_per_query_incl_startup": round(1000 * batch_s / len(queries), 1),
        "batch_ms_per_query_excl_startup": round(1000 * (batch_s - one_s) / (len(queries) - 1), 1),
        "runs": RUNS,
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
