"""Can an agent trust what `researcher search` answers? Measured on documents the ranking was not tuned on.

Usage: python bench/kb_trust.py [--plants N] [--seed S] [--corpus docs|packages] [--science N]
Work files go to $KB_BENCH_DIR/trust (default /tmp/gsd-kb-bench/trust); nothing is written into the repository.

Corpus: the fastapi-docs pages and docling's mixed-formats samples (Markdown, HTML, DOCX, PDF, PPTX, XLSX) in
one repository `docs`, with made-up identifiers and error messages planted in single documents (a random
paragraph of a random Markdown, HTML or DOCX document, seeded); two unrelated repositories beside it:
`cooking` (recipe notes written for this benchmark) and `news` (60 real news articles from the AEB corpus); with
--science N a third, `science`: N SciFact abstracts drawn with the seed (text of another kind again, for a
held-out check of the repository gate).

(a) every planted string is searched over all three repositories, in the forms fixed below; the planted
    document must rank first. (b) every fastapi page's title is asked as an on-topic question; no document of
    unrelated repository (`cooking`, `news`, `science`; reported apart) may be in the top 5. (c) every stored fragment must be a
    contiguous slice of its document's text (modulo whitespace inside a line): the Markdown file itself, or
    the Markdown docling exports for other formats; the previous chunker is measured on the same documents
    side by side. (d) every `researcher search --json` answer (single queries as processes at several
    budgets, and every line of the --queries-file runs) is within --max-tokens by tiktoken's cl100k.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import cl100k  # noqa: E402
from kb_indexing import BIN, SHARED, WORK, bench_env  # noqa: E402

FASTAPI = SHARED / "bench" / "corpora" / "fastapi-docs"
MIXED = SHARED / "bench" / "corpora" / "mixed-formats"
AEB = SHARED / "bench" / "aeb" / "ground-truth.json"
SCIFACT_CORPUS = SHARED / "bench" / "scifact" / "corpus.jsonl.gz"
TRUST = WORK / "trust"
OLD_CHUNKER = "f61bf9c"  # the chunker before fragments became slices, measured side by side in (c)

SYLLABLES = ["vor", "nax", "drel", "quib", "zan", "tor", "plix", "mur", "kest", "yon", "fral", "sib", "grom",
             "vex", "lun", "dax", "ober", "tik", "wum", "hesp"]
REAL_NOUNS = ["lease", "queue", "buffer", "ledger", "socket", "worker", "snapshot", "cursor", "shard", "token"]
REAL_TAILS = ["expired before the flush", "was rejected by the peer", "could not be drained", "overflowed during sync",
              "went stale after the retry", "was sealed while still in use"]
CONTEXTS = ["If the logs show {s}, restart the service and try again.",
            "Older releases reported {s} in this situation.",
            "Some users have seen {s} here; it is harmless.",
            "In that case the process exits with {s}.",
            "See the changelog entry mentioning {s} for the details.",
            "Watch out for {s} when this happens in production."]
COOKING = {
    "sourdough.md": "# Sourdough bread\n\nFeed the starter the night before. Mix flour, water and salt, rest the dough "
                    "for an hour, fold it four times, shape it and proof it overnight in the fridge. Bake at 250 "
                    "degrees with steam for twenty minutes, then lower the heat until the crust is deep brown.\n",
    "tomato-soup.md": "# Tomato soup\n\nRoast tomatoes, onions and garlic until soft. Blend them with vegetable "
                      "stock, a little cream and fresh basil; season with salt and pepper and serve hot.\n",
    "pasta.md": "# Fresh pasta\n\nKnead eggs and flour into a smooth dough, wrap it and let it rest. Roll it thin, "
                "cut ribbons and cook them for two minutes in salted boiling water.\n",
    "curry.md": "# Chickpea curry\n\nFry onions, ginger and spices, add chickpeas, tomatoes and coconut milk, simmer "
                "for twenty minutes and serve with rice and coriander.\n",
    "lemon-cake.md": "# Lemon cake\n\nBeat butter and sugar until pale, add eggs one by one, then lemon zest and "
                     "flour. Bake for forty minutes and glaze with lemon syrup while warm.\n",
    "salad.md": "# Green salad\n\nWash and dry the leaves well, dress them with olive oil, vinegar, mustard and a "
                "pinch of salt just before serving.\n",
    "risotto.md": "# Mushroom risotto\n\nToast the rice in butter, add wine, then hot stock a ladle at a time while "
                  "stirring. Fold in fried mushrooms and parmesan at the end.\n",
    "pancakes.md": "# Pancakes\n\nWhisk flour, milk, eggs and a pinch of sugar into a smooth batter, rest it for "
                   "half an hour and fry thin pancakes in a hot buttered pan.\n",
}
FORMS = ("identifier alone", "identifier in a question", "error message alone", "error message quoted in a question")
EXTRA_FORM = "error message in a question, unquoted"


def made_up_word(rng: random.Random, parts: int = 2) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts))


def identifier(rng: random.Random, i: int) -> str:
    w = [made_up_word(rng) for _ in range(3)]
    styles = [f"ERR_{w[0].upper()}_{rng.randint(1000, 9999)}", f"{w[0]}_{w[1]}_{w[2]}",
              f"{w[0]}{w[1].capitalize()}{w[2].capitalize()}", f"{w[0]}.{w[1]}.{w[2].capitalize()}",
              f"{w[0][:2].upper()}-{rng.randint(1000, 9999)}", f"--{w[0]}-{w[1]}"]
    return styles[i % len(styles)]


def error_message(rng: random.Random) -> str:
    return f"{made_up_word(rng)} {rng.choice(REAL_NOUNS)} {rng.choice(REAL_TAILS)}"


# -- the corpus -----------------------------------------------------------------------------------------

def _plant_text(text: str, sentence: str, rng: random.Random) -> str | None:
    """`sentence` appended to a random prose paragraph of Markdown text."""
    paras = text.split("\n\n")
    prose = [i for i, p in enumerate(paras) if len(p) > 80 and not p.lstrip().startswith(("```", "{", "|", "#", "<", "!!!", "///"))
             and "```" not in p]
    if not prose:
        return None
    i = rng.choice(prose)
    paras[i] = paras[i].rstrip() + " " + sentence
    return "\n\n".join(paras)


def _plant_html(path: Path, sentence: str, rng: random.Random) -> bool:
    html = path.read_text(encoding="utf-8", errors="replace")
    ends = [m.end() for m in re.finditer(r"</p>", html, re.I)]
    if not ends:
        return False
    at = rng.choice(ends)
    path.write_text(html[:at] + f"\n<p>{sentence}</p>" + html[at:], encoding="utf-8")
    return True


def _plant_docx(path: Path, sentence: str, rng: random.Random) -> bool:
    import docx

    try:
        document = docx.Document(str(path))
    except Exception:  # noqa: BLE001 - a sample python-docx cannot open (Strict OOXML): not planted
        return False
    paras = [p for p in document.paragraphs if len(p.text) > 40]
    if not paras:
        return False
    rng.choice(paras).add_run(" " + sentence)
    document.save(str(path))
    return True


def _plant(path: Path, sentence: str, rng: random.Random) -> bool:
    if path.suffix == ".md":
        planted = _plant_text(path.read_text(encoding="utf-8"), sentence, rng)
        if planted is not None:
            path.write_text(planted, encoding="utf-8")
        return planted is not None
    if path.suffix == ".html":
        return _plant_html(path, sentence, rng)
    return path.suffix == ".docx" and _plant_docx(path, sentence, rng)


def package_descriptions() -> dict[str, tuple[str, str]]:
    """name -> (summary, Markdown long description) of the Python distributions installed beside this script's
    interpreter: real project READMEs, never seen while the ranking was written (the held-out corpus)."""
    import email.parser
    import importlib.metadata

    out = {}
    for dist in importlib.metadata.distributions():
        meta = dist.read_text("METADATA") or ""
        message = email.parser.Parser().parsestr(meta)
        kind = (message.get("Description-Content-Type") or "").split(";")[0].strip()
        body = message.get_payload() or message.get("Description") or ""
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", message.get("Name") or "")
        if kind == "text/markdown" and len(body) > 1500 and name and message.get("Summary") and name != "gsd-research":
            out[name.lower()] = (message["Summary"].strip(), body)
    return dict(sorted(out.items()))


def _science(n: int, seed: int) -> None:
    """N SciFact abstracts, drawn with the seed, as the `science` repository."""
    with gzip.open(SCIFACT_CORPUS, "rt", encoding="utf-8") as fh:
        abstracts = [json.loads(line) for line in fh]
    (TRUST / "science").mkdir(parents=True, exist_ok=True)
    for doc in random.Random(f"science-{seed}").sample(abstracts, n):
        (TRUST / "science" / f"{doc['_id']}.md").write_text(f"# {doc['title']}\n\n{doc['text']}\n", encoding="utf-8")


def build_corpus(n_plants: int, seed: int, corpus: str = "docs", science: int = 0) -> list[dict]:
    """Fresh copies of the corpora under TRUST with the planted strings; returns the plants."""
    shutil.rmtree(TRUST, ignore_errors=True)
    docs = TRUST / "docs"
    if corpus == "packages":
        for name, (_, body) in package_descriptions().items():
            (docs / "packages").mkdir(parents=True, exist_ok=True)
            (docs / "packages" / f"{name}.md").write_text(body, encoding="utf-8")
    else:
        shutil.copytree(FASTAPI, docs / "fastapi")
        shutil.copytree(MIXED, docs / "mixed")
    for rel, text in COOKING.items():
        (TRUST / "cooking" / rel).parent.mkdir(parents=True, exist_ok=True)
        (TRUST / "cooking" / rel).write_text(text, encoding="utf-8")
    articles = json.loads(AEB.read_text(encoding="utf-8"))
    for key, value in sorted(articles.items())[:60]:
        body = (value.get("articleBody") or "").strip()
        if body:
            (TRUST / "news").mkdir(parents=True, exist_ok=True)
            slug = [s for s in str(value.get("url") or "").rstrip("/").split("/") if s][-1:] or [key[:12]]
            title = re.sub(r"[-_]+", " ", re.sub(r"\.\w+$", "", slug[0]))
            (TRUST / "news" / f"{key[:16]}.md").write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    if science:
        _science(science, seed)
    rng = random.Random(seed)
    candidates = sorted(p for p in docs.rglob("*") if p.suffix in (".md", ".html", ".docx"))
    rng.shuffle(candidates)
    plants: list[dict] = []
    for path in candidates:
        if len(plants) >= n_plants:
            break
        i = len(plants)
        kind = "identifier" if i % 2 == 0 else "error"
        value = identifier(rng, i // 2) if kind == "identifier" else error_message(rng)
        shown = value if kind == "identifier" else f"the error '{value}'"
        if _plant(path, rng.choice(CONTEXTS).format(s=shown), rng):
            plants.append({"kind": kind, "value": value, "document": path.relative_to(docs).as_posix()})
    return plants


def queries_of(plant: dict) -> list[tuple[str, str]]:
    v = plant["value"]
    if plant["kind"] == "identifier":
        return [(FORMS[0], v), (FORMS[1], f"What does {v} mean and how do I fix it?")]
    return [(FORMS[2], v), (FORMS[3], f'Why do I get "{v}" after an upgrade?'),
            (EXTRA_FORM, f"Why do I get {v} after an upgrade?")]


def on_topic_questions(corpus: str = "docs") -> list[str]:
    if corpus == "packages":
        return [summary for summary, _ in package_descriptions().values()]
    out = []
    for path in sorted(FASTAPI.rglob("*.md")):
        m = re.search(r"^#\s+(.+?)\s*(\{[^}]*\})?\s*$", path.read_text(encoding="utf-8"), re.M)
        if m and len(m.group(1).split()) >= 1:
            out.append(m.group(1).strip())
    return out


# -- running the product --------------------------------------------------------------------------------

def researcher(env: dict, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "researcher"), *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=3600)


def search_lines(env: dict, queries: list[str], max_tokens: int, documents: int = 5, fragments: int = 10) -> list[str]:
    lines = "\n".join(json.dumps({"id": i, "query": q}) for i, q in enumerate(queries)) + "\n"
    proc = researcher(env, "search", "--queries-file", "-", "--json", "--documents", str(documents), "--fragments",
                      str(fragments), "--max-tokens", str(max_tokens), stdin=lines)
    out = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or len(out) != len(queries):
        raise SystemExit(f"search --queries-file failed ({proc.returncode}): {proc.stderr[-500:]}")
    return out


# -- (a) and (b) ------------------------------------------------------------------------------------------

def planted_first(env: dict, plants: list[dict]) -> dict:
    rows = [(form, q, p) for p in plants for form, q in queries_of(p)]
    answers = [json.loads(line) for line in search_lines(env, [q for _, q, _ in rows], 50_000)]
    per_form: dict[str, list[int]] = {}
    misses = []
    for (form, query, plant), ans in zip(rows, answers, strict=True):
        docs = [(d["repository"], d["document_path"]) for d in ans["documents"]]
        target = ("docs", plant["document"])
        rank = docs.index(target) + 1 if target in docs else None
        per_form.setdefault(form, []).append(1 if rank == 1 else 0)
        if rank != 1:
            misses.append({"form": form, "query": query, "document": plant["document"], "rank": rank,
                           "first": docs[0] if docs else None})
    accepted = [x for form in FORMS for x in per_form.get(form, [])]
    return {"plants": len(plants), "queries_in_acceptance": len(accepted),
            "ranked_first": round(sum(accepted) / len(accepted), 4),
            "per_form": {f: {"queries": len(v), "ranked_first": round(sum(v) / len(v), 4)} for f, v in per_form.items()},
            "misses": misses}


def unrelated_out(env: dict, questions: list[str], unrelated: tuple[str, ...] = ("cooking", "news")) -> dict:
    answers = [json.loads(line) for line in search_lines(env, questions, 50_000)]
    out: dict = {"questions": len(questions)}
    for repo in unrelated:
        hits = [{"question": q, "documents": [d["document_path"] for d in a["documents"][:5] if d["repository"] == repo]}
                for q, a in zip(questions, answers, strict=True)
                if any(d["repository"] == repo for d in a["documents"][:5])]
        out[repo] = {"questions_with_it_in_top5": len(hits), "examples": hits[:10]}
    out["top1_in_docs"] = round(sum(1 for a in answers if a["documents"] and a["documents"][0]["repository"] == "docs")
                                / len(answers), 4)
    return out


# -- (c) --------------------------------------------------------------------------------------------------

_INLINE = re.compile(r"[ \t\u00a0]+")


def _norm(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(_INLINE.sub(" ", line).strip() for line in text.split("\n"))


def _sources(env: dict) -> dict[str, tuple[str, bool]]:
    """document -> (its text as chunked: the file for Markdown/text, docling's Markdown otherwise, markdown?)."""
    os.environ.update(HOME=env["HOME"], GSD_RESEARCH_HOME=env["GSD_RESEARCH_HOME"])
    from gsd_research.researcher.gateways.docling_gateway import DoclingGateway

    gateway = DoclingGateway()
    out = {}
    root = TRUST / "docs"
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        try:
            doc = gateway.convert(path, rel)
        except Exception:  # noqa: BLE001 - failed conversions are not indexed either
            continue
        out[rel] = (doc.text, doc.markdown)
    return out


def _old_chunker():
    source = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "show",
                             f"{OLD_CHUNKER}:lib/gsd_research/researcher/chunking.py"],
                            capture_output=True, text=True, check=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location("old_chunking", fh.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    os.unlink(fh.name)
    return module


def _is_slice(fragment: str, source: str) -> bool:
    return _norm(fragment).strip("\n") in source


def fragments_faithful(env: dict) -> dict:
    from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway

    sources = _sources(env)
    normalized = {k: _norm(text) for k, (text, _) in sources.items()}
    db = Path(env["GSD_RESEARCH_HOME"]) / "repositories" / "docs" / "lexical.sqlite"
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT document_path, fragment_index, text FROM fragments").fetchall()
    conn.close()
    bad = [(p, i, t[:160]) for p, i, t in rows if p in normalized and not _is_slice(t, normalized[p])]
    checked = sum(1 for p, _, _ in rows if p in normalized)
    counter = EmbeddingGateway().count_tokens
    old = _old_chunker()
    old_bad = old_total = 0
    for rel, (text, markdown) in sources.items():
        for f in old.chunk_text(text, rel, counter, 254, markdown):
            old_total += 1
            old_bad += not _is_slice(f.text, normalized[rel])
    kinds: dict[str, int] = {}
    for p, _, _ in rows:
        kinds[Path(p).suffix or "?"] = kinds.get(Path(p).suffix or "?", 0) + 1
    return {"fragments_checked": checked, "not_a_slice": len(bad), "examples": bad[:5], "fragments_by_type": kinds,
            "previous_chunker": {"fragments": old_total, "not_a_slice": old_bad}}


# -- (d) --------------------------------------------------------------------------------------------------

def budgets_kept(env: dict, queries: list[str], rng: random.Random) -> dict:
    count = cl100k()
    over, checked, truncated = [], 0, 0
    for budget in (300, 800, 2000, 4000):
        for line in search_lines(env, queries, budget, documents=10, fragments=20):
            checked += 1
            truncated += json.loads(line).get("metadata", {}).get("truncated", False)
            if count(line + "\n") > budget:
                over.append({"budget": budget, "tokens": count(line + "\n"), "mode": "queries-file"})
    singles = rng.sample(queries, min(40, len(queries)))
    for n, query in enumerate(singles):
        budget = (300, 800, 2000, 4000)[n % 4]
        args = ["search", "--json", "--documents", "10", "--fragments", "20"]
        args += [] if budget == 2000 else ["--max-tokens", str(budget)]
        if n % 5 == 0:
            args.append("--json-pretty")
        args += ["--", query]  # a query may start with "--" (a command-line option is an identifier too)
        proc = researcher(env, *args)
        checked += 1
        if proc.returncode != 0 or count(proc.stdout) > budget:
            over.append({"budget": budget, "tokens": count(proc.stdout), "code": proc.returncode, "query": query})
    return {"answers_checked": checked, "over_budget": len(over), "truncated_answers": truncated,
            "single_processes": len(singles), "examples": over[:5]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--plants", type=int, default=160)
    parser.add_argument("--seed", type=int, default=20261124)
    parser.add_argument("--corpus", choices=("docs", "packages"), default="docs",
                        help="docs: fastapi-docs + mixed-formats; packages: the READMEs of the installed Python "
                             "distributions (held out: never looked at while the ranking was written)")
    parser.add_argument("--science", type=int, default=0, metavar="N",
                        help="a third unrelated repository: N SciFact abstracts drawn with the seed")
    args = parser.parse_args()
    env = bench_env("trust")
    shutil.rmtree(env["GSD_RESEARCH_HOME"], ignore_errors=True)
    plants = build_corpus(args.plants, args.seed, args.corpus, args.science)
    unrelated = ("cooking", "news", "science") if args.science else ("cooking", "news")
    for name in ("docs", *unrelated):
        researcher(env, "repo", "add", name, str(TRUST / name), "--json")
    started = time.perf_counter()
    indexed = json.loads(researcher(env, "index", "--json").stdout)
    figures: dict = {"index": {"totals": indexed["totals"], "seconds": round(time.perf_counter() - started, 1),
                               "no_text": [d["document_path"] for r in indexed["results"] for d in r["no_text"]],
                               "failed": sum(r["documents_failed"] for r in indexed["results"])}}
    figures["a_planted_first"] = planted_first(env, plants)
    questions = on_topic_questions(args.corpus)
    figures["b_unrelated_out_of_top5"] = unrelated_out(env, questions, unrelated)
    figures["c_fragments_faithful"] = fragments_faithful(env)
    all_queries = [q for p in plants for _, q in queries_of(p)] + questions
    figures["d_within_budget"] = budgets_kept(env, all_queries, random.Random(args.seed))
    figures["corpus"], figures["seed"], figures["science"] = args.corpus, args.seed, args.science
    figures["commit"] = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "--short",
                                        "HEAD"], capture_output=True, text=True).stdout.strip()
    print(json.dumps(figures, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
