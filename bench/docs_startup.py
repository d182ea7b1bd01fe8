"""Start-up cost of a cached `gsd-research docs` call vs. `python -c "import requests_cache"`, and its memory.

    .venv/bin/python bench/docs_startup.py [--runs 15] [--importtime] [--launcher bin/gsd-research ...]

The commands run as fresh processes of the same venv, interleaved (A B C A B C ...) so machine load hits both
alike; the docs call answers from the HTTP cache filled by one warm-up call against the fake Context7
server this script starts on 127.0.0.1. Peak RSS is the child's ru_maxrss (os.wait4).
Targets: median ratio <= 1.0 (it was <= 1.5 before the start-up goal was tightened), peak RSS of a docs
call <= 100 MiB. The measured package is compiled to bytecode first, as an install has it. Each --launcher
(a bin/gsd-research of this or another tree, run with GSD_RESEARCH_VENV set to this venv) makes the same cached
call through it, interleaved with the rest: the launcher's cost side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import compile_bytecode, median, start_fake_server

VENV_BIN = Path(sys.executable).parent
DOCS = [str(VENV_BIN / "gsd-research"), "docs", "react", "useEffect cleanup"]
BASELINE = [sys.executable, "-c", "import requests_cache"]
# The same call with redis imported first, so requests_cache loads every backend client as it would
# without gsd_research.core.http's import trimming: shows what that trimming saves.
UNTRIMMED = [sys.executable, "-c", "import redis; from gsd_research.cli import main; main()", *DOCS[1:]]


def run(argv: list[str], env: dict) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stdout of one fresh process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}: {out[:300]!r}")
    return elapsed, usage.ru_maxrss, out.decode("utf-8")


def importtime(env: dict) -> list[tuple[int, str]]:
    """The heaviest cumulative imports of a cached docs call (python -X importtime)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gsd_research", *DOCS[1:]], env=env,
                          capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:15]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--importtime", action="store_true", help="also print the heaviest imports")
    parser.add_argument("--launcher", action="append", default=[], help="a bin/gsd-research to measure too")
    args = parser.parse_args()

    print(f"measuring {compile_bytecode()} (bytecode compiled, as an install has it)")
    server = start_fake_server("context7")
    home = tempfile.mkdtemp(prefix="gsd-startup-")
    env = dict(os.environ, GSD_RESEARCH_HOME=home, CONTEXT7_API_URL=server.url + "/api")
    for name in ("CONTEXT7_API_KEY",):
        env.pop(name, None)
    try:
        _, cold_rss, out = run(DOCS, env)  # warm-up: fills the cache
        assert json.loads(out)["metadata"]["cache_hit"] is False
        _, uncached_rss, _ = run([*DOCS, "--no-cache"], env)
        upstream = len(server.hits())
        docs_t, base_t, docs_rss, base_rss, untrimmed_t, recomputed_t = [], [], [], [], [], []
        launched_t = {path: [] for path in args.launcher}
        launcher_env = dict(env, GSD_RESEARCH_VENV=str(VENV_BIN.parent))
        memo = Path(home) / "cache" / "docs"
        for _ in range(args.runs):
            t, rss, out = run(DOCS, env)
            assert json.loads(out)["metadata"]["cache_hit"] is True
            docs_t.append(t)
            docs_rss.append(rss)
            for kept in memo.glob("*.json"):  # the same call with its answer worked out again (docs/answer_memo)
                kept.unlink()
            t, rss, recomputed = run(DOCS, env)
            assert recomputed == out, "the kept answer differs from the one worked out again"
            recomputed_t.append(t)
            docs_rss.append(rss)
            t, rss, _ = run(BASELINE, env)
            base_t.append(t)
            base_rss.append(rss)
            t, _, out = run(UNTRIMMED, env)
            assert json.loads(out)["metadata"]["cache_hit"] is True
            untrimmed_t.append(t)
            for path, times in launched_t.items():
                t, _, out = run([path, *DOCS[1:]], launcher_env)
                assert json.loads(out)["metadata"]["cache_hit"] is True
                times.append(t)
        assert len(server.hits()) == upstream, "a cached call reached the server"
        if args.importtime:
            print("heaviest imports of a cached docs call (cumulative us):")
            for us, name in importtime(env):
                print(f"  {us:>8} {name}")
    finally:
        server.stop()
    ratio = median(docs_t) / median(base_t)
    mib = 1024.0
    print(f"runs: {args.runs} each, interleaved; load average {os.getloadavg()[0]:.2f}")
    print("| process | median wall | min wall | peak RSS (max) |\n|---|---|---|---|")
    print(f"| `gsd-research docs react \"useEffect cleanup\"` (cached) | {median(docs_t) * 1000:.0f} ms "
          f"| {min(docs_t) * 1000:.0f} ms | {max(docs_rss) / mib:.1f} MiB |")
    print(f"| the same call, its answer worked out again (kept answer removed first) | {median(recomputed_t) * 1000:.0f} ms "
          f"| {min(recomputed_t) * 1000:.0f} ms | |")
    print(f"| `python -c \"import requests_cache\"` | {median(base_t) * 1000:.0f} ms | {min(base_t) * 1000:.0f} ms "
          f"| {max(base_rss) / mib:.1f} MiB |")
    print(f"| same docs call without import trimming (redis imported first) | {median(untrimmed_t) * 1000:.0f} ms "
          f"| {min(untrimmed_t) * 1000:.0f} ms | |")
    print(f"| `gsd-research docs` first call (cache miss, 2 requests to the fake server) | | "
          f"| {cold_rss / mib:.1f} MiB |")
    print(f"| `gsd-research docs --no-cache` | | | {uncached_rss / mib:.1f} MiB |")
    for path, times in launched_t.items():
        print(f"| the same cached call through `{path}` | {median(times) * 1000:.0f} ms | {min(times) * 1000:.0f} ms "
              f"| (ratio to baseline {median(times) / median(base_t):.2f}) |")
    peak = max(max(docs_rss), cold_rss, uncached_rss) / mib
    print(f"\nratio docs/baseline (medians): {ratio:.2f} (target <= 1.0); answer worked out again: "
          f"{median(recomputed_t) / median(base_t):.2f}; without import trimming: "
          f"{median(untrimmed_t) / median(base_t):.2f}; peak RSS of a docs call: {peak:.1f} MiB (target <= 100)")
    return 0 if ratio <= 1.0 and peak <= 100 else 1


if __name__ == "__main__":
    sys.exit(main())
