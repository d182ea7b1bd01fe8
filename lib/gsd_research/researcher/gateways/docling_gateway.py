"""Document conversion (docling for rich formats, a direct path for Markdown/text) and chunking."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

from gsd_research.researcher.chunking import Counter, chunk_text
from gsd_research.researcher.models import Fragment

TEXT_TYPES = {".md": True, ".markdown": True, ".txt": False, ".text": False, ".rst": False}


class ConversionError(Exception):
    """A file that cannot be read or converted (unreadable, corrupt, unsupported)."""


class ConvertedDocument:
    """The text of a converted document (Markdown when structure is known)."""

    def __init__(self, path: str, text: str, markdown: bool) -> None:
        self.path, self.text, self.markdown = path, text, markdown


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
            return ConvertedDocument(rel, result.document.export_to_markdown(), True)
        except ConversionError:
            raise
        except OSError as exc:
            raise ConversionError(f"{rel}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
        except Exception as exc:  # noqa: BLE001 - docling raises many types for corrupt input
            raise ConversionError(f"{rel}: conversion failed ({exc.__class__.__name__}: {str(exc)[:160]})") from None

    def chunk(self, document: ConvertedDocument) -> list[Fragment]:
        return chunk_text(document.text, document.path, self.counter, self.max_tokens, document.markdown)
