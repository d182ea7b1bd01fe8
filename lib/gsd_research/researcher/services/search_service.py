"""Fragment and document search: BM25 and vector rankings fused (relative score fusion by default).

Relative score fusion: each list's scores are min-max normalized over its candidates and averaged with
equal weights (missing = 0). On SciFact it beats both single rankings and reciprocal rank fusion (RRF,
kept as `fusion="rrf"`); see bench/kb_retrieval.py.
"""

from __future__ import annotations

from collections.abc import Callable

from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway
from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway
from gsd_research.researcher.models import DocumentSearchResult, SearchResult

MODES = ("hybrid", "vector", "lexical")
RRF_K = 60
VECTOR_WEIGHT = 0.5
TOP_FRAGMENTS_PER_DOCUMENT = 3


def candidate_depth(n_fragments: int, n_documents: int) -> int:
    return max(50, 5 * n_fragments, 10 * n_documents)


def _doc_ranking(ranked: list[SearchResult]) -> list[str]:
    seen: dict[str, None] = {}
    for r in ranked:
        seen.setdefault(r.document_path, None)
    return list(seen)


def rrf(rankings: list[list[str]], k: int = RRF_K) -> dict[str, float]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return scores


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    span = (hi - lo) or 1.0
    return {k: (v - lo) / span for k, v in scores.items()}


def rsf(vector: dict[str, float], lexical: dict[str, float], weight: float = VECTOR_WEIGHT) -> dict[str, float]:
    """Relative score fusion of two {key: score} maps (higher is better)."""
    v, lx = _minmax(vector), _minmax(lexical)
    return {k: weight * v.get(k, 0.0) + (1 - weight) * lx.get(k, 0.0) for k in set(v) | set(lx)}


def _hybrid(vector: list[SearchResult], lexical: list[SearchResult], fusion: str):
    if fusion == "rrf":
        return (rrf([[r.fragment_id for r in vector], [r.fragment_id for r in lexical]]),
                rrf([_doc_ranking(vector), _doc_ranking(lexical)]))
    vec_frag = {r.fragment_id: 1.0 - (r.distance or 0.0) for r in vector}
    lex_frag = {r.fragment_id: r.score for r in lexical}
    return (rsf(vec_frag, lex_frag),
            rsf(_first_scores(vector, vec_frag), _first_scores(lexical, lex_frag)))


def fuse(vector: list[SearchResult], lexical: list[SearchResult], mode: str, n_fragments: int,
         n_documents: int, fusion: str = "rsf") -> tuple[list[DocumentSearchResult], list[SearchResult]]:
    """Ranked documents and fragments from the two candidate lists (either may be empty)."""
    by_id: dict[str, SearchResult] = {}
    for r in lexical:
        by_id[r.fragment_id] = r.model_copy()
    for r in vector:
        if r.fragment_id in by_id:
            by_id[r.fragment_id].distance, by_id[r.fragment_id].match = r.distance, "both"
        else:
            by_id[r.fragment_id] = r.model_copy(update={"match": "vector"})
    if mode == "vector":
        frag_scores = {r.fragment_id: 1.0 - (r.distance or 0.0) for r in vector}
        doc_scores = _first_scores(vector, frag_scores)
    elif mode == "lexical":
        frag_scores = {r.fragment_id: r.score for r in lexical}
        doc_scores = _first_scores(lexical, frag_scores)
    else:
        frag_scores, doc_scores = _hybrid(vector, lexical, fusion)
    fragments = []
    for fid, score in sorted(frag_scores.items(), key=lambda kv: -kv[1]):
        fragments.append(by_id[fid].model_copy(update={"score": round(score, 6)}))
    per_doc: dict[str, list[SearchResult]] = {}
    for f in fragments:
        per_doc.setdefault(f.document_path, []).append(f)
    documents = []
    for path, score in sorted(doc_scores.items(), key=lambda kv: -kv[1])[:n_documents]:
        tops = per_doc.get(path, [])[:TOP_FRAGMENTS_PER_DOCUMENT]
        dists = [f.distance for f in per_doc.get(path, []) if f.distance is not None]
        documents.append(DocumentSearchResult(document_path=path, top_fragments=tops, score=round(score, 6),
                                              best_distance=min(dists) if dists else None))
    return documents, fragments[:n_fragments]


def _first_scores(ranked: list[SearchResult], frag_scores: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in ranked:
        out.setdefault(r.document_path, frag_scores[r.fragment_id])
    return out


class SearchService:
    """Searches one repository; cross-repository merging is `merge` below."""

    def __init__(self, repository_name: str, chroma_factory: Callable, lexical_gateway: LexicalGateway,
                 embedding_gateway: EmbeddingGateway) -> None:
        self.name = repository_name
        self._chroma_factory, self._chroma = chroma_factory, None
        self.lexical, self.embedding = lexical_gateway, embedding_gateway

    @property
    def chroma(self):
        if self._chroma is None:
            self._chroma = self._chroma_factory()
        return self._chroma

    def search_many(self, queries: list[str], n_fragments: int = 10, n_documents: int = 5, mode: str = "hybrid",
                    query_embeddings: list[list[float]] | None = None, fusion: str = "rsf"):
        """[(documents, fragments)] per query, in order."""
        depth = candidate_depth(n_fragments, n_documents)
        vectors: list[list[SearchResult]] = [[] for _ in queries]
        if mode != "lexical":
            embeddings = query_embeddings or self.embedding.embed_queries(queries)
            vectors = self.chroma.query_many(embeddings, depth)
        out = []
        for query, vector in zip(queries, vectors, strict=False):
            lexical = self.lexical.search(query, depth) if mode != "vector" else []
            docs, frags = fuse(vector, lexical, mode, n_fragments, n_documents, fusion)
            for item in [*docs, *frags]:
                item.repository = self.name
            for d in docs:
                for f in d.top_fragments:
                    f.repository = self.name
            out.append((docs, frags))
        return out

    def search_fragments(self, query: str, n_results: int = 10, mode: str = "hybrid") -> list[SearchResult]:
        return self.search_many([query], n_results, 1, mode)[0][1]

    def search_documents(self, query: str, n_results: int = 5, mode: str = "hybrid") -> list[DocumentSearchResult]:
        return self.search_many([query], 1, n_results, mode)[0][0]


def merge(per_repo: list[tuple[list[DocumentSearchResult], list[SearchResult]]], n_fragments: int,
          n_documents: int) -> tuple[list[DocumentSearchResult], list[SearchResult]]:
    """Cross-repository merge by score (fused scores are normalized per repository, so comparable)."""
    docs = [d for ds, _ in per_repo for d in ds]
    frags = [f for _, fs in per_repo for f in fs]
    docs.sort(key=lambda d: -d.score)
    frags.sort(key=lambda f: -f.score)
    return docs[:n_documents], frags[:n_fragments]
