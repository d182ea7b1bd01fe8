"""What the untrusted-text fence costs: the share of an answer's cl100k tokens spent on fence markers and notice.

    .venv/bin/python bench/fence_share.py [--quick]

Runs the real CLI in-process at --max-tokens 2000 against the fakes on 127.0.0.1: `docs` over the fake
Context7 catalogue, `search` (fake Tavily: its generated results, and results carrying AEB article text),
`fetch` (extractive summary and --extract) of the AEB pages and the fake site's pages, then `recall` over what
those fetches kept (memory on, embedding off). Share = 1 - tokens(answer without its fence) / tokens(answer),
where the fence is every `untrusted` / `untrusted_end` key with its value and every per-passage marker
(`[UNTRUSTED TEXT…]\\n`, `\\n[END UNTRUSTED TEXT]`), so a checkout of either design is measured the same way
(point PYTHONPATH at an exported older `lib` to measure it). Target: at most 8 % per answer.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from _common import cl100k, median, pct, start_fake_server
from _pages import articles, english, page_url, serve

BUDGET = 2000
LIBRARIES = ("react", "nextjs", "fastapi", "/tiangolo/fastapi")
QUERIES = ("useEffect cleanup", "app router setup", "dependency injection", "request body validation",
           "background tasks", "testing with pytest")
FAKE_PAGES = ("/pages/article", "/pages/injection", "/pages/notes.txt", "/pages/huge")
# The fence as printed: its keys with their values, and the markers of a per-passage fence (JSON-escaped).
_FENCE = re.compile(r'"untrusted(?:_end)?":"(?:[^"\\]|\\.)*",?|'
                    r'\[UNTRUSTED TEXT(?::[^\]"]*)?\]\\n|\\n\[END UNTRUSTED TEXT\]')


def run(argv: list[str]) -> str:
    from gsd_research.cli import cli
    from gsd_research.cli import run as run_cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = run_cli(cli, ["--max-tokens", str(BUDGET), *argv], "gsd-research", {})
    if code != 0:
        raise SystemExit(f"{argv[:3]} failed ({code}): {out.getvalue()[:300]}")
    return out.getvalue()


def share(count, printed: str) -> tuple[float, int]:
    total = count(printed)
    return 1 - count(_FENCE.sub("", printed)) / total, total


def aeb_pages(limit: int) -> list[tuple[str, str]]:
    """(id, article text) of English AEB pages with enough text to fill a budget."""
    chosen = [(k, v["articleBody"]) for k, v in sorted(articles().items())
              if english(v.get("articleBody") or "") and len(v["articleBody"]) > 3000]
    return chosen[:limit]


def commands(fake_url: str, aeb_url: str, pages: list[tuple[str, str]], server) -> dict[str, list[list[str]]]:
    runs: dict[str, list[list[str]]] = {"docs": [["docs", lib, q] for lib in LIBRARIES for q in QUERIES]}
    runs["fetch"] = [["fetch", page_url(aeb_url, k)] for k, _ in pages] + \
                    [["fetch", page_url(aeb_url, k), "--extract"] for k, _ in pages] + \
                    [["fetch", fake_url + p] for p in FAKE_PAGES] + [["fetch", fake_url + p, "--extract"] for p in FAKE_PAGES]
    runs["search"] = [["search", q] for q in QUERIES]
    runs["recall"] = [["recall", " ".join(text.split()[:6])] for _, text in pages]
    return runs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer AEB pages")
    args = parser.parse_args()
    count = cl100k()
    home = Path(tempfile.mkdtemp(prefix="gsd-bench-fence-"))
    (home / "config.yaml").write_text('memory:\n  embed: "off"\n')
    server = start_fake_server("context7", "tavily", "pages")
    aeb_url, aeb_server = serve()
    for name in [k for k in os.environ if k.endswith(("_API_KEY", "_BASE_URL", "_API_URL"))]:
        del os.environ[name]
    os.environ.update(GSD_RESEARCH_HOME=str(home), GSD_RESEARCH_ALLOW_HOSTS="127.0.0.1",
                      OLLAMA_HOST="http://127.0.0.1:9", CONTEXT7_API_URL=server.url + "/api",
                      TAVILY_BASE_URL=server.url + "/tavily", TAVILY_API_KEY="tvly-bench-fence")
    pages = aeb_pages(6 if args.quick else 20)
    rows = {}
    try:
        runs = commands(server.url, aeb_url, pages, server)
        for name in ("docs", "fetch", "search", "recall"):
            figures = []
            argvs = runs[name]
            if name == "search":  # generated results, then AEB article text as the results' content
                figures += [share(count, run(a)) for a in argvs]
                server.state["tavily.results"] = [
                    {"title": text.split(".")[0][:90], "url": page_url("https://aeb.example", k), "content": text[:4000],
                     "score": 0.9 - i / 100} for i, (k, text) in enumerate(pages)]
                argvs = [["search", q, "--no-cache"] for q in QUERIES[:3]]
            figures += [share(count, run(a)) for a in argvs]
            rows[name] = figures
    finally:
        server.stop()
        aeb_server.shutdown()
    print(f"## Fence share at --max-tokens {BUDGET} (cl100k tokens of fence markers + notice / answer)\n")
    print("| command | answers | median answer tokens | share median | share p90 | share max |")
    print("|---|---|---|---|---|---|")
    for name, figures in rows.items():
        shares = [s for s, _ in figures]
        print(f"| {name} | {len(figures)} | {median([t for _, t in figures]):.0f} | {100 * median(shares):.1f} % "
              f"| {100 * pct(shares, 0.9):.1f} % | {100 * max(shares):.1f} % |")
    worst = max(s for figures in rows.values() for s, _ in figures)
    print(f"\nworst answer: {100 * worst:.1f} % (target <= 8 %)")
    print(json.dumps({k: round(100 * max(s for s, _ in v), 2) for k, v in rows.items()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
