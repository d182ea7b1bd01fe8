"""What keeping pages in the research memory costs `fetch`: process time of `gsd-research fetch` on AEB pages
served on 127.0.0.1, memory off vs on, interleaved page by page (each arm its own home, so every fetch
reads the page over HTTP and extracts it). Two runs: memory on with the embedding off (the cost of the
write: catalog, document, lexical index), and memory on with the background embedding worker (what the
agent waits for while a detached worker embeds, on the same 2 cores).

Usage: python bench/memory_fetch.py [--pages 24]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, pct  # noqa: E402
from _pages import articles, english, page_url, serve  # noqa: E402

BIN = Path(sys.executable).parent


def home_env(home: Path, memory: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_API_URL"))}
    env.update(GSD_RESEARCH_HOME=str(home), GSD_RESEARCH_ALLOW_HOSTS="127.0.0.1", OLLAMA_HOST="http://127.0.0.1:9",
               TIKTOKEN_CACHE_DIR=str(SHARED / "tokenizers" / "tiktoken"))
    home.mkdir(parents=True, exist_ok=True)
    config = {"off": "memory:\n  enabled: false\n", "lexical": 'memory:\n  embed: "off"\n',
              "background": 'memory:\n  embed: "background"\n'}[memory]
    (home / "config.yaml").write_text(config)
    return env


def fetch(env: dict, url: str) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run([str(BIN / "gsd-research"), "fetch", url], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    doc = json.loads(proc.stdout)
    if not doc.get("success"):
        raise SystemExit(f"fetch {url}: {proc.stdout[:300]}")
    return elapsed, doc["metadata"].get("memory", "")


def side_by_side(urls: list[str], work: Path, arm: str) -> dict:
    envs = {"off": home_env(work / f"{arm}-off", "off"), arm: home_env(work / f"{arm}-on", arm)}
    times: dict[str, list[float]] = {"off": [], arm: []}
    statuses = set()
    for i, url in enumerate(urls):
        order = ["off", arm] if i % 2 == 0 else [arm, "off"]  # alternate who goes first
        for name in order:
            seconds, status = fetch(envs[name], url)
            times[name].append(seconds)
            statuses.add((name, status))
    off, on = statistics.median(times["off"]), statistics.median(times[arm])
    out = {"fetches_per_arm": len(urls), "off_p50_s": round(off, 3), f"{arm}_p50_s": round(on, 3),
           "off_p90_s": round(pct(times["off"], 0.9), 3), f"{arm}_p90_s": round(pct(times[arm], 0.9), 3),
           "ratio_p50": round(on / off, 3), "delta_p50_ms": round(1000 * (on - off), 1),
           "memory_statuses": sorted(f"{a}:{s}" for a, s in statuses)}
    if arm == "background":
        deadline = time.time() + 300
        record = work / f"{arm}-on" / "repositories" / "research-memory" / "state.jsonl"
        while time.time() < deadline and _writes_pending(record):
            time.sleep(0.5)
        out["worker_caught_up_s_after_last_fetch"] = round(time.time() - (deadline - 300), 1)
    return out


def _writes_pending(record: Path) -> bool:
    """Research memory's writes not yet covered by an index run, from the state record's head line."""
    try:
        with record.open("rb") as fh:
            head = json.loads(fh.readline())
    except (OSError, ValueError):
        return True
    return bool(head.get("writes")) and head.get("writes") != head.get("covered")


def write_cost(bodies: list[str], work: Path) -> dict:
    """The memory write alone, in process (what `fetch`'s recording thread does): catalog row, document,
    lexical rows, for each article text as a page; p50/p90 in ms. Less noisy than process times."""
    os.environ["GSD_RESEARCH_HOME"] = str(work / "write-cost")
    from gsd_research.core.config import Config
    from gsd_research.memory import api as memory_api
    from gsd_research.memory.store import Entry

    config = Config({"memory": {"embed": "off"}})
    conf = memory_api.settings(config)
    times = []
    for i, body in enumerate(bodies):
        entry = Entry(kind="page", body=body, url=f"https://bench.example/{i}", title=f"Page {i}", provider="fetch")
        started = time.perf_counter()
        status = memory_api._keep(config, conf, lambda e=entry: [e])
        times.append(1000 * (time.perf_counter() - started))
        assert status == "stored", status
    return {"writes": len(times), "first_ms": round(times[0], 1), "p50_ms": round(statistics.median(times), 1),
            "p90_ms": round(pct(times, 0.9), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=24)
    args = parser.parse_args()
    data = articles()
    ids = sorted(k for k, v in data.items() if english(v["articleBody"]))
    random.Random(3).shuffle(ids)
    base, server = serve()
    work = Path(tempfile.mkdtemp(prefix="bench-memory-fetch-"))
    try:
        urls = [page_url(base, i) for i in ids[: 2 * args.pages]]
        lexical = side_by_side(urls[: args.pages], work, "lexical")
        background = side_by_side(urls[args.pages:], work, "background")
    finally:
        server.shutdown()
    cost = write_cost([data[i]["articleBody"] for i in ids[: 2 * args.pages]], work)
    print(json.dumps({"memory_write": lexical, "memory_with_background_embedding": background,
                      "write_in_process": cost}, indent=2))


if __name__ == "__main__":
    main()
