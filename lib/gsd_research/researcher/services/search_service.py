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
        self.repo_dir = repo_dir  # the state record's folder (by default the keyword index's)
        self.documents = documents  # the repository's folder

    @property
    def chroma(self):
        if self._chroma is None:
            self._chroma = self._chroma_factory()
        return self._chroma

    def vectors_held(self) -> int:
        """Fragments the vector store holds (nothing created when there is none); INDEX_DAMAGED when it holds
        none, or cannot be read, while the index records some (its folder or database deleted, emptied or
        truncated): vector search would silently find nothing."""
        from gsd_research.researcher.gateways.chroma_health import interrupted, lost
        held = self.chroma.held(self.name)
        head = self._head()
        if head is None:  # no state of its own (a service built in memory), or none recorded yet
            return held
        if held < head.fragments and not self._index_writing(head):
            short = interrupted if head.in_flight else lost  # a killed run's documents in flight are left
            raise short(self.name, self.chroma.where(), held, head.fragments)  # vectors lost, or another store
        if held:
            self._stamped("vector store", self.chroma.stamp())
        return held

    def keywords_held(self, vectors_answer: bool = False) -> None:
        """INDEX_DAMAGED when the keyword index holds fewer fragments than the index records (the keyword index
        deleted, emptied or truncated) and no index run is writing: a search would bury exact identifiers."""
        from gsd_research.researcher.state import keywords_short

        head = self._head()
        if head is None:
            return
        held = self.lexical.held()
        if keywords_short(held, head.fragments, head.writes_pending, self.documents) and not self._index_writing(head):
            raise self.lexical.lost(held, head.fragments, vectors_answer)
        self._stamped("keyword index", self.lexical.stamp())

    def keywords_sound(self) -> bool:
        """Whether a search by keywords alone would answer (no INDEX_DAMAGED of its own)."""
        try:
            self.keywords_held()
        except IndexDamaged:
            return False
        return True

    def _head(self):
        """The record's head, read once per service (one line of one small file)."""
        if not hasattr(self, "_head_read"):
            from gsd_research.researcher.state import StateGateway

            db_path = getattr(self.lexical, "db_path", None)
            repo_dir = self.repo_dir or (db_path.parent if db_path is not None else None)
            self._head_read = StateGateway(repo_dir).head() if repo_dir is not None else None
        return self._head_read

    def _stamped(self, what: str, stamp) -> None:
        """IndexDamaged when the store's stamp says it holds another repository's or another generation's index."""
        from gsd_research.researcher.health import stamp_damage, stamp_problem

        head = self._head()
        problem = stamp_problem(head, stamp)
        if problem and not self._index_writing(head):
            raise stamp_damage(self.name, what, problem)

    def _index_writing(self, head) -> bool:
        """An index run is writing (documents in flight and it holds the lock): the store lags on purpose."""
        from gsd_research.researcher.gateways.lock_gateway import RepositoryLock

        return bool(head.in_flight) and RepositoryLock(self.repo_dir or self.lexical.db_path.parent).busy()

    def evidence_many(self, queries: list[str], depth: int, mode: str = "hybrid",
                      query_embeddings: list[list[float]] | None = None) -> list[Evidence]:
        """This repository's candidates for each query, in order."""
        vectors: list[list[SearchResult]] = [[] for _ in queries]
        if mode != "lexical":
            try:
                vectors = self._vectors(queries, depth, query_embeddings) or vectors
            except GsdError as exc:
                raise self._advised(exc) from None
        if mode != "vector":
            self.keywords_held(vectors_answer=mode == "hybrid")
        out = []
        for query, vector in zip(queries, vectors, strict=True):
            ev = Evidence(self.name, vector=vector)
            if mode != "vector":
                ev.lexical = self.lexical.search(query, depth)
            if mode == "hybrid":
                self._exact(query, ev)
            out.append(ev)
        return out

    def _vectors(self, queries: list[str], depth: int, query_embeddings: list[list[float]] | None):
        """The nearest fragments per query; None when the store holds none (nothing embedded yet)."""
        held = self.vectors_held()
        if not held:
            return None
        embeddings = query_embeddings or self.embedding.embed_queries(queries)
        return self.chroma.query_many(embeddings, depth, total=held)

    def _advised(self, exc: GsdError) -> GsdError:
        """A damaged vector store's error; its advice names only the index run (which rebuilds both stores)
        when the keyword index cannot answer either: a search by keywords would only meet its own damage."""
        if isinstance(exc, IndexDamaged) and not (self.lexical.answers() and self.keywords_sound()):
            from gsd_research.researcher.gateways.chroma_health import fix

            exc.suggestions = fix(self.name, keywords=False)
        return exc

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
