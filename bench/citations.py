"""Citation checks: `gsd-research verify` on research files citing AEB news pages served on 127.0.0.1.

Claims are built from each page's hand-checked article text (ground truth), each cited to a page:
- quotes: true (a span of a sentence), altered (one number, one name or the negation changed), and taken
  from another page; verify must flag altered and foreign quotes (verdict other than quote_found);
- unquoted claims: synthetic paraphrases of a sentence (words dropped, synonyms swapped), the same with a
  number, a name or the negation changed, two sentences of the page spliced into one claim (half of each),
  and a paraphrase of another page's sentence; verify should call only the first supported.
No model is configured (`--no-llm`, and no backend reachable). Pages are split by id: the support threshold
is tuned on the dev half only; the held-out half is reported as well.

Usage: python bench/citations.py [--pages 80] [--sweep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED  # noqa: E402
from _pages import articles, english, page_url, serve  # noqa: E402

BIN = Path(sys.executable).parent
AUX = r"\b(is|was|are|were|has|have|had|will|can|could|would|should|does|did|do|may|might|must)\b"
SYNONYMS = {"said": "stated", "says": "states", "big": "large", "large": "big", "small": "little", "buy": "purchase",
            "bought": "purchased", "start": "begin", "started": "began", "help": "assist", "show": "reveal",
            "showed": "revealed", "shows": "reveals", "people": "persons", "about": "around", "also": "as well",
            "government": "administration", "company": "firm", "companies": "firms", "rise": "increase",
            "rose": "increased", "fell": "dropped", "new": "fresh", "first": "initial", "major": "significant",
            "important": "significant", "more than": "over", "announced": "declared", "plan": "scheme",
            "plans": "schemes", "told": "informed", "use": "employ", "used": "employed", "quickly": "rapidly",
            "need": "require", "needs": "requires", "because": "since", "however": "but", "many": "numerous",
            "get": "obtain", "got": "obtained", "make": "create", "made": "created", "week": "seven days"}
STOP = set("a an the of to in on for and or but with by at from as is was are were be been it its that this".split())
NAME_STOP = {"The", "A", "An", "In", "On", "At", "For", "And", "But", "It", "He", "She", "They", "We", "I", "This",
             "That", "There", "His", "Her", "Their", "Our", "Its", "If", "When", "While", "As", "Mr", "Mrs", "Ms"}


def sentences(body: str) -> list[str]:
    out = []
    for s in re.split(r"(?<=[.!?])\s+|\n+", body):
        s = s.strip()
        if 8 <= len(s.split()) <= 40 and not re.search(r"[\"“”]", s) and re.search(r"[a-z]", s):
            out.append(s)
    return out


def span(rng: random.Random, sentence: str) -> str:
    words = sentence.split()
    n = rng.randint(6, min(18, len(words)))
    start = rng.randint(0, len(words) - n)
    return " ".join(words[start:start + n]).strip(" ,;:.")


def alter_number(rng: random.Random, text: str) -> str | None:
    numbers = list(re.finditer(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.]\d)", text))
    if not numbers:
        return None
    m = rng.choice(numbers)
    value = m.group(0)
    if "." in value:
        new = value[:-1] + str((int(value[-1]) + rng.randint(1, 8)) % 10)
    else:
        new = str(int(value) + rng.choice([1, 2, 3, 5, 10])) if int(value) < 1000 else str(int(value) * 2)
    return text[: m.start()] + new + text[m.end():]


def alter_name(rng: random.Random, text: str, pool: list[str]) -> str | None:
    words = text.split()
    spots = [i for i, w in enumerate(words) if i > 0 and re.fullmatch(r"[A-Z][a-z]{2,}", w) and w not in NAME_STOP]
    if not spots:
        return None
    i = rng.choice(spots)
    other = rng.choice([p for p in pool if p != words[i]])
    return " ".join(words[:i] + [other] + words[i + 1:])


def alter_negation(text: str) -> str | None:
    if re.search(r"\bnot\b", text):
        return re.sub(r"\bnot\s+", "", text, count=1)
    if re.search(r"n't\b", text):
        return re.sub(r"(\w+)n't\b", lambda m: {"wo": "will", "ca": "can"}.get(m.group(1), m.group(1)), text, count=1)
    if re.search(r"\bnever\b", text):
        return re.sub(r"\bnever\b", "always", text, count=1)
    if re.search(AUX, text):
        return re.sub(AUX, r"\1 not", text, count=1)
    return None


def paraphrase(rng: random.Random, sentence: str) -> str:
    """Synonyms swapped where the table has one, a few other words dropped (a synthetic paraphrase)."""
    text = sentence
    for word, synonym in SYNONYMS.items():
        text = re.sub(rf"\b{re.escape(word)}\b", synonym, text)
    words = text.split()
    droppable = [i for i, w in enumerate(words) if w.lower().strip(",.") not in STOP and not re.search(r"\d", w)]
    drop = set(rng.sample(droppable, k=min(len(droppable) // 6, 3))) if droppable else set()
    return " ".join(w for i, w in enumerate(words) if i not in drop).rstrip(",;:").rstrip(".") + "."


def stream(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def build(pages: list[str], bodies: dict[str, str], base: str, seed: int = 16) -> list[dict]:
    """Claims per page: {page, kind, text, quote?} with the citation marker left to the writer."""
    rng = random.Random(seed)
    pool = sorted({w for pid in pages for w in re.findall(r"\b[A-Z][a-z]{3,}\b", bodies[pid])} - NAME_STOP)
    claims = []
    for pid in pages:
        own, body = sentences(bodies[pid]), stream(bodies[pid])
        others = [p for p in pages if p != pid]
        foreign = sentences(bodies[rng.choice(others)])
        if len(own) < 4 or not foreign:
            continue
        picks = rng.sample(own, 4)
        quotes = [("quote_true", span(rng, picks[0])), ("quote_true", span(rng, picks[1]))]
        for kind, changed in (("quote_number", alter_number(rng, span(rng, picks[2]))),
                              ("quote_name", alter_name(rng, span(rng, picks[3]), pool)),
                              ("quote_negation", alter_negation(span(rng, picks[2]))),
                              ("quote_other_page", span(rng, rng.choice(foreign)))):
            if changed and stream(changed) not in body:  # a change that is really not in the page
                quotes.append((kind, changed))
        para = [("para_true", paraphrase(rng, picks[0])), ("para_true", paraphrase(rng, picks[3])),
                ("para_other_page", paraphrase(rng, rng.choice(foreign)))]
        first, second = picks[1].split(), picks[2].split()  # two facts of the page spliced into one claim
        splice = " ".join(first[: len(first) // 2] + second[len(second) // 2:])
        for kind, changed in (("para_splice", paraphrase(rng, splice)),
                              ("para_number", alter_number(rng, paraphrase(rng, picks[2]))),
                              ("para_name", alter_name(rng, paraphrase(rng, picks[1]), pool)),
                              ("para_negation", alter_negation(paraphrase(rng, picks[1])))):
            if changed:
                para.append((kind, changed))
        claims += [{"page": pid, "kind": k, "quote": q, "url": page_url(base, pid)} for k, q in quotes]
        claims += [{"page": pid, "kind": k, "text": t, "url": page_url(base, pid)} for k, t in para]
    return claims


def write_files(claims: list[dict], folder: Path) -> list[Path]:
    """One research file per page, one claim per line, citation styles rotating ([CITED], [n], a link)."""
    files = []
    by_page: dict[str, list[dict]] = {}
    for c in claims:
        by_page.setdefault(c["page"], []).append(c)
    for n, (pid, items) in enumerate(sorted(by_page.items())):
        lines = [f"# Research notes {n}", ""]
        for i, c in enumerate(items):
            text = f'The article reports that "{c["quote"]}"' if "quote" in c else c["text"].rstrip(".")
            style = (n + i) % 3
            cite = (f" [CITED: {c['url']}]." if style == 0 else " [1]." if style == 1
                    else f" ([source]({c['url']})).")
            c["line"] = len(lines) + 1
            lines += [f"- {text}{cite}"]
        lines += ["", "## Sources", "", f"1. Article {pid[:8]}: {items[0]['url']}", ""]
        path = folder / f"research-{n:03d}.md"
        path.write_text("\n".join(lines), encoding="utf-8")
        c_file = str(path)
        for c in items:
            c["file"] = c_file
        files.append(path)
    return files


def run_verify(files: list[Path], env: dict) -> tuple[dict[tuple[str, int], dict], float, list[float], list[float]]:
    """(file, line) -> claim result; total seconds; per file: wall ms per claim, verify's own ms per claim."""
    results, per_claim, inner = {}, [], []
    started = time.perf_counter()
    for path in files:
        t0 = time.perf_counter()
        proc = subprocess.run([str(BIN / "gsd-research"), "verify", str(path), "--no-llm", "--max-tokens", "200000"],
                              capture_output=True, text=True, env=env)
        doc = json.loads(proc.stdout)
        if not doc.get("success"):
            raise SystemExit(f"verify failed on {path}: {proc.stdout[:500]}")
        per_claim.append(1000 * (time.perf_counter() - t0) / max(1, len(doc["claims"])))
        inner.append(doc["metadata"].get("per_claim_ms", 0.0))
        for claim in doc["claims"]:
            results[(str(path), claim["line"])] = claim
    return results, time.perf_counter() - started, per_claim, inner


# -- figures -------------------------------------------------------------------------------------------

def is_dev(page: str) -> bool:
    return int(hashlib.sha256(page.encode()).hexdigest()[0], 16) < 8


def quote_figures(claims: list[dict]) -> dict:
    quotes = [c for c in claims if "quote" in c and c.get("result")]
    flagged = [c for c in quotes if c["result"]["verdict"] != "quote_found"]
    altered = [c for c in quotes if c["kind"] != "quote_true"]
    tp = sum(c["kind"] != "quote_true" for c in flagged)
    kinds = sorted({c["kind"] for c in quotes})
    return {"quotes": len(quotes), "altered_or_foreign": len(altered), "flagged": len(flagged),
            "recall": round(tp / max(1, len(altered)), 4), "precision": round(tp / max(1, len(flagged)), 4),
            "flagged_rate_by_kind": {k: round(sum(c["result"]["verdict"] != "quote_found" for c in quotes
                                                  if c["kind"] == k) / max(1, sum(c["kind"] == k for c in quotes)), 4)
                                     for k in kinds},
            "methods_of_found_true_quotes": _count(c["result"].get("method") for c in quotes
                                                   if c["kind"] == "quote_true" and c not in flagged),
            "where_found": _count((c["result"].get("position") or {}).get("in") for c in quotes if c not in flagged)}


def supported_at(result: dict, threshold: float) -> bool:
    if result["verdict"] not in ("supported", "related", "not_found"):
        return False
    other = [r for r in result.get("reasons", []) if not r.startswith("only ")]
    return result.get("coverage", 0) >= threshold and not other


def para_figures(claims: list[dict], threshold: float) -> dict:
    paras = [c for c in claims if "text" in c and c.get("result")]
    kinds = sorted({c["kind"] for c in paras})
    rates = {k: round(sum(supported_at(c["result"], threshold) for c in paras if c["kind"] == k)
                      / max(1, sum(c["kind"] == k for c in paras)), 4) for k in kinds}
    wrong = [c for c in paras if c["kind"] != "para_true"]
    false_rate = sum(supported_at(c["result"], threshold) for c in wrong) / max(1, len(wrong))
    return {"claims": len(paras), "threshold": threshold, "supported_rate_by_kind": rates,
            "balanced_accuracy": round((rates.get("para_true", 0) + 1 - false_rate) / 2, 4)}


def sweep(claims: list[dict]) -> tuple[float, list[dict]]:
    table = [para_figures(claims, t / 100) for t in range(40, 100, 5)]
    best = max(table, key=lambda row: (row["balanced_accuracy"], row["threshold"]))
    return best["threshold"], [{"threshold": r["threshold"], "balanced_accuracy": r["balanced_accuracy"],
                                **r["supported_rate_by_kind"]} for r in table]


def _median(values: list[float]) -> float:
    return round(sorted(values)[len(values) // 2], 1) if values else 0.0


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def bench_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_API_URL"))}
    env.update({"GSD_RESEARCH_HOME": str(home), "GSD_RESEARCH_ALLOW_HOSTS": "127.0.0.1",
                "OLLAMA_HOST": "http://127.0.0.1:9", "TIKTOKEN_CACHE_DIR": str(SHARED / "tokenizers" / "tiktoken")})
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text('memory:\n  embed: "off"\n')
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=80)
    parser.add_argument("--sweep", action="store_true", help="print the threshold table of both halves")
    args = parser.parse_args()
    data = articles()
    eligible = sorted(k for k, v in data.items() if 1500 < len(v["articleBody"]) < 15000 and english(v["articleBody"]))
    random.Random(7).shuffle(eligible)
    pages = eligible[: args.pages]
    bodies = {k: data[k]["articleBody"] for k in pages}
    base, server = serve()
    work = Path(tempfile.mkdtemp(prefix="bench-citations-"))
    try:
        env = bench_env(work / "home")
        claims = build(pages, bodies, base)
        files = write_files(claims, work)
        cold, cold_s, cold_per, cold_inner = run_verify(files, env)
        warm, warm_s, warm_per, warm_inner = run_verify(files, env)
    finally:
        server.shutdown()
    for c in claims:
        c["result"] = cold.get((c["file"], c["line"]))
    dev = [c for c in claims if is_dev(c["page"])]
    held = [c for c in claims if not is_dev(c["page"])]
    threshold, table = sweep(dev)
    from gsd_research.verify.support import COVERAGE

    n = len([c for c in claims if c.get("result")])
    figures = {
        "pages": len(pages), "claims": len(claims), "claims_checked": n,
        "quotes": {"all": quote_figures(claims), "dev": quote_figures(dev), "held_out": quote_figures(held)},
        "paraphrases": {"threshold_tuned_on_dev": threshold, "threshold_in_code": COVERAGE,
                        "dev": para_figures(dev, COVERAGE), "held_out": para_figures(held, COVERAGE)},
        "latency": {"files": len(files), "cold_total_s": round(cold_s, 2), "warm_total_s": round(warm_s, 2),
                    "cold_wall_ms_per_claim_median": _median(cold_per), "warm_wall_ms_per_claim_median": _median(warm_per),
                    "cold_in_process_ms_per_claim_median": _median(cold_inner),
                    "warm_in_process_ms_per_claim_median": _median(warm_inner),
                    "note": "wall: verify process time per file / its claims (start-up, imports, reading the "
                            "source included); in process: verify's own per-claim time (metadata.per_claim_ms)"},
        "verdicts_warm_equal_cold": sum((warm.get(k) or {}).get("verdict") == v["verdict"] for k, v in cold.items()),
    }
    if args.sweep:
        figures["sweep_dev"] = table
        figures["sweep_held_out"] = sweep(held)[1]
    missed = [c for c in claims if c.get("result") and c["kind"] == "quote_true" and c["result"]["verdict"] != "quote_found"]
    figures["true_quotes_flagged_examples"] = [{"quote": c["quote"][:120], "verdict": c["result"]["verdict"],
                                                "similarity": c["result"].get("similarity")} for c in missed[:5]]
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
