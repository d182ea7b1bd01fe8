"""Web search latency, uncached vs. cached, side by side in one run (real processes, fake Tavily).

Each round runs `gsd-research search` as a fresh process (what an agent pays per call) twice: once
with a query never seen before (one upstream request to the fake Tavily, which adds a simulated
upstream latency) and once with a query already in the shared cache (no upstream request). Rounds
alternate the two kinds so machine noise hits both alike. It also times a 20-source `--report`.

    TIKTOKEN_CACHE_DIR=/work/shared/tokenizers/tiktoken .venv/bin/python bench/search_cache.py [--rounds N] [--upstream-ms MS]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests package holds the fake server (bench is not installed)
BIN = Path(sys.executable).parent / "gsd-research"


def run(args: list[str], env: dict, cwd: str) -> tuple[float, dict]:
    started = time.perf_counter()
    proc = subprocess.run([str(BIN), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
    elapsed = time.perf_counter() - started
    doc = json.loads(proc.stdout)
    if not doc.get("success"):
        raise SystemExit(f"search failed: {proc.stdout}")
    return elapsed, doc


def in_process(args: list[str]) -> float:
    """Milliseconds of one call through the CLI edge inside this process (no interpreter start-up)."""
    import contextlib
    import io

    from gsd_research.cli import cli
    from gsd_research.cli import run as run_cli

    out = io.StringIO()
    started = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = run_cli(cli, args, "gsd-research", {})
    elapsed = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"search failed: {out.getvalue()}")
    return elapsed


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--upstream-ms", type=float, default=800.0, help="simulated Tavily latency")
    opts = parser.parse_args()

    from tests.fakes.server import make_server

    server = make_server("tavily")
    server.state["tavily.delay"] = opts.upstream_ms / 1000
    home = tempfile.mkdtemp(prefix="gsd-bench-search-")
    work = tempfile.mkdtemp(prefix="gsd-bench-work-")
    env = dict(os.environ, GSD_RESEARCH_HOME=home, TAVILY_API_KEY="tvly-bench-key",
               TAVILY_BASE_URL=server.url + "/tavily")
    try:
        run(["search", "warm cached query"], env, work)  # fills the cache for the cached kind
        uncached, cached = [], []
        hits_before = len(server.hits("/tavily/search"))
        for i in range(opts.rounds):
            t, doc = run(["search", f"fresh query number {i}"], env, work)
            assert doc["metadata"]["cache_hit"] is False
            uncached.append(t)
            t, doc = run(["search", "warm cached query"], env, work)
            assert doc["metadata"]["cache_hit"] is True
            cached.append(t)
        upstream = len(server.hits("/tavily/search")) - hits_before
        os.environ.update({k: env[k] for k in ("GSD_RESEARCH_HOME", "TAVILY_API_KEY", "TAVILY_BASE_URL")})
        in_process(["search", "warm cached query"])  # imports paid once, outside the timings
        proc_uncached, proc_cached = [], []
        for i in range(opts.rounds):
            proc_uncached.append(in_process(["search", f"in-process fresh query {i}"]))
            proc_cached.append(in_process(["search", "warm cached query"]))
        t_report, doc = run(["search", "twenty source report", "--max-sources", "20", "--report"], env, work)
        report = Path(work) / doc["report"]
    finally:
        server.stop()

    print(f"rounds: {opts.rounds} per kind, simulated upstream latency {opts.upstream_ms:.0f} ms")
    print(f"upstream requests: {upstream} for {opts.rounds} uncached + {opts.rounds} cached calls")
    for name, values in (("uncached", uncached), ("cached", cached)):
        print(f"{name:9s} median {statistics.median(values) * 1000:7.0f} ms   p90 {pct(values, 0.9) * 1000:7.0f} ms")
    print(f"cached / uncached median: {statistics.median(cached) / statistics.median(uncached):.2f}")
    print("in-process (no interpreter start-up):")
    for name, values in (("uncached", proc_uncached), ("cached", proc_cached)):
        print(f"{name:9s} median {statistics.median(values) * 1000:7.1f} ms   p90 {pct(values, 0.9) * 1000:7.1f} ms")
    print(f"cached / uncached median: {statistics.median(proc_cached) / statistics.median(proc_uncached):.3f}")
    print(f"20-source search + report (uncached): {t_report * 1000:.0f} ms, report {report.stat().st_size} bytes")


if __name__ == "__main__":
    main()
