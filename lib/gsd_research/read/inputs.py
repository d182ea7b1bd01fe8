"""Local inputs of `summarize`, `analyze` and `image`: a regular file or stdin, read safely, as Markdown."""

from __future__ import annotations

from pathlib import Path

from gsd_research.core.errors import ExtractionFailed, GsdError, UsageError
from gsd_research.core.input_files import MB, read_file, read_stdin

DOC_SUFFIXES = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx"}
MAX_INPUT_MB = 50  # a file or stdin for summarize/analyze; config inputs.max_mb
INPUT_HINTS = ["Pass one file, or pipe text in with '-'"]


def convert(body: bytes, kind: str) -> str:
    """A PDF or Office document as Markdown (docling); a broken one is an extraction failure."""
    from gsd_research.read.extract import convert_document

    try:
        return convert_document(body, kind)
    except GsdError:
        raise
    except Exception as exc:  # noqa: BLE001 - a broken document is an extraction failure, not a crash
        raise ExtractionFailed(f"Cannot convert the {kind.upper()} document ({exc.__class__.__name__})",
                               suggestions=["Check that the file is not corrupt or password-protected"]) from None


def read_input(source: str | None, config) -> tuple[str, str, list[str]]:
    """(label, markdown, hidden texts) of FILE, or of stdin when FILE is '-' or absent."""
    cap = int(config.number("inputs.max_mb", MAX_INPUT_MB) * MB)
    if source in (None, "-"):
        data = read_stdin(cap, what="document", setting="inputs.max_mb", suggestions=INPUT_HINTS)
        label, suffix = "stdin", ""
    else:
        path = Path(source).expanduser()
        data = read_file(path, cap, what="document", setting="inputs.max_mb", shown=source, suggestions=INPUT_HINTS)
        label, suffix = str(path), path.suffix.lower()
    hidden: list[str] = []
    if suffix in DOC_SUFFIXES:
        return label, convert(data, DOC_SUFFIXES[suffix]), hidden
    if b"\0" in data[:8192]:
        raise UsageError(f"{label} looks binary, not text",
                         suggestions=["Pass text, Markdown, HTML, PDF, DOCX, PPTX or XLSX",
                                      "For an image use gsd-research image PATH"])
    text = data.decode("utf-8", "replace")
    if suffix in (".html", ".htm") or text.lstrip()[:200].lower().startswith(("<!doctype html", "<html")):
        from gsd_research.read.extract import extract

        found = extract(data)
        text, hidden = found.markdown, found.hidden_text
    if not text.strip():
        raise UsageError(f"Nothing to read in {label}", suggestions=["Pass a non-empty file or pipe text in"])
    return label, text, hidden
