"""Research memory: after `fetch` of 30 AEB pages (served on 127.0.0.1) and 10 searches (fake Tavily returning
SciFact abstracts), does `recall` find the right source in its top 3 for the questions of
bench/memory_questions.json (written before any ranking was seen)? Offline (both servers stopped), within
the budget, lexical (before the embedding) and hybrid (after it); the embedding's duration; cold `recall`
process time next to `researcher search --repo research-memory` on the same store.

Usage: python bench/memory_recall.py [--runs 5]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED, cl100k, start_fake_server  # noqa: E402
from _pages import page_url, serve  # noqa: E402

BIN = Path(sys.executable).parent
QUESTIONS = Path(__file__).resolve().parent / "memory_questions.json"
BUDGET = 2000


def scifact_lines(wanted: set[int]) -> dict[int, dict]:
    out = {}
    with gzip.open(SHARED / "bench" / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if n in wanted:
                out[n] = json.loads(line)
            if n > max(wanted):
                break
    return out


def result_for(doc: dict) -> dict:
    """A Tavily result of a SciFact abstract: its title, a made-up URL, the abstract's start as snippet."""
    return {"title": doc["title"], "url": f"https://scifact.example.org/doc/{doc['_id']}",
            "content": doc["text"][:500], "score": 0.9}


def env_for(home: Path, fake_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_API_URL"))}
    env.update(GSD_RESEARCH_HOME=str(home), GSD_RESEARCH_ALLOW_HOSTS="127.0.0.1", OLLAMA_HOST="http://127.0.0.1:9",
               TAVILY_API_KEY="tvly-bench-memory-0001", TAVILY_BASE_URL=fake_url + "/tavily",
               TIKTOKEN_CACHE_DIR=str(SHARED / "tokenizers" / "tiktoken"), HOME=str(home.parent / "userhome"))
    Path(env["HOME"]).mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", str(SHARED / "tools" / "seed-offline-models.sh")], env=env, check=True,
                   capture_output=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text('memory:\n  embed: "off"\n')  # the embedding is run and timed below
    return env


def run(env: dict, *args: str) -> tuple[dict, float, str]:
    started = time.perf_counter()
    proc = subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - started
    try:
        return json.loads(proc.stdout), elapsed, proc.stdout
    except ValueError:
        raise SystemExit(f"{args[:2]} printed no JSON: {proc.stdout[:300]} {proc.stderr[-800:]}") from None


def fill(env: dict, spec: dict, fake, base: str) -> dict:
    """Fetch the pages and run the searches; what each question's right source is."""
    targets, fetch_s = {}, []
    for item in spec["pages"]:
        url = page_url(base, item["aeb_id"])
        doc, seconds, _ = run(env, "gsd-research", "fetch", url)
        if not doc.get("success") or doc["metadata"].get("memory") != "stored":
            raise SystemExit(f"fetch {url}: {json.dumps(doc)[:300]}")
        fetch_s.append(seconds)
        targets[item["question"]] = url
    docs = scifact_lines({n for s in spec["searches"] for n in s["scifact_lines"]})
    for search in spec["searches"]:
        fake.state["tavily.results"] = [result_for(docs[n]) for n in search["scifact_lines"]]
        doc, _, _ = run(env, "gsd-research", "search", search["query"], "--provider", "tavily")
        if not doc.get("success") or doc["metadata"].get("memory") != "stored":
            raise SystemExit(f"search {search['query']}: {json.dumps(doc)[:300]}")
        targets[search["question"]] = result_for(docs[search["target_line"]])["url"]
    return {"targets": targets, "fetch_s_median": round(statistics.median(fetch_s), 3)}


def ask(env: dict, targets: dict[str, str], count) -> dict:
    hits, first, over, tokens, misses, modes = 0, 0, 0, [], [], set()
    for question, url in targets.items():
        doc, _, stdout = run(env, "gsd-research", "recall", question, "--max-tokens", str(BUDGET))
        top = [r["source_url"] for r in doc["results"][:3]]
        real = count(stdout)
        tokens.append(real)
        over += real > BUDGET or doc["metadata"]["tokens_used"] > BUDGET
        modes.add(doc["metadata"]["mode"])
        first += bool(top) and top[0] == url
        if url in top:
            hits += 1
        else:
            misses.append({"question": question, "want": url.rsplit("/", 1)[-1][:16], "got": [u.rsplit("/", 1)[-1][:16]
                                                                                             for u in top if u]})
    return {"questions": len(targets), "top1_rate": round(first / len(targets), 4), "top3_hits": hits,
            "top3_rate": round(hits / len(targets), 4),
            "over_budget": over, "tokens_median": statistics.median(tokens), "modes": sorted(modes),
            "misses": misses}


def cold_times(env: dict, questions: list[str], runs: int) -> dict:
    recall, search = [], []
    for question in questions[:runs]:  # interleaved: both see the same machine load
        recall.append(run(env, "gsd-research", "recall", question)[1])
        search.append(run(env, "researcher", "search", question, "--repo", "research-memory", "--json")[1])
    return {"recall_s_median": round(statistics.median(recall), 3),
            "researcher_search_s_median": round(statistics.median(search), 3),
            "ratio": round(statistics.median(recall) / statistics.median(search), 2), "runs": len(recall)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from _common import compile_bytecode

    compile_bytecode()  # as an install has it: start-up figures must not include compiling our sources
    spec = json.loads(QUESTIONS.read_text())
    work = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    fake = start_fake_server("tavily")
    base, pages = serve()
    env = env_for(work / "home", fake.url)
    try:
        filled = fill(env, spec, fake, base)
    finally:
        pages.shutdown()
        fake.stop()  # offline from here on
    count = cl100k()
    lexical = ask(env, filled["targets"], count)
    lexical_times = cold_times(env, list(filled["targets"]), args.runs)
    started = time.perf_counter()
    run(env, "researcher", "index", "research-memory", "--json")
    embed_s = time.perf_counter() - started
    hybrid = ask(env, filled["targets"], count)
    hybrid_times = cold_times(env, list(filled["targets"]), args.runs)
    print(json.dumps({"pages_fetched": len(spec["pages"]), "searches": len(spec["searches"]),
                      "fetch_s_median": filled["fetch_s_median"], "lexical_before_embedding": lexical,
                      "cold_process_lexical": lexical_times, "embedding_s": round(embed_s, 1),
                      "hybrid_after_embedding": hybrid, "cold_process_hybrid": hybrid_times}, indent=2))


if __name__ == "__main__":
    main()
