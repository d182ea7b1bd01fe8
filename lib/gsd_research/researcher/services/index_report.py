"""What an index holds, as `status` reports it, and what would make a document without text readable."""

from __future__ import annotations

from gsd_research.researcher.models import DocumentMetadata, IndexStats

NO_TEXT_LISTED = 20  # no_text documents named in `status` (all are counted)


def no_text_fix(rel: str, repository: str) -> str:
    """What would make a document without text readable."""
    from gsd_research.researcher.gateways.docling_gateway import INSTALL_FIX, tesseract

    if not rel.lower().endswith(".pdf"):
        return "The file holds no extractable text (empty, or images only); nothing to do"
    if tesseract():
        return "OCR (tesseract) found no legible text on its pages; nothing to do"
    return INSTALL_FIX.format(name=repository)


def tesseract_on_path() -> bool:
    from gsd_research.researcher.gateways.docling_gateway import tesseract

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
    """`status` of one repository (`IndexService`): what its index records, and its diagnosis."""
    from gsd_research.researcher.models import Head

    head = service.state.head() or Head()
    stats = index_stats(service.name, service.state.load_checksums() or {}, str(service.fs.base_path),
                        service.store_label, service.embedding.signature, head.precisions)
    stats.damaged = service.diagnose(writing=bool(head.in_flight) and service.lock.busy()).report()
    return stats
