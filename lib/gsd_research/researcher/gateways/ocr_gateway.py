"""OCR of PDFs without a text layer: pages rendered by pypdfium2 (docling's PDF backend), read by the
`tesseract` command (Debian package tesseract-ocr). No PyTorch: docling's own OCR options need its layout
models, which this install leaves out."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

DPI = 300
PAGE_TIMEOUT = 180  # seconds of tesseract per page
INSTALL_FIX = ("Install the tesseract OCR command (Debian/Ubuntu: sudo apt-get install tesseract-ocr; macOS: "
               "brew install tesseract), then run: researcher index {name}")


class OcrError(Exception):
    """tesseract failed on a page (crash, timeout, unreadable image)."""


def tesseract() -> str | None:
    """The tesseract command, when it is on PATH."""
    return shutil.which("tesseract")


def ocr_pdf(path: Path, command: str | None = None) -> str:
    """The text of every page (pages separated by a blank line), as tesseract reads the rendered page."""
    import pypdfium2 as pdfium

    command = command or tesseract()
    if not command:
        raise OcrError("the tesseract command is not on PATH")
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
        raise OcrError(f"tesseract failed on page {number} ({exc.__class__.__name__})") from None
    if proc.returncode != 0:
        raise OcrError(f"tesseract failed on page {number}: {proc.stderr.decode(errors='replace').strip()[:160]}")
    text = proc.stdout.decode("utf-8", errors="replace").replace("\f", "")
    return "\n".join(line.rstrip() for line in text.strip().splitlines())
