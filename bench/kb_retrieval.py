"""Retrieval quality on BEIR SciFact (train queries, nDCG@10): lexical alone, vector alone, shipped ranking.

Usage: python bench/kb_retrieval.py [--experiments [--half A]]
Indexes SciFact through the product into $KB_BENCH_DIR (reused when already indexed, e.g. by
kb_indexing.py --part memory), gathers every judged train query's candidates once (vector, BM25,
exact terms), then ranks them with each fusion side by side (lexical, vector, shipped, ablations).
Halves: A = even positions of the queries sorted by id (the ranking was tuned on it), B = odd positions (held out).
--experiments gathers deeper candidates (kb_ranking_experiments.py) and prints every variant measured while
tuning; --half A prints half A alone (what tuning looked at).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kb_indexing import SCIFACT, bench_env, prepare_scifact, researcher  # noqa: E402


def load_judgments() -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (SCIFACT / "qrels-train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, did, score = line.split("\t")
        if int(score) > 0:
            qrels.setdefault(qid, {})[did] = int(score)
    queries = {}
    for line in (SCIFACT / "queries-train.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q["_id"] in qrels:
            queries[q["_id"]] = q["text"]
    return queries, qrels


def ndcg_at_10(ranked: list[str], rels: dict[str, int]) -> float:
    dcg = sum(rels.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(rels.values(), reverse=True)[:10]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def ensure_index() -> dict:
    env = bench_env("scifact-all")
    folder = prepare_scifact(None)
    home = Path(env["GSD_RESEARCH_HOME"])
    if not (home / "researcher.yaml").exists():
        researcher(env, "repo", "add", "scifact", str(folder), "--file-types", "md")
    doc, _, _ = researcher(env, "index", "scifact")
    print(f"index: {doc['results'][0]['documents_skipped']} unchanged, "
          f"{doc['results'][0]['documents_indexed']} indexed", file=sys.stderr)
    return env


@contextlib.contextmanager
def _exact_lookups(enabled: bool):
    """Gathering candidates with or without the exact-term lookups (their cost, measured side by side)."""
    from gsd_research.researcher.services import search_service

    saved = search_service.exact_terms
    if not enabled:
        search_service.exact_terms = lambda query: []
    try:
        yield
    finally:
        search_service.exact_terms = saved


def _without_exact(evidence):
    from gsd_research.researcher.ranking import Evidence

    return [Evidence(e.repository, vector=e.vector, lexical=e.lexical) for e in evidence]


def rankings(evidence: list, mode_ranker) -> list[list[str]]:
    return [[Path(d.document_path).stem for d in mode_ranker(ev).documents] for ev in evidence]


def variants() -> dict:
    """label -> (what it is, a ranker of one query's evidence list), all over the same candidates."""
    from gsd_research.researcher import ranking

    def normalized(vector, lexical, exact=True):  # a former normalization of the two lists, over the same code
        def ranker(ev):
            saved = ranking._signals
            ranking._signals = lambda pool, fusion: (vector(pool.similarity), lexical(pool.bm25))
            try:
                return ranking.rank(ev if exact else _without_exact(ev), 10, 10)
            finally:
                ranking._signals = saved
        return ranker

    return {
        "lexical": ("lexical alone (SQLite FTS5 BM25, porter)", lambda ev: ranking.rank(ev, 10, 10, "lexical")),
        "vector": ("vector alone (Chroma default model)", lambda ev: ranking.rank(ev, 10, 10, "vector")),
        "shipped": ("shipped: exact terms + vector (min-max) + BM25 (/max), pooled over repositories",
                    lambda ev: ranking.rank(ev, 10, 10)),
        "standard_tuned_on_A": ("tuned on half A, rejected on half B: exact terms + vector and BM25 as standard "
                                "scores", lambda ev: ranking.rank(ev, 10, 10, fusion="standard")),
        "shipped_without_exact": ("ablation: shipped without the exact-term evidence",
                                  lambda ev: ranking.rank(_without_exact(ev), 10, 10)),
        "previous_rsf": ("earlier: min-max of both lists, no exact terms",
                         normalized(ranking._minmax, ranking._minmax, exact=False)),
        "rrf_reference": ("reference: reciprocal rank fusion k=60 (+ exact terms)",
                          lambda ev: ranking.rank(ev, 10, 10, fusion="rrf")),
    }


def halves(scores: list[float]) -> dict:
    mean = lambda xs: round(sum(xs) / len(xs), 4)  # noqa: E731
    return {"half_A": mean(scores[0::2]), "half_B": mean(scores[1::2]), "ndcg@10": mean(scores)}


def experiments(service, ids: list[str], texts: list[str], qrels: dict, embeddings, half: str | None) -> None:
    """Every variant measured while tuning, over deeper candidates gathered once (--half A: half A alone)."""
    import kb_ranking_experiments as experiment

    keep = {"A": slice(0, None, 2), "B": slice(1, None, 2)}.get(half or "", slice(None))
    ids, texts, embeddings = ids[keep], texts[keep], embeddings[keep]
    started = time.perf_counter()
    candidates = experiment.gather(service, texts, embeddings)
    print(f"deep candidates: {1000 * (time.perf_counter() - started) / len(ids):.1f} ms/query "
          "(vector, 4 BM25 lists, exact terms)", file=sys.stderr)
    for label, params in experiment.grid().items():
        started = time.perf_counter()
        scores = [ndcg_at_10([Path(d).stem for d in experiment.rank(c, params)], qrels[q])
                  for q, c in zip(ids, candidates, strict=True)]
        rank_ms = round(1000 * (time.perf_counter() - started) / len(ids), 2)
        figures = {"ndcg@10": round(sum(scores) / len(scores), 4)} if half else halves(scores)
        print(json.dumps({"variant": label, **figures, "rank_ms_per_query": rank_ms}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", action="store_true", help="every variant measured while tuning")
    parser.add_argument("--half", choices=("A", "B"), help="with --experiments: one half of the queries alone")
    args = parser.parse_args()
    env = ensure_index()
    os.environ.update(HOME=env["HOME"], GSD_RESEARCH_HOME=env["GSD_RESEARCH_HOME"])
    from gsd_research.researcher.ranking import candidate_depth
    from gsd_research.researcher.service_factory import ServiceFactory

    queries, qrels = load_judgments()
    factory = ServiceFactory()
    repo = factory.repository_service.get_repository("scifact")
    service = factory.search_service(repo)
    ids = sorted(queries, key=int)
    texts = [queries[q] for q in ids]
    embeddings = service.embedding.embed_queries(texts)
    if args.experiments:
        return experiments(service, ids, texts, qrels, embeddings, args.half)
    gather_ms = {}
    for label in ("without_exact_lookups", "shipped", "without_exact_lookups_again", "shipped_again"):
        with _exact_lookups(enabled=label.startswith("shipped")):
            started = time.perf_counter()
            evidence = [[ev] for ev in service.evidence_many(texts, candidate_depth(10, 10), "hybrid", embeddings)]
            gather_ms[label] = round(1000 * (time.perf_counter() - started) / len(ids), 2)
    figures: dict = {"queries": len(ids), "documents": 5183,
                     "halves": "A = even positions of the queries sorted by id, B = odd positions",
                     "candidates_ms_per_query_excl_embedding": gather_ms}
    for label, (what, ranker) in variants().items():
        started = time.perf_counter()
        ranked = rankings(evidence, ranker)
        elapsed = time.perf_counter() - started
        scores = [ndcg_at_10(r, qrels[qid]) for qid, r in zip(ids, ranked, strict=True)]
        figures[label] = {"what": what, **halves(scores), "rank_ms_per_query": round(1000 * elapsed / len(ids), 2)}
    figures["shipped_beats_both"] = figures["shipped"]["ndcg@10"] > max(figures["lexical"]["ndcg@10"],
                                                                        figures["vector"]["ndcg@10"])
    commit = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    figures["commit"] = commit
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
