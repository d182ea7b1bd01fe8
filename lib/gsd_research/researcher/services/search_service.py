"""Fragment and document search: each repository gathers its evidence, `ranking.rank` fuses all of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gsd_research.core.errors import GsdError, IndexDamaged
from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway
from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway, phrase
from gsd_research.researcher.models import DocumentSearchResult, SearchResult
from gsd_research.researcher.ranking import (
    EXACT_HITS,
    MODES,
    Evidence,
    Ranking,
    admit,
    candidate_depth,
    exact_terms,
    rank,
    rare_limit,
)

__all__ = ["MODES", "SearchService", "search_repositories"]


class SearchService:
    """Gathers one repository's evidence for queries; ranking across repositories is `search_repositories`."""

    def __init__(self, repository_name: str, chroma_factory: Callable, lexical_gateway: LexicalGateway,
                 embedding_gateway: EmbeddingGateway, repo_dir: Path | None = None,
                 documents: Path | None = None) -> None:
        self.name = repository_name
        self._chroma_factory, self._chroma = chroma_factory, None
        self.lexical, self.embedding = lexical_gateway, embedding_gateway
        self.repo_dir = repo_dir or getattr(lexical_gateway, "db_path", Path()).parent  # the state record's folder
        self.documents = documents  # the repository's folder

    @property
    def chroma(self):
        if self._chroma is None:
            self._chroma = self._chroma_factory()
        return self._chroma

    def diagnose(self, mode: str = "hybrid"):
        """The diagnosis of the stores `mode` reads, against the record's head (read once per service: one line
        of one small file). The vector store is probed only once the record counts fragments in it."""
        from gsd_research.researcher import health
        from gsd_research.researcher.gateways.lock_gateway import RepositoryLock

        head = self.head()
        vectors = self.chroma.probe() if mode != "lexical" and (head is None or head.fragments) else None
        self.vectors_probed = vectors
        if head is None:  # nothing recorded (a service built in memory, or not indexed yet)
            return health.Diagnosis(self.name)
        keywords = self.lexical.probe() if mode != "vector" else None
        writing = bool(head.in_flight) and RepositoryLock(self.repo_dir).busy()
        return health.diagnose(self.name, head, keywords, vectors, writing, self.documents)

    def head(self):
        if not hasattr(self, "_head"):
            from gsd_research.researcher.state import StateGateway

            self._head = StateGateway(self.repo_dir).head() if self.repo_dir is not None else None
        return self._head

    def vectors_held(self) -> int:
        """Fragments the vector store holds, as probed by the last diagnosis (0: none recorded or probed)."""
        probed = getattr(self, "vectors_probed", None)
        return probed.held or 0 if probed is not None and probed.exists else 0

    def unreadable(self, exc):
        from gsd_research.researcher.health import unreadable

        return unreadable(self.name, exc)

    def evidence_many(self, queries: list[str], depth: int, mode: str = "hybrid",
                      query_embeddings: list[list[float]] | None = None) -> list[Evidence]:
        """This repository's candidates for each query, in order."""
        from gsd_research.researcher.state import StoreUnreadable

        self.diagnose(mode).raise_if_damaged()
        held = self.vectors_held()
        vectors: list[list[SearchResult]] = [[] for _ in queries]
        try:
            if held:
                embeddings = query_embeddings or self.embedding.embed_queries(queries)
                vectors = self.chroma.query_many(embeddings, depth, total=held)
        except StoreUnreadable as exc:
            raise self.unreadable(exc) from None
        out = []
        try:
            for query, vector in zip(queries, vectors, strict=True):
                ev = Evidence(self.name, vector=vector)
                if mode != "vector":
                    ev.lexical = self.lexical.search(query, depth)
                if mode == "hybrid":
                    self._exact(query, ev)
                out.append(ev)
        except StoreUnreadable as exc:
            raise self.unreadable(exc) from None
        return out

    def _exact(self, query: str, ev: Evidence) -> None:
        for term in exact_terms(query):
            expr = phrase(term)
            if not expr:
                continue
            n = self.lexical.phrase_documents(expr)
            hits = None
            if n == 0:  # not a whole token anywhere: perhaps part of one (a short hash, a bare version)
                hits = self.lexical.partial_hits(term, EXACT_HITS)
                n = len({h.document_path for h in hits})
            ev.term_documents[term] = n
            if 0 < n <= rare_limit(term):
                ev.exact[term] = hits if hits is not None else self.lexical.phrase_hits(expr, EXACT_HITS)

    def search_many(self, queries: list[str], n_fragments: int = 10, n_documents: int = 5, mode: str = "hybrid",
                    query_embeddings: list[list[float]] | None = None, fusion: str = "score"
                    ) -> list[tuple[list[DocumentSearchResult], list[SearchResult]]]:
        """[(documents, fragments)] per query, this repository alone."""
        depth = candidate_depth(n_fragments, n_documents)
        out = []
        for ev in self.evidence_many(queries, depth, mode, query_embeddings):
            ranked = rank([ev], n_fragments, n_documents, mode, fusion)
            out.append((ranked.documents, ranked.fragments))
        return out

    def search_fragments(self, query: str, n_results: int = 10, mode: str = "hybrid") -> list[SearchResult]:
        return self.search_many([query], n_results, 1, mode)[0][1]

    def search_documents(self, query: str, n_results: int = 5, mode: str = "hybrid") -> list[DocumentSearchResult]:
        return self.search_many([query], 1, n_results, mode)[0][0]


def search_repositories(services: list[SearchService], queries: list[str], n_fragments: int, n_documents: int,
                        mode: str = "hybrid", skipped: list | None = None) -> list[Ranking]:
    """One ranking per query over all the repositories' evidence, normalized together (never per repository),
    repositories unrelated to the query admitted only with their identifier evidence (`ranking.admit`). Query
    embeddings are computed once per embedding model. With `skipped` (a list), a repository whose index is
    damaged (INDEX_DAMAGED) is left out, (name, error) appended to it, unless every repository is: then the
    first one's error is raised, as it is without `skipped`."""
    depth = candidate_depth(n_fragments, n_documents)
    per_query: list[list[Evidence]] = [[] for _ in queries]
    embeddings: dict[str, list[list[float]]] = {}
    damaged: list[tuple[str, GsdError]] = []
    for service in services:
        try:
            evidence = service.evidence_many(queries, depth, mode, _embedded(service, queries, mode, embeddings))
        except GsdError as exc:
            if skipped is None or not isinstance(exc, IndexDamaged):
                raise
            damaged.append((service.name, exc))
            continue
        for i, ev in enumerate(evidence):
            per_query[i].append(ev)
    if damaged and len(damaged) == len(services):
        raise _every_one(damaged)
    if skipped is not None:
        skipped.extend(damaged)
    return [rank(admit(evidence), n_fragments, n_documents, mode) for evidence in per_query]


def _every_one(damaged: list[tuple[str, GsdError]]) -> GsdError:
    """The error of a search whose every repository is damaged: the first one's, naming the others, whose one
    repair is an index run of them all."""
    name, first = damaged[0]
    if len(damaged) > 1:
        others = ", ".join(n for n, _ in damaged[1:])
        first.message = f"{first.message}; every repository searched is damaged, {others} too"
        first.suggestions = ["Run: researcher index (repairs every repository's index)"]
    return first


def _embedded(service: SearchService, queries: list[str], mode: str,
              embeddings: dict[str, list[list[float]]]) -> list[list[float]] | None:
    """The queries' embeddings by this repository's model, computed once per model."""
    if mode == "lexical":
        return None
    sig = service.embedding.signature
    if sig not in embeddings:
        embeddings[sig] = service.embedding.embed_queries(queries)
    return embeddings[sig]
