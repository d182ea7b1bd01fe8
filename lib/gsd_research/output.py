"""The JSON envelope: one document on stdout per call, success or failure."""

from __future__ import annotations

import json
import sys
from typing import Any

from gsd_research.tokens import count_tokens


def dumps(doc: Any, pretty: bool = False) -> str:
    if pretty:
        return json.dumps(doc, ensure_ascii=False, indent=2, default=str)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str)


def document_tokens(doc: Any) -> int:
    """Estimated cl100k tokens of the compact document as printed."""
    return count_tokens(dumps(doc))


def success(command: str, payload: dict) -> dict:
    doc = {"success": True, "command": command}
    doc.update(payload)
    return doc


def failure(command: str | None, error: dict) -> dict:
    return {"success": False, "command": command or "gsd-research", "error": error}


def emit(doc: dict, pretty: bool = False, stream=None) -> None:
    """Print the document, with any known API key scrubbed out."""
    from gsd_research.secrets import scrub

    stream = stream or sys.stdout
    stream.write(scrub(dumps(doc, pretty)) + "\n")
    stream.flush()
