"""Token budgets vs. cl100k: does any printed answer exceed --max-tokens, and how well is the budget used?

    TIKTOKEN_CACHE_DIR=../shared/tokenizers/tiktoken .venv/bin/python bench/token_budget.py [--quick]

1. Estimator calibration: real cl100k tokens / estimate per document of each bench corpus.
2. `gsd-research docs` over the fake Context7 catalogue (libraries x queries x budgets), run in-process
   through the real CLI edge; every printed document counted with cl100k.
3. The bench corpora fed through fit_results (lists of results, as `search`/`docs` answers) and fit_text
   (one long field, as `fetch --extract` answers), compact and pretty-printed.

Utilization = real tokens of the printed document / budget, over the answers that had more to give than
the budget (truncated); answers that fit whole say nothing about the budget.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout

from _common import cl100k, corpora, median, pct, start_fake_server

BUDGETS = (300, 500, 1000, 2000, 4000)
LIBRARIES = ("react", "nextjs", "fastapi", "react-three-fiber", "movedlib", "/vercel/next.js@v15.1.8",
             "next.js@14.3.0", "/tiangolo/fastapi")
QUERIES = ("useEffect cleanup", "app router setup", "dependency injection", "request body validation",
           "middleware authentication", "security OAuth2 scopes", "background tasks", "testing with pytest")


class Tally:
    """Outputs, overs and utilization of one row of the report."""

    def __init__(self) -> None:
        self.outputs = self.over = 0
        self.util: list[float] = []
        self.worst = 0.0

    def add(self, real: int, budget: int, truncated: bool) -> None:
        self.outputs += 1
        self.over += real > budget
        self.worst = max(self.worst, real / budget)
        if truncated:
            self.util.append(real / budget)

    def row(self, name: str) -> str:
        return (f"| {name} | {self.outputs} | {self.over} | {median(self.util):.3f} | {pct(self.util, 0.10):.3f} "
                f"| {len(self.util)} | {self.worst:.3f} |")


def calibrate(count, texts: list[str]) -> dict:
    from gsd_research.core.tokens import count_tokens, raw_estimate

    ratios, under = [], 0
    for text in texts:
        real = count(text)
        ratios.append(real / max(1, raw_estimate(text)))
        under += count_tokens(text) < real
    return {"n": len(texts), "min": min(ratios), "p50": median(ratios), "p99": pct(ratios, 0.99),
            "max": max(ratios), "under": under}


def bench_docs(count, pretty_budgets=(500, 2000)) -> Tally:
    from gsd_research.cli import cli, run

    server = start_fake_server("context7")
    os.environ["CONTEXT7_API_URL"] = server.url + "/api"
    os.environ["GSD_RESEARCH_HOME"] = tempfile.mkdtemp(prefix="gsd-bench-")
    tally = Tally()
    try:
        for lib in LIBRARIES:
            for query in QUERIES:
                for budget in BUDGETS:
                    modes = [False, True] if budget in pretty_budgets else [False]
                    for pretty in modes:
                        argv = (["--json-pretty"] if pretty else []) + ["--max-tokens", str(budget), "docs", lib, query]
                        out, err = io.StringIO(), io.StringIO()
                        with redirect_stdout(out), redirect_stderr(err):
                            code = run(cli, argv, "gsd-research", {})
                        if code != 0:
                            raise SystemExit(f"docs {lib!r} {query!r} failed: {out.getvalue()[:300]}")
                        import json

                        doc = json.loads(out.getvalue())
                        tally.add(count(out.getvalue()), budget, doc["metadata"]["truncated"])
    finally:
        server.stop()
    return tally


def as_results(texts: list[str], size: int = 10) -> list[list[dict]]:
    groups = []
    for start in range(0, len(texts), size):
        groups.append([{"title": text.strip().splitlines()[0][:80], "content": text,
                        "source_url": f"https://example.com/doc/{start + i}"}
                       for i, text in enumerate(texts[start:start + size])])
    return groups


def bench_fit(count, texts: list[str], budgets=BUDGETS) -> tuple[Tally, Tally, Tally]:
    from gsd_research.core import output
    from gsd_research.core.budget import fit_results, fit_text
    from gsd_research.core.output import dumps

    lists, single, pretty = Tally(), Tally(), Tally()
    for budget in budgets:
        for group in as_results(texts):
            doc = fit_results({"success": True, "command": "search", "query": "benchmark query",
                               "metadata": {"backend": "bench"}}, group, budget)
            lists.add(count(dumps(doc) + "\n"), budget, doc["metadata"]["truncated"])
        for i, text in enumerate(texts[::3]):
            doc = fit_text({"success": True, "command": "fetch", "url": f"https://example.com/{i}", "content": text,
                            "metadata": {"backend": "bench"}}, ("content",), budget)
            single.add(count(dumps(doc) + "\n"), budget, doc["metadata"]["truncated"])
        output.set_pretty(True)
        try:
            for group in as_results(texts[::2])[:6]:
                doc = fit_results({"success": True, "command": "search", "query": "benchmark query",
                                   "metadata": {"backend": "bench"}}, group, budget)
                pretty.add(count(dumps(doc, True) + "\n"), budget, doc["metadata"]["truncated"])
        finally:
            output.set_pretty(False)
    return lists, single, pretty


HEADER = ("| answers | outputs | over budget | utilization median | utilization p10 | truncated outputs "
          "| worst real/budget |\n|---|---|---|---|---|---|---|")


def time_cut(texts: dict[str, list[str]], size: int = 1_000_000, budget: int = 2000) -> float:
    """Median seconds of cutting ~1 MB of the corpora to `budget` tokens (was a wall-clock test assert)."""
    from gsd_research.core.tokens import cut_to_tokens

    whole = "\n\n".join(doc for docs in texts.values() for doc in docs)
    text = (whole * (size // max(len(whole), 1) + 1))[:size]
    runs = []
    for _ in range(3):
        started = time.perf_counter()
        cut_to_tokens(text, budget)
        runs.append(time.perf_counter() - started)
    return median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a third of each corpus")
    args = parser.parse_args()
    from gsd_research.core import tokens

    count = cl100k()
    started = time.monotonic()
    texts = corpora(args.quick)
    print(f"SAFETY = {tokens.SAFETY}; budgets {', '.join(map(str, BUDGETS))}\n")
    print("Estimator calibration (real cl100k / raw estimate, per document; 'under' = count_tokens below real):\n")
    print("| corpus | docs | min | median | p99 | max | under |\n|---|---|---|---|---|---|---|")
    for name, docs in texts.items():
        c = calibrate(count, docs)
        print(f"| {name} | {c['n']} | {c['min']:.4f} | {c['p50']:.4f} | {c['p99']:.4f} | {c['max']:.4f} "
              f"| {c['under']} |")
    print(f"\ncut_to_tokens of 1 MB to 2000 tokens: {time_cut(texts):.3f} s (median of 3)")
    print("\nPrinted answers (cl100k count of the whole stdout document):\n")
    print(HEADER)
    total = Tally()
    docs_tally = bench_docs(count)
    print(docs_tally.row("docs, fake Context7 catalogue (compact + pretty)"), flush=True)
    total.outputs, total.over = docs_tally.outputs, docs_tally.over
    for name, docs in texts.items():
        lists, single, pretty = bench_fit(count, docs)
        print(lists.row(f"{name}: fit_results, 10 per answer"))
        print(single.row(f"{name}: fit_text, one document"))
        print(pretty.row(f"{name}: fit_results, --json-pretty"), flush=True)
        for t in (lists, single, pretty):
            total.outputs += t.outputs
            total.over += t.over
    print(f"\nTotal: {total.outputs} printed answers, {total.over} over budget "
          f"({time.monotonic() - started:.0f} s)")
    return 1 if total.over else 0


if __name__ == "__main__":
    sys.exit(main())
