"""Fragment and document search: each repository gathers its evidence, `ranking.rank` fuses all of it."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from gsd_research.core.errors import GsdError, IndexDamaged
from gsd_research.researcher import health
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
from gsd_research.researcher.state import StoreUnreadable

__all__ = ["MODES", "SearchService", "filtered_search", "search_repositories"]

MAX_SQL_PATHS = 2000  # more documents than this are filtered after ranking, from a deeper candidate list


class SearchService:
    """Gathers one repository's evidence for queries; ranking across repositories is `search_repositories`."""

    def __init__(self, repository_name: str, chroma_factory: Callable, lexical_gateway: LexicalGateway,
                 embedding_gateway: EmbeddingGateway, repo_dir: Path | None = None,
                 documents: Path | None = None) -> None:
        self.name = repository_name
        self._chroma_factory = chroma_factory
        self.lexical, self.embedding = lexical_gateway, embedding_gateway
        self.repo_dir, self.documents = repo_dir, documents  # the state record's folder, the repository's
        self.vectors_held = 0  # fragments in the vector store, as the last diagnosis probed them
        self.indexing = False  # an index run held the lock at the last diagnosis: what it has not written is missing
        self.interrupted = False  # a killed run left documents unstored at the last diagnosis

    @cached_property
    def chroma(self):
        return self._chroma_factory()

    @cached_property
    def head(self):
        """The record's head, read once per service (one line of one small file); None: nothing recorded."""
        from gsd_research.researcher.state import StateGateway

        return StateGateway(self.repo_dir).head() if self.repo_dir is not None else None

    def diagnose(self, mode: str = "hybrid") -> health.Diagnosis:
        """The diagnosis of the stores `mode` reads, against the record's head. The vector store is probed
        only once the record counts fragments in it."""
        from gsd_research.researcher.gateways.lock_gateway import RepositoryLock
        from gsd_research.researcher.state import INTERRUPTED, RUNNING, StateGateway

        head = self.head
        vectors = self.chroma.probe() if mode != "lexical" and (head is None or head.fragments) else None
        self.vectors_held = vectors.held or 0 if vectors is not None and vectors.exists else 0
        if self.repo_dir is None:  # a service built in memory: nothing recorded
            return health.Diagnosis(self.name)
        keywords = self.lexical.probe() if mode != "vector" else None
        state = StateGateway(self.repo_dir)
        run = state.unfinished_run(RepositoryLock(self.repo_dir).busy)
        self.indexing, self.interrupted = run == RUNNING, run == INTERRUPTED
        writing = head is not None and bool(head.in_flight) and self.indexing
        return health.diagnose(self.name, head, keywords, vectors, writing, self.documents, reread=state.head)

    def _vectors(self, embeddings: list[list[float]], depth: int, where: dict | None = None
                 ) -> list[list[SearchResult]]:
        """Nearest fragments per query; none while nothing is embedded (no store created)."""
        if not self.vectors_held:
            return [[] for _ in embeddings]
        return self.chroma.query_many(embeddings, depth, where, total=self.vectors_held)

    def _with_similarity(self, found: list[tuple[list[float], list[SearchResult], list[SearchResult]]]) -> None:
        """Each query's keyword candidates that its nearest neighbours should have held join them with their exact
        cosine distance. The neighbours come from an approximate graph Chroma rebuilds per process, which can
        leave a fragment unreachable (among many identical ones); the ranking and the repository gate then judge
        by the similarity the graph should have found. A candidate less similar than the farthest neighbour
        stays out, as an exact search would have left it: rankings the graph got right do not move. It only
        enriches: when the store cannot give the vectors (another process writing it), the lists stay as they are."""
        import numpy as np

        missing = [{r.fragment_id: r for r in lexical if r.fragment_id not in {v.fragment_id for v in vector}}
                   for _, vector, lexical in found]
        try:
            stored = self.chroma.vectors_of(sorted({i for m in missing for i in m}))
        except Exception:  # noqa: BLE001 - the store's damage is the neighbours' query's to find, not this one's
            return
        for (query, vector, _), candidates in zip(found, missing, strict=True):
            ids = [i for i in candidates if i in stored]
            if not ids:
                continue
            matrix = np.asarray([stored[i] for i in ids], dtype=np.float32)
            q = np.asarray(query, dtype=np.float32)
            cosine = matrix @ q / np.maximum(np.linalg.norm(matrix, axis=1) * np.linalg.norm(q), 1e-12)
            farthest = max((r.distance for r in vector if r.distance is not None), default=2.0)
            vector += [candidates[i].model_copy(update={"distance": 1.0 - c, "match": "vector"})
                       for i, c in zip(ids, cosine.tolist(), strict=True) if 1.0 - c <= farthest]

    def evidence_many(self, queries: list[str], depth: int, mode: str = "hybrid",
                      query_embeddings: list[list[float]] | None = None) -> list[Evidence]:
        """This repository's candidates for each query, in order."""
        self.diagnose(mode).raise_if_damaged()
        held = bool(self.vectors_held)
        embeddings = (query_embeddings or self.embedding.embed_queries(queries)) if held else [[] for _ in queries]
        try:
            out = [Evidence(self.name, vector=v) for v in self._vectors(embeddings, depth)]
            for query, ev in zip(queries, out, strict=True):
                if mode != "vector":
                    ev.lexical = self.lexical.search(query, depth)
                if mode == "hybrid":
                    self._exact(query, ev)
            if held and mode == "hybrid":
                self._with_similarity([(e, ev.vector, ev.lexical + [r for hits in ev.exact.values() for r in hits])
                                       for e, ev in zip(embeddings, out, strict=True)])
        except StoreUnreadable as exc:
            raise health.unreadable(self.name, exc) from None
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

    def candidates(self, query: str, depth: int, paths: list[str] | None, use_vector: bool):
        """(vector, lexical, note, mode) for a search restricted to `paths`: a damaged vector store leaves the
        lexical list, a damaged keyword index the vector one when there is one, said in `note`; with neither,
        the keyword index's error."""
        diagnosis = self.diagnose("hybrid" if use_vector else "lexical")
        vector, note = [], None
        if diagnosis.store == health.VECTORS:  # the keyword index is sound: `diagnose` finds its damage first
            note, use_vector, diagnosis = _lexical_only(IndexDamaged.code), False, health.Diagnosis(self.name)
        if use_vector:
            try:
                where = {"document_path": {"$in": list(paths)}} if paths is not None else None
                embedding = self.embedding.embed_queries([query]) if self.vectors_held else [[]]
                vector = self._vectors(embedding, depth, where=where)[0]
            except Exception as exc:  # noqa: BLE001 - a failing vector store must not hide the lexical list
                note = _lexical_only(exc.code if isinstance(exc, GsdError) else IndexDamaged.code
                                     if isinstance(exc, StoreUnreadable) else exc.__class__.__name__)
        if diagnosis.state == health.DAMAGED:
            if not vector:
                raise diagnosis.error()
            return vector, [], f"keyword ranking unavailable ({diagnosis.problem}; {diagnosis.fix()}): " \
                               "vector ranking only", "vector"
        try:
            lexical = self.lexical.search(query, depth, paths)
            if vector:
                self._with_similarity([(embedding[0], vector, lexical)])
        except StoreUnreadable as exc:
            raise health.unreadable(self.name, exc) from None
        return vector, lexical, note, "lexical" if note or not use_vector else "hybrid"

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


def _lexical_only(why: str) -> str:
    return f"vector ranking unavailable ({why}): lexical ranking only"


def search_repositories(services: list[SearchService], queries: list[str], n_fragments: int, n_documents: int,
                        mode: str = "hybrid", skipped: list | None = None,
                        indexing: list | None = None) -> list[Ranking]:
    """One ranking per query over all the repositories' evidence, normalized together (never per repository),
    repositories unrelated to the query admitted only with their identifier evidence (`ranking.admit`). Query
    embeddings are computed once per embedding model. With `skipped` (a list), a repository whose index is
    damaged is left out and named in it (which, why, the command that repairs it), unless every repository
    is: then the first one's error is raised, as it is without `skipped`. With `indexing` (a list), the
    repositories an index run has not finished are named in it, with whether it runs (`health.unfinished`)."""
    depth = candidate_depth(n_fragments, n_documents)
    per_query: list[list[Evidence]] = [[] for _ in queries]
    embeddings: dict[str | None, list[list[float]]] = {}
    damaged: list[tuple[str, GsdError]] = []
    for service in services:
        model = None if mode == "lexical" else service.embedding.signature
        if model is not None and model not in embeddings:
            embeddings[model] = service.embedding.embed_queries(queries)
        try:
            evidence = service.evidence_many(queries, depth, mode, embeddings.get(model))
        except IndexDamaged as exc:
            if skipped is None:
                raise
            damaged.append((service.name, exc))
            continue
        if indexing is not None and (service.indexing or service.interrupted):
            indexing.append((service.name, service.indexing))
        for found, ev in zip(per_query, evidence, strict=True):
            found.append(ev)
    if damaged and len(damaged) == len(services):
        raise _every_one(damaged)
    if skipped is not None:
        skipped.extend({"repository": name, "code": exc.code, "message": exc.message,
                        "fix": f"researcher index {name}"} for name, exc in damaged)
    return [rank(admit(evidence), n_fragments, n_documents, mode) for evidence in per_query]


def _every_one(damaged: list[tuple[str, GsdError]]) -> GsdError:
    """The first one's error, naming the others, whose one repair is an index run of them all."""
    name, first = damaged[0]
    if len(damaged) > 1:
        others = ", ".join(n for n, _ in damaged[1:])
        first.message = f"{first.message}; every repository searched is damaged, {others} too"
        first.suggestions = ["Run: researcher index (repairs every repository's index)"]
    return first


def filtered_search(service: SearchService, query: str, *, paths: list[str] | None, n_fragments: int,
                    max_tokens: int | None, mode: str) -> dict:
    """`api.search`: one repository's passages, only from `paths` if given, their text within `max_tokens`."""
    post_filter = set(paths) if paths is not None and len(paths) > MAX_SQL_PATHS else None
    depth = candidate_depth(n_fragments, n_fragments) * (4 if post_filter else 1)
    use_vector = mode in ("hybrid", "vector") or mode == "auto" and getattr(service.head, "fragments", 0) > 0
    sql_paths = None if post_filter else paths
    vector, lexical, note, fused_mode = service.candidates(query, depth, sql_paths, use_vector)
    if post_filter is not None:
        vector = [r for r in vector if r.document_path in post_filter]
        lexical = [r for r in lexical if r.document_path in post_filter]
    if mode == "vector" and not note:
        fused_mode = "vector"
    evidence = [Evidence(service.name, vector=vector, lexical=lexical)]
    fragments = rank(evidence, n_fragments, n_fragments, fused_mode).fragments
    passages = [{"document_path": f.document_path, "fragment_index": f.fragment_index, "text": f.text,
                 "score": f.score, "match": f.match} for f in fragments]
    out = {"passages": _within(passages, max_tokens), "mode": fused_mode}
    if note:
        out["note"] = note
    return out


def _within(passages: list[dict], max_tokens: int | None) -> list[dict]:
    """Passages while their text fits `max_tokens` in total; the first one that does not is cut."""
    if max_tokens is None:
        return passages
    from gsd_research.core.tokens import count_tokens, cut_to_tokens

    kept, left = [], max_tokens
    for passage in passages:
        used = count_tokens(passage["text"])
        if used <= left:
            kept.append(passage)
            left -= used
            continue
        if left >= 40:
            kept.append(dict(passage, text=cut_to_tokens(passage["text"], left)[0], truncated=True))
        break
    return kept
