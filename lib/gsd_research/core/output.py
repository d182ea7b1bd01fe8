"""The JSON envelope: one document on stdout per call, success or failure."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from gsd_research.core.tokens import count_tokens

# How the document of this call will be printed (set from --json-pretty and the command's name), so
# budgets count exactly that: the envelope the edge adds and the indentation of pretty JSON cost tokens too.
_PRINT_PRETTY = False
_COMMAND: str | None = None


def set_pretty(pretty: bool) -> None:
    """Record whether this call prints pretty JSON."""
    global _PRINT_PRETTY
    _PRINT_PRETTY = bool(pretty)


def set_command(name: str | None) -> None:
    """Record the command name the edge will put into the envelope."""
    global _COMMAND
    _COMMAND = name


def dumps(doc: Any, pretty: bool = False) -> str:
    """Strict JSON (RFC 8259): a non-finite number (`1e999` read from a file) is null, never `Infinity`."""
    layout = {"indent": 2} if pretty else {"separators": (",", ":")}
    try:
        return json.dumps(doc, ensure_ascii=False, default=str, allow_nan=False, **layout)
    except ValueError:  # the rare document with a non-finite number: walked once
        return json.dumps(_finite(doc), ensure_ascii=False, default=str, allow_nan=False, **layout)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def document_tokens(doc: Any) -> int:
    """Estimated cl100k tokens of the document as it will be printed: with the envelope's `success` and
    `command` when the payload lacks them, compact or pretty (--json-pretty), and the final newline."""
    if isinstance(doc, dict) and "success" not in doc:
        doc = success(_COMMAND or "gsd-research", doc)
    return count_tokens(dumps(doc, _PRINT_PRETTY) + "\n")


def success(command: str, payload: dict) -> dict:
    doc = {"success": True, "command": command}
    doc.update(payload)
    return doc


def failure(command: str | None, error: dict) -> dict:
    return {"success": False, "command": command or "gsd-research", "error": error}


def emit(doc: dict, pretty: bool = False, stream=None) -> None:
    """Print the document, with any known API key scrubbed out."""
    from gsd_research.core.secrets import scrub

    stream = stream or sys.stdout
    text = scrub(dumps(doc, pretty)) + "\n"
    try:
        stream.write(text)
    except UnicodeEncodeError:  # a non-UTF-8 stdout (PYTHONIOENCODING=ascii, odd locales): send UTF-8 bytes
        stream.flush()
        stream.buffer.write(text.encode("utf-8", "replace"))  # a lone surrogate is no UTF-8: written as ?
    stream.flush()
