"""Fit an answer into --max-tokens: whole results first, then a cut on sentence boundaries."""

from __future__ import annotations

import json

from gsd_research.core.errors import UsageError
from gsd_research.core.output import document_tokens
from gsd_research.core.tokens import count_tokens, cut_to_tokens

MIN_CUT_TOKENS = 60  # a result cut shorter than this is not worth its framing


def json_tokens(value) -> int:
    return count_tokens(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def cut_json_text(text: str, room: int) -> tuple[str, bool]:
    """`text` cut to `room` JSON-escaped tokens. An answer's passages carry no markers (its one fence is two keys
    of their own, core.untrusted.seal); a text fenced on its own is cut inside its fence, never through it:
    the markers stay, or the whole text goes when not even they fit."""
    from gsd_research.core.untrusted import split_fence

    parts = split_fence(text)
    if parts is None:
        return cut_to_tokens(text, room, measure=json_tokens)
    head, inner, tail = parts
    if json_tokens(text) <= room:
        return text, False
    cut, _ = cut_to_tokens(inner, room, measure=lambda s: json_tokens(f"{head}{s}{tail}"))
    return (f"{head}{cut}{tail}" if cut else ""), True


def check_echo(text: str, max_tokens: int, what: str = "query", share: float = 0.5) -> None:
    """Refuse, before any provider is paid, a query the answer repeats but the budget cannot hold: it may
    take at most `share` of --max-tokens, the rest is for the answer itself."""
    if len(text) < max_tokens * share:  # fewer characters than tokens allowed: always fits (fast path)
        return
    used = count_tokens(text)
    if used > max_tokens * share:
        need = int(used / share) + 500
        raise UsageError(f"The {what} is {used} tokens; the answer repeats it and --max-tokens is {max_tokens}",
                         suggestions=[f"Shorten the {what} to its key terms", f"Or raise --max-tokens to {need}"])


def fit_results(doc: dict, results: list[dict], max_tokens: int, *, text_key: str = "content",
                results_key: str = "results", always_one: bool = True) -> dict:
    """Put as many `results` into `doc` as the budget allows; fill metadata; return `doc`.

    Each result gets a `tokens` field (its text's tokens). `metadata.tokens_used` is the estimated
    cl100k size of the whole printed document and never exceeds `max_tokens`.
    """
    meta = doc.setdefault("metadata", {})
    meta.update({"total_available": len(results), "returned": len(results), "tokens_used": max_tokens,
                 "max_tokens": max_tokens, "truncated": False})
    doc[results_key] = []
    overhead = document_tokens(doc)
    if overhead > max_tokens:
        raise UsageError(
            f"--max-tokens {max_tokens} is too small for this answer (its envelope alone needs {overhead})",
            suggestions=[f"Use --max-tokens {max(overhead + 200, 500)} or more"],
        )
    remaining = max_tokens - overhead
    kept: list[dict] = []
    for item in results:
        item = dict(item)
        item["tokens"] = count_tokens(str(item.get(text_key, "")))
        cost = json_tokens(item) + 1
        if cost <= remaining:
            kept.append(item)
            remaining -= cost
            continue
        cut = _cut_item(item, remaining, text_key)
        if cut is not None and (cut["tokens"] >= MIN_CUT_TOKENS or (always_one and not kept)):
            kept.append(cut)
        break
    doc[results_key] = kept
    meta["returned"] = len(kept)
    meta["truncated"] = len(kept) < len(results) or any(r.get("truncated") for r in kept)
    doc["metadata"] = doc.pop("metadata")  # results first, metadata last, as in DESIGN.md
    _settle(doc, results_key, text_key, max_tokens)
    return doc


def _cut_item(item: dict, remaining: int, text_key: str) -> dict | None:
    """`item` with its text cut so the whole item costs at most `remaining` tokens."""
    shell = dict(item, **{text_key: "", "tokens": 0, "truncated": True})
    room = remaining - json_tokens(shell) - 4
    if room <= 0:
        return None
    text = str(item.get(text_key, ""))
    cut, _ = cut_json_text(text, room)
    if not cut:
        return None
    shell[text_key] = cut
    shell["tokens"] = count_tokens(cut)
    return shell


def _settle(doc: dict, results_key: str, text_key: str, max_tokens: int) -> None:
    """Set tokens_used to the real document estimate, dropping or cutting more if needed."""
    meta = doc["metadata"]
    for _ in range(50):
        meta["tokens_used"] = document_tokens(doc)
        if meta["tokens_used"] <= max_tokens:
            return
        items = doc[results_key]
        if not items:
            break
        last = items[-1]
        over = meta["tokens_used"] - max_tokens
        target = last["tokens"] - over - 8
        if target >= MIN_CUT_TOKENS:
            cut, _ = cut_json_text(str(last.get(text_key, "")), target)
            last[text_key], last["tokens"], last["truncated"] = cut, count_tokens(cut), True
        else:
            items.pop()
        meta["returned"] = len(items)
        meta["truncated"] = True
    meta["tokens_used"] = document_tokens(doc)


def fit_text(doc: dict, field_path: tuple[str, ...], max_tokens: int) -> dict:
    """Cut one text field of `doc` (by key path) so the whole document fits; records truncation."""
    meta = doc.setdefault("metadata", {})
    meta.setdefault("max_tokens", max_tokens)
    meta["tokens_used"] = max_tokens
    parent = doc
    for key in field_path[:-1]:
        parent = parent[key]
    last = field_path[-1]
    text = str(parent.get(last) or "")
    parent[last] = ""
    meta.setdefault("truncated", False)
    overhead = document_tokens(doc)
    if overhead > max_tokens:
        raise UsageError(
            f"--max-tokens {max_tokens} is too small for this answer (its envelope alone needs {overhead})",
            suggestions=[f"Use --max-tokens {max(overhead + 200, 500)} or more"],
        )
    cut, truncated = cut_json_text(text, max_tokens - overhead - 4)
    parent[last] = cut
    meta["truncated"] = bool(meta.get("truncated")) or truncated
    for _ in range(20):
        meta["tokens_used"] = document_tokens(doc)
        if meta["tokens_used"] <= max_tokens:
            break
        cut, _ = cut_json_text(parent[last], json_tokens(parent[last]) - (meta["tokens_used"] - max_tokens) - 8)
        parent[last] = cut
        meta["truncated"] = True
    return doc


def drop_cut_warnings(doc: dict, results_key: str = "results", index_key: str = "result") -> dict:
    """After fit_results: `injection_warnings` only for the results the answer still holds (`index_key`:
    their 1-based index), `injection_flagged` only while one is left, `tokens_used` counted again."""
    warnings = doc.get("injection_warnings")
    if warnings is None:
        return doc
    kept = [w for w in warnings if not isinstance(w.get(index_key), int) or w[index_key] <= len(doc[results_key])]
    if kept:
        doc["injection_warnings"] = kept
    else:
        doc.pop("injection_warnings")
        doc.pop("injection_flagged", None)
        doc.pop("injection_warnings_more", None)
    if len(kept) != len(warnings) and isinstance(doc.get("metadata"), dict):
        doc["metadata"]["tokens_used"] = document_tokens(doc)
    return doc
