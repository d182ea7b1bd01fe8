"""Retrieval quality on BEIR SciFact (train queries, nDCG@10): lexical alone, vector alone, shipped ranking.

Usage: python bench/kb_retrieval.py
Indexes SciFact through the product into $KB_BENCH_DIR (reused when already indexed, e.g. by
kb_indexing.py --part memory), then ranks documents for every judged train query in the three modes
of the same index, side by side.
"""

from __future__ import annotations

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


def main() -> None:
    env = ensure_index()
    os.environ.update(HOME=env["HOME"], GSD_RESEARCH_HOME=env["GSD_RESEARCH_HOME"])
    from gsd_research.researcher.service_factory import ServiceFactory

    queries, qrels = load_judgments()
    factory = ServiceFactory()
    repo = factory.repository_service.get_repository("scifact")
    service = factory.search_service(repo)
    ids = list(queries)
    texts = [queries[q] for q in ids]
    embeddings = service.embedding.embed_queries(texts)
    figures = {"queries": len(ids), "documents": 5183}
    for label, mode, fusion in (("lexical", "lexical", "rsf"), ("vector", "vector", "rsf"),
                                ("shipped_hybrid_rsf", "hybrid", "rsf"), ("hybrid_rrf_reference", "hybrid", "rrf")):
        started = time.perf_counter()
        results = service.search_many(texts, 10, 10, mode, None if mode == "lexical" else embeddings, fusion)
        elapsed = time.perf_counter() - started
        scores = [ndcg_at_10([Path(d.document_path).stem for d in docs], qrels[qid])
                  for qid, (docs, _) in zip(ids, results, strict=False)]
        figures[label] = {"ndcg@10": round(sum(scores) / len(scores), 4),
                         "ms_per_query_excl_embedding": round(1000 * elapsed / len(ids), 2)}
    figures["shipped_beats_both"] = figures["shipped_hybrid_rsf"]["ndcg@10"] > max(figures["lexical"]["ndcg@10"],
                                                                       figures["vector"]["ndcg@10"])
    commit = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    figures["commit"] = commit
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
