"""Extraction quality and context saving on the AEB pages, side by side in one run.

Quality: F1/precision/recall (AEB scoring of ../shared/README.md) and ms/page, on AEB split by site into a
tuning half and a held-out half (`aeb_split`: sites sorted by SHA-256 of their host name, whole sites
to the tuning half until it holds half of the pages; no site is in both), then on the whole set, of
  - gsd-research's extraction (`gsd_research.read.extract.extract`, Markdown output),
  - markdownify of the whole page,
  - trafilatura 2.x plain text (include_comments=False, the README's reference setting),
  - trafilatura 2.x Markdown output with the same settings.
Context saving (`--context`): every AEB page served on 127.0.0.1 and read with `gsd-research fetch`
(no model reachable: the labelled extractive summary; `--extract`: page 1 of the Markdown), answer
size counted with tiktoken cl100k against the raw page.

    TIKTOKEN_CACHE_DIR=/work/shared/tokenizers/tiktoken .venv/bin/python bench/extraction.py [--context] [--limit N] [--repeats N]

`--newspaper4k` also scores the same systems on newspaper4k's test pages (MIT; HTML and expected article
text from its PyPI source distribution, fetched once with pip into $EXTRACT_BENCH_DIR, then read offline).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GSD_SHARED_DIR", ROOT.parent / "shared"))
AEB = SHARED / "bench" / "aeb"
WORD = re.compile(r"\w+")


def shingles(text: str, n: int = 4) -> Counter:
    tokens = WORD.findall(text or "")
    return Counter(tuple(tokens[i:i + n]) for i in range(max(0, len(tokens) - n + 1)))


def page_match(true: str, pred: str) -> tuple[float, float, float]:
    """tp, fp, fn over 4-token shingle multisets, each divided by tp+fp+fn (AEB)."""
    a, b = shingles(true), shingles(pred)
    tp = sum((a & b).values())
    fp = sum((b - a).values())
    fn = sum((a - b).values())
    total = tp + fp + fn
    return (tp / total, fp / total, fn / total) if total else (0.0, 0.0, 0.0)


def score(rows: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    n = len(rows)
    tp = sum(r[0] for r in rows) / n
    fp = sum(r[1] for r in rows) / n
    fn = sum(r[2] for r in rows) / n
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return f1, precision, recall


def load_pages(limit: int | None = None) -> list[tuple[str, bytes, str]]:
    truth = json.loads((AEB / "ground-truth.json").read_text(encoding="utf-8"))
    pages = []
    for key in sorted(truth)[:limit]:
        html = gzip.decompress((AEB / "html" / f"{key}.html.gz").read_bytes())
        pages.append((key, html, truth[key].get("articleBody") or ""))
    return pages


def aeb_split() -> set[str]:
    """The page ids of the tuning half: whole sites, taken in the order of the SHA-256 of their host name,
    until half of the pages are in. The other half (held out) shares no site with it."""
    truth = json.loads((AEB / "ground-truth.json").read_text(encoding="utf-8"))
    sites: dict[str, list[str]] = {}
    for key, value in truth.items():
        host = urlparse(value.get("url") or "").netloc.lower().removeprefix("www.")
        sites.setdefault(host, []).append(key)
    tuning: set[str] = set()
    for host in sorted(sites, key=lambda h: hashlib.sha256(h.encode()).hexdigest()):
        if len(tuning) >= len(truth) // 2:
            break
        tuning.update(sites[host])
    return tuning


NEWSPAPER4K = "newspaper4k==0.9.6"
NEWSPAPER4K_SHA256 = "a3f2f0e017dddb6f1019ee77aaa8980e13e6ecea0b949abc7167aae4770d2d0e"


def newspaper4k_pages() -> list[tuple[str, bytes, str]]:
    """newspaper4k's test pages that come with an expected text: (name, html, text). Its sdist is fetched
    once with pip (the package registry) into $EXTRACT_BENCH_DIR and checked against a pinned SHA-256."""
    import subprocess
    import tarfile

    work = Path(os.environ.get("EXTRACT_BENCH_DIR", "/tmp/gsd-extract-bench"))
    work.mkdir(parents=True, exist_ok=True)
    archive = work / f"{NEWSPAPER4K.replace('==', '-')}.tar.gz"
    if not archive.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "-d", str(work), NEWSPAPER4K], check=True, capture_output=True)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != NEWSPAPER4K_SHA256:
        raise SystemExit(f"{archive} has SHA-256 {digest}, expected {NEWSPAPER4K_SHA256}")
    pages = []
    with tarfile.open(archive) as tar:
        members = {m.name.split("/tests/data/", 1)[-1]: m for m in tar.getmembers() if "/tests/data/" in m.name}
        for name in sorted(members):
            if name.startswith("txt/") and f"html/{name[4:-4]}.html" in members:
                html = tar.extractfile(members[f"html/{name[4:-4]}.html"]).read()
                text = tar.extractfile(members[name]).read().decode("utf-8")
                pages.append((name[4:-4], html, text))
    return pages


def _ours(html: bytes) -> str:
    from gsd_research.read.extract import extract

    return extract(html).markdown  # as fetch runs it, hidden-text scan included


def _markdownify(html: bytes) -> str:
    from markdownify import markdownify

    return markdownify(html.decode("utf-8", "replace"))


def _trafilatura(fmt: str):
    def run(html: bytes) -> str:
        import trafilatura

        return trafilatura.extract(html, output_format=fmt, include_comments=False) or ""

    return run


SYSTEMS = {
    "gsd-research extract (Markdown)": _ours,
    "trafilatura 2.x txt": _trafilatura("txt"),
    "trafilatura 2.x markdown": _trafilatura("markdown"),
    "markdownify (whole page)": _markdownify,
}


def run_systems(pages, repeats: int = 1) -> dict[str, dict[str, tuple[tuple[float, float, float], float]]]:
    """Every system on every page: {system: {page id: ((tp, fp, fn), seconds)}}. Systems interleaved per
    page (rotating order) so that load on the shared machine hits all of them alike; the best of
    `repeats` timings per page and system."""
    names = list(SYSTEMS)
    for fn in SYSTEMS.values():  # warm imports and caches outside the timing
        fn(pages[0][1])
    out: dict[str, dict] = {name: {} for name in names}
    for index, (key, html, truth) in enumerate(pages):
        order = names[index % len(names):] + names[:index % len(names)]
        for name in order:
            best = float("inf")
            for _ in range(repeats):
                started = time.perf_counter()
                text = SYSTEMS[name](html)
                best = min(best, time.perf_counter() - started)
            out[name][key] = (page_match(truth, text), best)
    return out


def report(title: str, results: dict, keys: list[str]) -> None:
    """One table: F1, P, R, ms/page and time relative to trafilatura txt over the pages `keys`."""
    print(f"\n{title}: {len(keys)} pages")
    print(f"{'system':34} {'F1':>6} {'P':>6} {'R':>6} {'ms/page':>8} {'time vs trafilatura':>20}")
    base = sum(results["trafilatura 2.x txt"][k][1] for k in keys)
    for name, per_page in results.items():
        f1, p, r = score([per_page[k][0] for k in keys])
        spent = sum(per_page[k][1] for k in keys)
        print(f"{name:34} {f1:6.4f} {p:6.4f} {r:6.4f} {1000 * spent / len(keys):8.1f} {spent / base:19.2f}x",
              flush=True)


def quality(pages, repeats: int = 1, extra: list | None = None) -> None:
    import trafilatura

    print(f"trafilatura {trafilatura.__version__}, best of {repeats} timings per page and system")
    results = run_systems(pages, repeats)
    tuning = aeb_split()
    keys = [key for key, _, _ in pages]
    report("AEB held-out half (sites never looked at while tuning)", results, [k for k in keys if k not in tuning])
    report("AEB tuning half", results, [k for k in keys if k in tuning])
    report("AEB whole", results, keys)
    if extra:
        report("newspaper4k test pages (expected text = newspaper's own output)", run_systems(extra, repeats),
               [key for key, _, _ in extra])


def context(pages, max_tokens: int) -> None:
    """Serve the pages locally and read each with `gsd-research fetch`; answer size vs the raw page."""
    import tiktoken
    from tests.fakes.server import FakeServer, Reply

    enc = tiktoken.get_encoding("cl100k_base")
    server = FakeServer()
    by_key = {key: html for key, html, _ in pages}

    @server.route("GET", r"/aeb/(\w+)")
    def page(req):
        return Reply(200, by_key[req.path.rsplit("/", 1)[1]], content_type="text/html; charset=utf-8")

    server.start()
    os.environ.update({"GSD_RESEARCH_ALLOW_HOSTS": "127.0.0.1", "OLLAMA_HOST": server.url + "/no-ollama"})
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENAI_API_KEY"):
        os.environ.pop(var, None)
    try:
        for mode in ("summary", "extract"):
            ratios, worst, over, failed, elapsed = [], 0, 0, 0, 0.0
            for key, html, _ in pages:
                args = ["--max-tokens", str(max_tokens), "fetch", f"{server.url}/aeb/{key}"]
                started = time.perf_counter()
                code, out = _run_cli(args + (["--extract"] if mode == "extract" else []))
                elapsed += time.perf_counter() - started
                if code != 0:
                    failed += 1
                    continue
                answer = len(enc.encode(out.strip()))
                raw = len(enc.encode(html.decode("utf-8", "replace"), disallowed_special=()))
                worst, over = max(worst, answer), over + (answer > max_tokens)
                ratios.append(raw / answer)
            print(f"fetch ({mode}, --max-tokens {max_tokens}): pages {len(pages)}, answered {len(ratios)}, "
                  f"failed {failed}, over budget {over}, largest answer {worst} cl100k tokens, "
                  f"median raw/answer {statistics.median(ratios):.1f}x, "
                  f"{1000 * elapsed / len(pages):.0f} ms/page (in-process)", flush=True)
    finally:
        server.stop()


def _run_cli(args: list[str]) -> tuple[int, str]:
    import io
    from contextlib import redirect_stdout

    from gsd_research.cli import cli, run

    out = io.StringIO()
    with redirect_stdout(out):
        code = run(cli, args, "gsd-research", {})
    return code, out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--context", action="store_true", help="also run the fetch context-saving report")
    parser.add_argument("--only-context", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="timings per page and system (best counts)")
    parser.add_argument("--newspaper4k", action="store_true", help="also score newspaper4k's test pages")
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tokenizers" / "tiktoken"))
    sys.path.insert(0, str(ROOT))
    pages = load_pages(args.limit)
    if not args.only_context:
        quality(pages, args.repeats, newspaper4k_pages() if args.newspaper4k else None)
    if args.context or args.only_context:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            os.environ["GSD_RESEARCH_HOME"] = tmp
            context(pages, args.max_tokens)


if __name__ == "__main__":
    main()
