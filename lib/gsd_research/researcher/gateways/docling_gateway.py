"""Document conversion (docling for rich formats, a direct path for Markdown/text, tesseract for PDFs without
a text layer) and chunking."""

from __future__ import annotations

import importlib.util
import logging
import re
from pathlib import Path

from gsd_research.researcher.chunking import Counter, chunk_text, normalize_newlines
from gsd_research.researcher.models import Fragment

TEXT_TYPES = {".md": True, ".markdown": True, ".txt": False, ".text": False, ".rst": False}


class ConversionError(Exception):
    """A file that cannot be read or converted (unreadable, corrupt, unsupported)."""


_PLACEHOLDER = re.compile(r"<!--.*?-->", re.DOTALL)  # docling's "<!-- image -->" and the like


def has_text(text: str) -> bool:
    """Whether a converted document holds any text besides image placeholders and whitespace."""
    return bool(_PLACEHOLDER.sub("", text).strip())


def export_markdown(document) -> str:
    """docling's Markdown of a document with its text as written: no backslash before underscores and no HTML
    entities (an identifier like `retry_after_ms` stays findable and quotable), tables without padding."""
    return document.export_to_markdown(escape_underscores=False, escape_html=False, compact_tables=True)


class ConvertedDocument:
    """The text of a converted document (Markdown when structure is known) and where it came from:
    `text` (the file's own text), `ocr` (read by tesseract) or `none` (no text found)."""

    def __init__(self, path: str, text: str, markdown: bool, source: str = "text") -> None:
        self.path, self.text, self.markdown = path, normalize_newlines(text), markdown
        self.source = source if has_text(self.text) else "none"


def layout_models_available() -> bool:
    """True when docling's layout models (PyTorch) are installed: then the full PDF pipeline is used."""
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "docling_ibm_models"))


def _decode_text(data: bytes, path: str) -> str:
    if b"\x00" in data[:65536]:
        raise ConversionError(f"{path}: binary or corrupt content in a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class DoclingGateway:
    """Converts files with docling (imported only when a non-text file is met) and chunks them."""

    def __init__(self, counter: Counter | None = None, max_tokens: int = 254) -> None:
        self._converter = None
        self.counter = counter
        self.max_tokens = max_tokens

    def _build_converter(self):
        for name in ("docling", "docling_core", "RapidOCR", "pypdfium2"):
            logging.getLogger(name).setLevel(logging.ERROR)
        from docling.datamodel.base_models import InputFormat
        from docling.document_converter import DocumentConverter, PdfFormatOption

        if layout_models_available():
            return DocumentConverter()
        from docling.backend.pypdfium2_backend import PyPdfiumDocumentBackend
        from docling.datamodel.pipeline_options import NativePdfPipelineOptions
        from docling.pipeline.native_pdf_pipeline import NativePdfPipeline

        pdf = PdfFormatOption(pipeline_cls=NativePdfPipeline, pipeline_options=NativePdfPipelineOptions(),
                              backend=PyPdfiumDocumentBackend)
        return DocumentConverter(format_options={InputFormat.PDF: pdf})

    def convert(self, file_path: Path, rel: str | None = None) -> ConvertedDocument:
        """The document's text; raises ConversionError for unreadable or corrupt files."""
        rel = rel or file_path.name
        suffix = file_path.suffix.lower()
        try:
            if suffix in TEXT_TYPES:
                return ConvertedDocument(rel, _decode_text(file_path.read_bytes(), rel), TEXT_TYPES[suffix])
            if self._converter is None:
                self._converter = self._build_converter()
            result = self._converter.convert(str(file_path), raises_on_error=True)
            doc = ConvertedDocument(rel, export_markdown(result.document), True)
            if doc.source == "none" and suffix == ".pdf":
                return self._ocr(file_path, rel, doc)
            return doc
        except ConversionError:
            raise
        except OSError as exc:
            raise ConversionError(f"{rel}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
        except Exception as exc:  # noqa: BLE001 - docling raises many types for corrupt input
            raise ConversionError(f"{rel}: conversion failed ({exc.__class__.__name__}: {str(exc)[:160]})") from None

    def _ocr(self, file_path: Path, rel: str, converted: ConvertedDocument) -> ConvertedDocument:
        """A PDF without a text layer, read by tesseract when it is installed (else returned as it is: no text)."""
        from gsd_research.researcher.gateways.ocr_gateway import OcrError, ocr_pdf, tesseract

        if not tesseract():
            return converted
        try:
            return ConvertedDocument(rel, ocr_pdf(file_path), False, source="ocr")
        except OcrError as exc:
            raise ConversionError(f"{rel}: no text layer, and OCR failed ({exc})") from None

    def chunk(self, document: ConvertedDocument) -> list[Fragment]:
        return chunk_text(document.text, document.path, self.counter, self.max_tokens, document.markdown)
