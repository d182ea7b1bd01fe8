"""What an index holds, as `status` reports it, and what would make a document without text readable."""

from __future__ import annotations

from gsd_research.researcher.models import DocumentMetadata, IndexStats

NO_TEXT_LISTED = 20  # no_text documents named in `status` (all are counted)


def no_text_fix(rel: str, repository: str) -> str:
    """What would make a document without text readable."""
    from gsd_research.researcher.gateways.ocr_gateway import INSTALL_FIX, tesseract

    if not rel.lower().endswith(".pdf"):
        return "The file holds no extractable text (empty, or images only); nothing to do"
    if tesseract():
        return "OCR (tesseract) found no legible text on its pages; nothing to do"
    return INSTALL_FIX.format(name=repository)


def tesseract_on_path() -> bool:
    from gsd_research.researcher.gateways.ocr_gateway import tesseract

    return tesseract() is not None


def ocr_pending(rel: str, known: DocumentMetadata) -> bool:
    """A PDF recorded without text that tesseract has not read yet (it was not installed then)."""
    return known.text_source == "none" and not known.ocr_tried and rel.lower().endswith(".pdf")


def ocr_retry(checksums: dict[str, DocumentMetadata]) -> bool:
    """tesseract is on PATH and some recorded PDF had no text before it was: such PDFs are read again."""
    return any(ocr_pending(p, m) for p, m in checksums.items()) and tesseract_on_path()


def index_stats(name: str, checksums: dict[str, DocumentMetadata], path: str, store: str,
                embedding: str, precisions: list[str] | None = None) -> IndexStats:
    last = max((m.indexed_at for m in checksums.values()), default=None)
    no_text = sorted(p for p, m in checksums.items() if m.text_source == "none")
    return IndexStats(repository_name=name, total_documents=len(checksums) - len(no_text),
                      total_fragments=sum(m.fragment_count for m in checksums.values()),
                      last_indexed=last, path=path, store=store, embedding_provider=embedding,
                      embedding_precision="+".join(precisions or []) or None,
                      documents_ocr=sum(1 for m in checksums.values() if m.text_source == "ocr"),
                      documents_no_text=len(no_text), no_text=no_text[:NO_TEXT_LISTED],
                      fix=no_text_fix(next((p for p in no_text if p.lower().endswith(".pdf")), no_text[0]),
                                      name) if no_text else None)


def repository_stats(service) -> IndexStats:
    """`status` of one repository (`IndexService`): what its index records and whether its stores still hold it."""
    from gsd_research.researcher.gateways.lexical_gateway import LexicalStoreDamaged
    from gsd_research.researcher.models import Head
    from gsd_research.researcher.state import keywords_short

    state = service.state
    head = state.head() or Head()
    stats = index_stats(service.name, state.load_checksums() or {}, str(service.fs.base_path), service.store_label,
                        service.embedding.signature, head.precisions)
    writing = bool(head.in_flight) and service.lock.busy()  # a killed run's journal is no run
    try:
        held = service.lexical.held()  # nothing created when it is missing
        if keywords_short(held, stats.total_fragments, head.writes_pending, service.fs.base_path) and not writing:
            raise service.lexical.lost(held, stats.total_fragments, vectors_answer=False)
    except LexicalStoreDamaged as exc:
        stats.damaged = f"{exc.message}. {exc.suggestions[0]}"
    if not stats.damaged and stats.total_fragments and not writing:
        stats.damaged = vector_damage(service._chroma_factory(), service.name, stats.total_fragments,
                                      interrupted_run=bool(head.in_flight))
    if not stats.damaged and not writing:
        stats.damaged = stamp_status(service, state.head())
    return stats


def stamp_status(service, head) -> str | None:
    """A store stamped by another repository or generation: what and the fix (the vector collection opened only
    when its file is not the one the last commit stamped)."""
    from gsd_research.researcher.health import stamp_damage, stamp_problem

    what, problem = "keyword index", stamp_problem(head, service.lexical.stamp())
    if not problem and head is not None and head.fragments:
        store = service._chroma_factory()
        if store.url is not None or store.file_identity() != head.vector_file:
            what, problem = "vector store", stamp_problem(head, service._vector_stamp(store))
    if not problem:
        return None
    damage = stamp_damage(service.name, what, problem)
    return f"{damage.message}. {damage.suggestions[0]}"


def vector_damage(store, repository: str, expected: int, interrupted_run: bool = False) -> str | None:
    """The vector store holds fewer fragments than the index records (no index run is writing), or cannot be
    read: what and the fix."""
    from gsd_research.core.errors import GsdError
    from gsd_research.researcher.gateways.chroma_health import VectorStoreDamaged, interrupted, lost

    try:
        held = store.held(repository)
    except VectorStoreDamaged as exc:
        return f"{exc.message}. {exc.suggestions[0]}"
    except GsdError:  # a Chroma server that does not answer: not known to be damaged (`status` says it is down)
        return None
    if held >= expected:
        return None
    damage = (interrupted if interrupted_run else lost)(repository, store.where(), held, expected)
    return f"{damage.message}. {damage.suggestions[0]}"
