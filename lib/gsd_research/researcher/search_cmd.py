"""`researcher search`: one query or a queries file, across one or all repositories."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from gsd_research.core.errors import GsdError, UsageError

SNIPPET_CHARS = 240


def _repositories(kb, repo_name: str | None):
    factory = kb.factory
    service = factory.repository_service
    repos = [service.get_repository(repo_name)] if repo_name else service.list_repositories()
    if not repos:
        raise GsdError("No repositories configured", code="NOT_FOUND", suggestions=["researcher repo add NAME PATH"])
    indexed = [r for r in repos if factory.is_indexed(r)]
    if not indexed:
        names = " ".join(r.name for r in repos)
        raise GsdError(f"Not indexed yet: {names}", code="NOT_FOUND",
                       suggestions=[f"researcher index {repos[0].name}" if repo_name else "researcher index"])
    return indexed, [r.name for r in repos if r not in indexed]


def document_json(doc, roots: dict[str, str]) -> dict:
    best = doc.top_fragments[0].text if doc.top_fragments else ""
    return {
        "document_path": doc.document_path,
        "repository": doc.repository,
        "absolute_path": str(Path(roots.get(doc.repository, "")) / doc.document_path),
        "score": doc.score,
        "best_distance": None if doc.best_distance is None else round(doc.best_distance, 4),
        "top_fragments": [{"fragment_id": f.fragment_id, "fragment_index": f.fragment_index, "score": f.score}
                          for f in doc.top_fragments],
        "snippet": best[:SNIPPET_CHARS] + ("…" if len(best) > SNIPPET_CHARS else ""),
    }


def fragment_json(frag) -> dict:
    return {"fragment_id": frag.fragment_id, "document_path": frag.document_path, "repository": frag.repository,
            "fragment_index": frag.fragment_index, "score": frag.score,
            "distance": None if frag.distance is None else round(frag.distance, 4), "match": frag.match,
            "text": frag.text}


def search_all(kb, queries: list[str], repos, n_fragments: int, n_documents: int, mode: str):
    """[(documents, fragments)] per query, merged across repositories."""
    from gsd_research.researcher.services.search_service import merge

    factory = kb.factory
    per_query: list[list] = [[] for _ in queries]
    embeddings: dict[str, list] = {}
    for repo in repos:
        service = factory.search_service(repo)
        vectors = None
        if mode != "lexical":
            sig = service.embedding.signature
            if sig not in embeddings:
                embeddings[sig] = service.embedding.embed_queries(queries)
            vectors = embeddings[sig]
        for i, hit in enumerate(service.search_many(queries, n_fragments, n_documents, mode, vectors)):
            per_query[i].append(hit)
    return [merge(hits, n_fragments, n_documents) for hits in per_query]


def run_one(kb, text: str, repo_name, n_fragments: int, n_documents: int, mode: str) -> dict:
    started = time.perf_counter()
    repos, not_indexed = _repositories(kb, repo_name)
    roots = {r.name: r.path for r in repos}
    docs, frags = search_all(kb, [text], repos, n_fragments, n_documents, mode)[0]
    meta = {"repositories": [r.name for r in repos], "mode": mode, "returned_documents": len(docs),
            "returned_fragments": len(frags), "elapsed_ms": round((time.perf_counter() - started) * 1000, 1)}
    if not_indexed:
        meta["not_indexed"] = not_indexed
    return {"query": text, "documents": [document_json(d, roots) for d in docs],
            "fragments": [fragment_json(f) for f in frags], "metadata": meta}


def _read_queries(path: str) -> list[tuple[object, str | None, dict | None]]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"Cannot read queries file {path}: {exc.__class__.__name__}",
                         suggestions=['One JSON object per line: {"id": "q1", "query": "..."}']) from None
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict) or not isinstance(item.get("query"), str) or not item["query"].strip():
            out.append((n, None, {"code": "USAGE_ERROR", "message": f"line {n}: expected {{\"id\": …, \"query\": …}}"}))
        else:
            out.append((item.get("id", n), item["query"].strip(), None))
    return out


def run_batch(kb, path: str, repo_name, n_fragments: int, n_documents: int, mode: str) -> None:
    """Print one JSON line per input line, in input order."""
    from gsd_research.core.output import dumps
    from gsd_research.core.secrets import scrub

    items = _read_queries(path)
    repos, _ = _repositories(kb, repo_name)
    roots = {r.name: r.path for r in repos}
    valid = [q for _, q, err in items if err is None]
    results = iter(search_all(kb, valid, repos, n_fragments, n_documents, mode)) if valid else iter(())
    for qid, query, err in items:
        if err is not None:
            line = {"id": qid, "query": None, "error": err}
        else:
            docs, frags = next(results)
            line = {"id": qid, "query": query, "documents": [document_json(d, roots) for d in docs],
                    "fragments": [fragment_json(f) for f in frags]}
        sys.stdout.write(scrub(dumps(line)) + "\n")
    sys.stdout.flush()
