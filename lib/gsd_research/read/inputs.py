"""Local inputs of `summarize`, `analyze` and `image`: a regular file or stdin, read safely, as Markdown."""

from __future__ import annotations

import sys
from pathlib import Path

from gsd_research.core.errors import ExtractionFailed, GsdError, NotFound, UsageError

DOC_SUFFIXES = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx"}
MAX_INPUT_BYTES = 50_000_000


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


def read_input(source: str | None) -> tuple[str, str, list[str]]:
    """(label, markdown, hidden texts) of FILE, or of stdin when FILE is '-' or absent."""
    if source in (None, "-"):
        data, label, suffix = _read_stdin(), "stdin", ""
    else:
        path = Path(source).expanduser()
        data, label, suffix = read_regular(path, source, MAX_INPUT_BYTES), str(path), path.suffix.lower()
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


def read_regular(path: Path, shown: str, limit: int, what: str = "file") -> bytes:
    """The first `limit` bytes of a regular file. A folder, a device (/dev/zero) or a FIFO is refused
    without blocking: opened non-blocking and checked on the open descriptor (no check-then-open race)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise UsageError(f"{shown} is a directory, not a {what}", suggestions=["Pass one file, or pipe text in"]) from None
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"No such {what}: {shown}", suggestions=["Check the path", "Pipe text in with '-'"]) from None
    except PermissionError:
        raise UsageError(f"Cannot read {shown}: permission denied", suggestions=["Check the file's permissions"]) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise UsageError(f"{shown} is a directory, not a {what}", suggestions=["Pass one file, or pipe text in"])
        raise UsageError(f"{shown} is not a regular file (a device, FIFO or socket)",
                         suggestions=["Pass a regular file", "Pipe the text in with '-' instead"])
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def _read_stdin() -> bytes:
    """stdin's bytes; a closed stdin (`<&-`) reads as nothing."""
    stream = sys.stdin
    if stream is None:
        return b""
    try:
        return stream.buffer.read(MAX_INPUT_BYTES) if hasattr(stream, "buffer") else stream.read().encode()
    except (OSError, ValueError):  # a closed or unreadable descriptor
        return b""
