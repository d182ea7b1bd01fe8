"""Tokens a whole research session returns, with its session ledger and without it (`--fresh`).

    .venv/bin/python bench/session.py

A scripted session of about 40 calls on overlapping topics, run twice side by side against the fakes on
127.0.0.1 (each run its own GSD_RESEARCH_HOME, the real CLI in-process, --max-tokens 2000): two libraries with
six related `docs` questions each (FastAPI from the fake Context7's corpus ranking; the second library's
answers ranked the same way from another part of that corpus), `search` of related questions whose results
are AEB news pages, `fetch` of those pages (and again later, as an agent re-reads), `recall` of what was read,
one `deep` report. Prints both totals, the per-command split, and whether every passage the session-less run
returned is reachable in the session run (returned, or referenced and expanded with `gsd-research expand`).
Targets: at least 40 % fewer tokens, every passage reachable.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

from _common import cl100k, start_fake_server
from _pages import articles, english, page_url, serve

BUDGET = 2000
# Six related questions per library: one topic each, as a phase's research asks them.
FASTAPI_QUESTIONS = ("dependency injection", "dependencies with yield", "sub-dependencies",
                     "dependencies in path operation decorators", "global dependencies",
                     "testing dependencies with overrides")
SECOND_QUESTIONS = ("field validators", "model validators", "custom types validation", "validation errors",
                    "strict mode validation", "validators for nested models")
SEARCHES = ("election results analysis", "election campaign analysis", "election polls analysis")
RECALLS = ("election", "election campaign", "polls results")


def run(argv: list[str]) -> dict:
    from gsd_research.cli import cli
    from gsd_research.cli import run as run_cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = run_cli(cli, argv, "gsd-research", {})
    text = out.getvalue()
    if code != 0:
        raise SystemExit(f"{argv[:4]} failed ({code}): {text[:300]} {err.getvalue()[-300:]}")
    return {"text": text, "doc": json.loads(text)}


def second_library(query: str, pool: list[tuple[str, str]]) -> dict:
    """A Context7 answer for the second library: its pages ranked by the words they share with the query."""
    words = set(re.findall(r"\w+", query.lower()))
    ranked = sorted(pool, key=lambda p: -len(words & set(re.findall(r"\w+", p[1].lower()))))[:15]
    info = [{"pageId": f"https://github.com/pydantic/pydantic/blob/main/docs/{path}",
             "breadcrumb": path.replace("/", " > "), "content": re.sub(r"```.*?```", "", text, flags=re.S)[:6000],
             "contentTokens": 0} for path, text in ranked]
    return {"codeSnippets": [], "infoSnippets": info}


def script(fake, aeb_url: str, pages: list[str]) -> list[tuple[list[str], dict | None]]:
    """The session's calls in order: (argv, Context7 body to serve or None)."""
    from tests.fakes.context7 import SHARED

    folder = SHARED / "bench" / "corpora" / "fastapi-docs"
    pool = [(p.relative_to(folder).as_posix(), p.read_text(encoding="utf-8", errors="replace"))
            for p in sorted(folder.rglob("*.md"))[60:140]]
    calls: list[tuple[list[str], dict | None]] = []
    for question in FASTAPI_QUESTIONS:
        calls.append((["docs", "fastapi", question], None))
    for question in SECOND_QUESTIONS:
        calls.append((["docs", "pydantic", question], second_library(question, pool)))
    urls = [page_url(aeb_url, k) for k in pages]
    for i, query in enumerate(SEARCHES):
        calls.append((["search", query], None))
        for url in urls[i * 2: i * 2 + 4]:  # each search's top pages, overlapping the last search's
            calls.append((["fetch", url], None))
    for query in RECALLS:
        calls.append((["recall", query], None))
    calls.append((["deep", "how polls predicted the election results"], None))
    for url in urls[:4]:  # re-read while writing up
        calls.append((["fetch", url], None))
    for query in RECALLS[:2]:
        calls.append((["recall", query], None))
    for query in SEARCHES[:2]:
        calls.append((["search", query], None))
    return calls


def passages(doc: dict) -> tuple[list[tuple[str, bool]], list[str]]:
    """(passage text, whole?) of an answer and the references it gave."""
    out, refs = [], []
    for item in doc.get("results") or []:
        if "repeat" in item:
            refs.append(item["repeat"])
            continue
        text = item.get("content") or item.get("snippet") or ""
        if text:
            out.append((text, not item.get("truncated")))
    for key in ("summary", "content", "report"):
        if isinstance(doc.get(key), str) and doc[key]:
            out.append((doc[key], not doc["metadata"].get("truncated")))
    if isinstance(doc.get("metadata", {}).get("repeat"), dict):
        refs.append(doc["metadata"]["repeat"]["repeat"])
    return out, refs


def fold(text: str) -> str:
    return " ".join(text.split())


def session_run(name: str, fresh: bool, fake, aeb_url: str, pages: list[str], count) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"gsd-bench-session-{name}-"))
    (home / "config.yaml").write_text('memory:\n  embed: "off"\n')
    os.environ["GSD_RESEARCH_HOME"] = str(home)
    sid = f"bench-{name}"
    flags = ["--max-tokens", str(BUDGET), "--session", sid] + (["--fresh"] if fresh else [])
    per_command: dict[str, list[int]] = defaultdict(list)
    texts, refs = [], []
    try:
        for argv, body in script(fake, aeb_url, pages):
            fake.state["context7.body"] = body
            answer = run([*flags, *argv])
            per_command[argv[0]].append(count(answer["text"]))
            found, named = passages(answer["doc"])
            texts += found
            refs += named
        fake.state["context7.body"] = None
        answers = [run(["--session", sid, "--max-tokens", "60000", "expand", ref]) for ref in dict.fromkeys(refs)]
        expanded = [a["doc"]["content"] for a in answers]
        expand_tokens = sum(count(a["text"]) for a in answers)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {"per_command": per_command, "texts": texts, "expanded": expanded, "refs": len(set(refs)),
            "expand_tokens": expand_tokens}


def main() -> int:
    count = cl100k()
    server = start_fake_server("context7", "tavily", "pages", "perplexity")
    aeb_url, aeb_server = serve()
    for name in [k for k in os.environ if k.endswith(("_API_KEY", "_BASE_URL", "_API_URL"))]:
        del os.environ[name]
    os.environ.update(GSD_RESEARCH_ALLOW_HOSTS="127.0.0.1", OLLAMA_HOST="http://127.0.0.1:9",
                      CONTEXT7_API_URL=server.url + "/api", TAVILY_BASE_URL=server.url + "/tavily",
                      TAVILY_API_KEY="tvly-bench-session", PERPLEXITY_BASE_URL=server.url + "/perplexity",
                      PERPLEXITY_API_KEY="pplx-bench-session")
    os.environ.pop("GSD_RESEARCH_SESSION", None)
    chosen = [(k, v["articleBody"]) for k, v in sorted(articles().items())
              if english(v.get("articleBody") or "") and len(v["articleBody"]) > 3000][:8]
    server.state["tavily.results"] = [
        {"title": text.split(".")[0][:90], "url": page_url(aeb_url, k), "content": text[:1500],
         "score": 0.9 - i / 100} for i, (k, text) in enumerate(chosen)]
    pages = [k for k, _ in chosen]
    try:
        fresh = session_run("fresh", True, server, aeb_url, pages, count)
        with_session = session_run("session", False, server, aeb_url, pages, count)
    finally:
        server.stop()
        aeb_server.shutdown()
    report(fresh, with_session)
    return 0


def report(fresh: dict, with_session: dict) -> None:
    total_a = sum(sum(v) for v in fresh["per_command"].values())
    total_b = sum(sum(v) for v in with_session["per_command"].values())
    calls = sum(len(v) for v in fresh["per_command"].values())
    print(f"## Session economy: {calls} calls at --max-tokens {BUDGET} (cl100k tokens printed)\n")
    print("| command | calls | without session (--fresh) | with session | saved |")
    print("|---|---|---|---|---|")
    for name, values in fresh["per_command"].items():
        a, b = sum(values), sum(with_session["per_command"][name])
        print(f"| {name} | {len(values)} | {a} | {b} | {100 * (1 - b / a):.0f} % |")
    print(f"| **total** | {calls} | {total_a} | {total_b} | {100 * (1 - total_b / total_a):.1f} % |")
    seen = [fold(t) for t, _ in with_session["texts"]] + [fold(t) for t in with_session["expanded"]]
    digests = {hashlib.sha256(t.encode()).hexdigest() for t in seen}
    wanted = [fold(t) for t, _ in fresh["texts"]]
    missing = [t for t in wanted if hashlib.sha256(t.encode()).hexdigest() not in digests
               and not any(t in s for s in seen)]
    print(f"\npassages returned without the session: {len(wanted)}; reachable with it: {len(wanted) - len(missing)} "
          f"({with_session['refs']} references, all expanded; expanding every one would cost "
          f"{with_session['expand_tokens']} more tokens, not counted above)")
    saved = 1 - total_b / total_a
    print(f"saved {100 * saved:.1f} % (target >= 40 %); unreachable passages: {len(missing)} (target 0)")


if __name__ == "__main__":
    sys.exit(main())
