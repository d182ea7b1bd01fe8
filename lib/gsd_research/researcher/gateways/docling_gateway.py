"""Document conversion: docling for rich formats, a direct path for Markdown/text, and for PDFs without a text
layer OCR by the `tesseract` command (Debian package tesseract-ocr) on pages rendered by pypdfium2, docling's
PDF backend. No PyTorch: docling's own OCR options need its layout models, which this install leaves out."""

from __future__ import annotations

import importlib.util
import logging
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from gsd_research.researcher.chunking import normalize_newlines

TEXT_TYPES = {".md": True, ".markdown": True, ".txt": False, ".text": False, ".rst": False}
DPI = 300
PAGE_TIMEOUT = 180  # seconds of tesseract per page
INSTALL_FIX = ("Install the tesseract OCR command (Debian/Ubuntu: sudo apt-get install tesseract-ocr; macOS: "
               "brew install tesseract), then run: researcher index {name}")
_PLACEHOLDER = re.compile(r"<!--.*?-->", re.DOTALL)  # docling's "<!-- image -->" and the like


class ConversionError(Exception):
    """A file that cannot be read or converted (unreadable, corrupt, unsupported)."""


class ConvertedDocument:
    """The text of a converted document (Markdown when structure is known) and where it came from:
    `text` (the file's own text), `ocr` (read by tesseract) or `none` (no text besides image placeholders)."""

    def __init__(self, path: str, text: str, markdown: bool, source: str = "text") -> None:
        self.path, self.text, self.markdown = path, normalize_newlines(text), markdown
        self.source = source if _PLACEHOLDER.sub("", self.text).strip() else "none"


def _decode_text(data: bytes, path: str) -> str:
    if b"\x00" in data[:65536]:
        raise ConversionError(f"{path}: binary or corrupt content in a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


class DoclingGateway:
    """Converts files with docling, imported only when a non-text file is met."""

    def __init__(self) -> None:
        self._converter = None

    def _build_converter(self):
        """The full pipeline when docling's layout models (PyTorch) are installed, else the native PDF one."""
        for name in ("docling", "docling_core", "RapidOCR", "pypdfium2"):
            logging.getLogger(name).setLevel(logging.ERROR)
        from docling.datamodel.base_models import InputFormat
        from docling.document_converter import DocumentConverter, PdfFormatOption

        if all(importlib.util.find_spec(m) is not None for m in ("torch", "docling_ibm_models")):
            return DocumentConverter()
        from docling.backend.pypdfium2_backend import PyPdfiumDocumentBackend
        from docling.datamodel.pipeline_options import NativePdfPipelineOptions
        from docling.pipeline.native_pdf_pipeline import NativePdfPipeline

        pdf = PdfFormatOption(pipeline_cls=NativePdfPipeline, pipeline_options=NativePdfPipelineOptions(),
                              backend=PyPdfiumDocumentBackend)
        return DocumentConverter(format_options={InputFormat.PDF: pdf})

    def convert(self, file_path: Path, rel: str) -> ConvertedDocument:
        """The document's text; raises ConversionError for unreadable or corrupt files."""
        suffix = file_path.suffix.lower()
        try:
            if suffix in TEXT_TYPES:
                return ConvertedDocument(rel, _decode_text(file_path.read_bytes(), rel), TEXT_TYPES[suffix])
            if self._converter is None:
                self._converter = self._build_converter()
            result = self._converter.convert(str(file_path), raises_on_error=True)
            # The text as written: no backslash before underscores and no HTML entities (an identifier like
            # `retry_after_ms` stays findable and quotable), tables without padding.
            markdown = result.document.export_to_markdown(escape_underscores=False, escape_html=False,
                                                          compact_tables=True)
            doc = ConvertedDocument(rel, markdown, True)
            if doc.source == "none" and suffix == ".pdf" and (command := tesseract()):
                try:
                    return ConvertedDocument(rel, ocr_pdf(file_path, command), False, source="ocr")
                except ConversionError as exc:
                    raise ConversionError(f"{rel}: no text layer, and OCR failed ({exc})") from None
            return doc
        except ConversionError:
            raise
        except OSError as exc:
            raise ConversionError(f"{rel}: cannot read ({exc.strerror or exc.__class__.__name__})") from None
        except Exception as exc:  # noqa: BLE001 - docling raises many types for corrupt input
            raise ConversionError(f"{rel}: conversion failed ({exc.__class__.__name__}: {str(exc)[:160]})") from None


def tesseract() -> str | None:
    """The tesseract command, when it is on PATH."""
    return shutil.which("tesseract")


def ocr_pdf(path: Path, command: str) -> str:
    """The text of every page (pages separated by a blank line), as tesseract reads the rendered page."""
    import pypdfium2 as pdfium

    pages: list[str] = []
    pdf = pdfium.PdfDocument(str(path))
    try:
        with tempfile.TemporaryDirectory(prefix="researcher-ocr-") as tmp:
            image = Path(tmp) / "page.png"
            for index in range(len(pdf)):
                page = pdf[index]
                try:
                    page.render(scale=DPI / 72).to_pil().save(image)
                finally:
                    page.close()
                pages.append(_read(command, image, index + 1))
    finally:
        pdf.close()
    return "\n\n".join(p for p in pages if p)


def _read(command: str, image: Path, number: int) -> str:
    try:
        proc = subprocess.run([command, str(image), "stdout"], capture_output=True, timeout=PAGE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ConversionError(f"tesseract failed on page {number} ({exc.__class__.__name__})") from None
    if proc.returncode != 0:
        raise ConversionError(f"tesseract failed on page {number}: "
                              f"{proc.stderr.decode(errors='replace').strip()[:160]}")
    text = proc.stdout.decode("utf-8", errors="replace").replace("\f", "")
    return "\n".join(line.rstrip() for line in text.strip().splitlines())
