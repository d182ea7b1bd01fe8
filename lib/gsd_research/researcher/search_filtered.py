"""Search of one repository restricted to some documents, with the passages' text within a token budget."""

from __future__ import annotations

from gsd_research.core.errors import GsdError, IndexDamaged

MAX_SQL_PATHS = 2000  # more documents than this are filtered after ranking, from a deeper candidate list


def _vector(service, query: str, depth: int, paths: list[str] | None) -> list:
    held = service.vectors_held()
    if not held:  # nothing embedded yet: no store created
        return []
    embedding = service.embedding.embed_queries([query])
    where = {"document_path": {"$in": list(paths)}} if paths is not None else None
    return service.chroma.query_many(embedding, depth, where, total=held)[0]


def _candidates(service, query: str, depth: int, paths: list[str] | None, use_vector: bool):
    """(vector, lexical, note, mode): the two candidate lists; a damaged vector store leaves the lexical one, a
    damaged keyword index the vector one, when there is one; with neither, the keyword index's error."""
    from gsd_research.researcher.health import VECTORS, Diagnosis
    from gsd_research.researcher.state import StoreUnreadable

    diagnosis = service.diagnose("hybrid" if use_vector else "lexical")
    vector, note = [], None
    if diagnosis.store == VECTORS:  # the keyword index is sound: `diagnose` finds its damage first
        note, use_vector, diagnosis = f"vector ranking unavailable ({IndexDamaged.code}): lexical ranking only", False, \
            Diagnosis(service.name)
    if use_vector:
        try:
            vector = _vector(service, query, depth, paths)
        except (GsdError, StoreUnreadable) as exc:
            note = f"vector ranking unavailable ({getattr(exc, 'code', IndexDamaged.code)}): lexical ranking only"
        except Exception as exc:  # noqa: BLE001 - a failing vector store must not hide the lexical results
            note = f"vector ranking unavailable ({exc.__class__.__name__}): lexical ranking only"
    if diagnosis.state == "damaged":
        if not vector:
            raise diagnosis.error()
        return vector, [], f"keyword ranking unavailable ({diagnosis.problem}; {diagnosis.error().suggestions[0]}): " \
                           "vector ranking only", "vector"
    mode = "lexical" if note or not use_vector else "hybrid"
    try:
        return vector, service.lexical.search(query, depth, paths), note, mode
    except StoreUnreadable as exc:
        raise service.unreadable(exc) from None


def filtered_search(name: str, query: str, *, paths: list[str] | None, n_fragments: int,
                    max_tokens: int | None, mode: str) -> dict:
    from gsd_research.researcher.ranking import Evidence, candidate_depth, rank
    from gsd_research.researcher.service_factory import ServiceFactory

    if paths is not None and not paths:
        return {"passages": [], "mode": "lexical"}
    factory = ServiceFactory()
    repo = factory.repository_service.get_repository(name)
    service = factory.search_service(repo)
    post_filter = set(paths) if paths is not None and len(paths) > MAX_SQL_PATHS else None
    sql_paths = None if post_filter is not None else paths
    depth = candidate_depth(n_fragments, n_fragments) * (4 if post_filter else 1)
    use_vector = mode in ("hybrid", "vector") or (mode == "auto" and getattr(service.head(), "fragments", 0) > 0)
    vector, lexical, note, fused_mode = _candidates(service, query, depth, sql_paths, use_vector)
    if post_filter is not None:
        vector = [r for r in vector if r.document_path in post_filter]
        lexical = [r for r in lexical if r.document_path in post_filter]
    if mode == "vector" and not note:
        fused_mode = "vector"
    fragments = rank([Evidence(name, vector=vector, lexical=lexical)], n_fragments, n_fragments, fused_mode).fragments
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
