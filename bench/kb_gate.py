"""The repository gate side by side: kb_trust's on-topic questions ranked with and without `ranking.admit`.

Usage: python bench/kb_gate.py [--corpus docs|packages]
Runs on the index the last `bench/kb_trust.py` run left in $KB_BENCH_DIR (same --corpus; every repository it
registered is searched). The candidates of every question are gathered once, then ranked both ways; counted:
questions with a document of each unrelated repository in the top 5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kb_indexing import bench_env  # noqa: E402
from kb_trust import on_topic_questions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", choices=("docs", "packages"), default="docs")
    args = parser.parse_args()
    env = bench_env("trust")
    os.environ.update(HOME=env["HOME"], GSD_RESEARCH_HOME=env["GSD_RESEARCH_HOME"])
    from gsd_research.researcher.ranking import admit, candidate_depth, rank
    from gsd_research.researcher.service_factory import ServiceFactory

    factory = ServiceFactory()
    services = [factory.search_service(r) for r in factory.repository_service.list_repositories()]
    questions = on_topic_questions(args.corpus)
    embeddings = services[0].embedding.embed_queries(questions)
    per_query: list[list] = [[] for _ in questions]
    for service in services:
        for i, ev in enumerate(service.evidence_many(questions, candidate_depth(10, 5), "hybrid", embeddings)):
            per_query[i].append(ev)
    unrelated = [s.name for s in services if s.name != "docs"]
    figures: dict = {"corpus": args.corpus, "questions": len(questions)}
    for label, ranker in (("without_gate", lambda ev: rank(ev, 10, 5)), ("with_gate", lambda ev: rank(admit(ev), 10, 5))):
        tops = [[d.repository for d in ranker(ev).documents[:5]] for ev in per_query]
        figures[label] = {repo: sum(1 for top in tops if repo in top) for repo in unrelated}
        figures[label]["top1_in_docs"] = round(sum(1 for top in tops if top[:1] == ["docs"]) / len(tops), 4)
    figures["commit"] = subprocess.run(["git", "-C", str(Path(__file__).resolve().parents[1]), "rev-parse", "--short",
                                        "HEAD"], capture_output=True, text=True).stdout.strip()
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
