"""Fit an answer into --max-tokens: whole results first, then a cut on sentence boundaries."""

from __future__ import annotations

import json
from collections.abc import Callable

from gsd_research.core import session
from gsd_research.core.errors import UsageError
from gsd_research.core.output import document_tokens
from gsd_research.core.tokens import count_tokens, cut_to_tokens

REF = session.REF_KEY
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


def too_small(max_tokens: int, need: int, what: str = "its envelope alone needs") -> UsageError:
    return UsageError(f"--max-tokens {max_tokens} is too small for this answer ({what} {need})",
                      suggestions=[f"Use --max-tokens {max(need + 200, 500)} or more"])


def envelope_tokens(doc: dict, max_tokens: int) -> int:
    """The tokens of `doc` as it stands (its text left out, a cut answer's cursor in): refused when over the
    budget, since no text added to it can bring it back under."""
    overhead = document_tokens(doc)
    if overhead > max_tokens:
        raise too_small(max_tokens, overhead)
    return overhead


def settle_answer(doc: dict, max_tokens: int) -> dict:
    """The last word on an answer that counts its tokens (core.runtime.AgentCommand, for every command):
    `tokens_used` is the printed document's count, whatever was added after fitting, and an answer over
    --max-tokens is refused rather than printed."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or "tokens_used" not in meta:
        return doc
    for _ in range(4):  # the figure's own digits count: settles in one or two rounds
        used = document_tokens(doc)
        if meta["tokens_used"] == used:
            break
        meta["tokens_used"] = used
    if used > max_tokens:
        raise too_small(max_tokens, used, "it needs")
    return doc


STAND_IN = "text " * 100  # a dry answer's text: over a cut's cursor, so it is cut, cursor and all, where a real one is


def refuse_early(answer: Callable[[], object]) -> None:
    """Fit the answer a command would give before a provider is paid for it (`answer()`: built from what is
    known then, with STAND_IN as its text; a model asked for a budget this small writes more than fits): a
    budget too small for it is refused here, at no cost, with the fitter's own error. In a session that returned
    a passage of the same source before, the answer may name it instead, which is shorter: refused only if that
    does not fit either.
    The session's ledger keeps nothing of it; the real answer is fitted afresh."""
    led = session.current()
    try:
        answer()
    except UsageError:
        if not led.dedupes:
            raise
        led.repeats = True
        try:
            answer()
        finally:
            led.repeats = False
    finally:
        led.start_fit()


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
                results_key: str = "results", always_one: bool = True, dedupe: bool = True) -> dict:
    """Put as many `results` into `doc` as the budget allows; fill metadata; return `doc`. With `dedupe`
    (results that are passages, not e.g. verdicts) the session's passages become references. With
    `always_one`, a budget that holds none of the results is a usage error.

    Each result gets a `tokens` field (its text's tokens). `metadata.tokens_used` is the estimated
    cl100k size of the whole printed document and never exceeds `max_tokens`.
    """
    meta = doc.setdefault("metadata", {})
    led = session.current()
    led.start_fit()
    frame = session.shell(doc, results_key)
    if dedupe:
        _dedupe_siblings(doc, results_key, led)
    raw = results
    results, pids = _dedupe(results, text_key, led if dedupe else session.Ledger(None, False))
    meta.update({"total_available": len(results), "returned": len(results), "tokens_used": max_tokens,
                 "max_tokens": max_tokens, "truncated": False})
    _reserve_session(meta, led, max_tokens)
    doc[results_key] = []
    overhead = envelope_tokens(doc, max_tokens)
    window = _window(results, raw, pids, max_tokens - overhead, text_key, always_one)
    kept = _pack(results[:window], max_tokens - overhead, text_key, always_one)
    if len(kept) < len(results) or any(r.get("truncated") for r in kept):
        meta["next"] = PLACEHOLDER_NEXT  # room for the cursor, then the real token of the same length
        kept = _pack(results[:window], max_tokens - envelope_tokens(doc, max_tokens), text_key, always_one)
    doc[results_key] = kept
    meta["returned"] = len(kept)
    meta["truncated"] = len(kept) < len(results) or any(r.get("truncated") for r in kept)
    doc["metadata"] = doc.pop("metadata")  # results first, metadata last, as in DESIGN.md
    _settle(doc, results_key, text_key, max_tokens)
    if always_one and results and not doc[results_key]:  # an empty page and a cursor: no answer, refused
        raise too_small(max_tokens, meta["tokens_used"] + _least_cost(results[0], text_key),
                        "its envelope and first result need")
    _session_results(doc, meta, led, results, pids, frame, results_key, text_key, max_tokens)
    return doc


def _pack(results: list[dict], remaining: int, text_key: str, always_one: bool) -> list[dict]:
    """Whole results while they fit in `remaining` tokens, then the next one cut (if worth its framing)."""
    kept: list[dict] = []
    for item in results:
        item = dict(item)
        if REF not in item:
            item["tokens"] = count_tokens(str(item.get(text_key, "")))
        cost = json_tokens(item) + 1
        if cost <= remaining:
            kept.append(item)
            remaining -= cost
            continue
        cut = None if REF in item else _cut_item(item, remaining, text_key)
        if cut is not None and (cut["tokens"] >= MIN_CUT_TOKENS or (always_one and not kept)):
            kept.append(cut)
        break
    return kept


def _least_cost(item: dict, text_key: str) -> int:
    """The fewest tokens a result takes in an answer: whole, or cut to MIN_CUT_TOKENS of its text."""
    shell = dict(item, **{text_key: "", "tokens": 0, "truncated": True})
    return min(json_tokens(item), json_tokens(shell) + MIN_CUT_TOKENS) + 8  # its separator, the cut's slack


def _session_results(doc: dict, meta: dict, led, results: list[dict], pids: list[tuple], frame: dict,
                     results_key: str, text_key: str, max_tokens: int) -> None:
    """After fitting: the cursor of a cut answer, the passages returned whole, the note on references."""
    if meta.get("next") == PLACEHOLDER_NEXT:
        rest = _rest_results(doc[results_key], results, text_key) if meta["truncated"] else []
        if rest:
            meta["next"] = led.mint_cursor({"command": current_command(), "kind": "results", "frame": frame,
                                            "key": results_key, "text_key": text_key, "items": rest})
        else:
            del meta["next"]
    for item, (pid, offset, whole, _origin) in zip(doc[results_key], pids, strict=False):
        if REF not in item and pid:
            shown = offset + len(str(item.get(text_key, ""))) if item.get("truncated") else len(whole)
            led.returned(pid, whole[:shown], source_of(item), whole=shown >= len(whole))
    if any(REF in item for item in doc[results_key]):
        meta["expand"] = f"{session.EXPAND} REF"
    _settle(doc, results_key, text_key, max_tokens)


PLACEHOLDER_NEXT = f"{session.EXPAND} c{'0' * session.CURSOR_DIGITS}"


def current_command() -> str | None:
    from gsd_research.core import output

    return output._COMMAND


def source_of(item: dict) -> str:
    """Where a passage comes from, part of its identity in the session: a page's URL, a knowledge-base
    passage's `repository:document_path` (as researcher search names it, so a continuation's passage is the
    first answer's)."""
    if item.get("document_path") and not item.get("url"):
        return f"{item.get('repository', '')}:{item['document_path']}"
    return str(item.get("url") or item.get("source_url") or item.get("source") or item.get("title") or "")


def _dedupe(results: list[dict], text_key: str, led) -> tuple[list[dict], list[tuple]]:
    """Passages this session returned before become references (named, expandable), so the budget goes to new
    text; one returned only in part becomes its reference and its rest (`continued`). Returns the results and,
    for each, (passage id, offset of its text in the passage, the whole passage, index in `results`)."""
    out, pids = [], []
    for index, item in enumerate(results):
        text = str(item.get(text_key, ""))
        if REF in item:
            out.append(item)
            pids.append(("", 0, text, index))
            continue
        source = source_of(item)
        pid = session.passage_id(text, source)
        entry = led.seen(pid, source)
        if entry is not None:
            out.append(led.reference(pid, entry))
            pids.append(("", 0, text, index))
            seen = int(entry.get("chars", len(text)))
            if seen >= len(text):
                continue
            rest = text[seen:]
            offset = seen + len(rest) - len(rest.lstrip())
            item = dict(item, **{text_key: text[offset:], "continued": True})
            pids.append((pid, offset, text, index))
        else:
            pids.append((pid, 0, text, index))
        out.append(item)
    return out, pids


def _drop_described(doc: dict, meta: dict, key: str) -> None:
    """A repeated text's answer: its other fenced texts and the structured metadata about how the text was made
    (lists, objects) leave with it; scalar metadata stays."""
    for name in session.fenced_keys(doc):
        if name != key:
            del doc[name]
    for name in [k for k, v in meta.items() if isinstance(v, list | dict) and k != "session"]:
        del meta[name]


SIBLING_CHARS = 200  # a shorter fenced text (a title) costs less than its reference


def _dedupe_siblings(doc: dict, key: str, led) -> None:
    """The answer's other fenced texts (a search's summary beside its results) are passages too."""
    for name in session.fenced_keys(doc):
        text = doc[name]
        if name == key or not isinstance(text, str) or len(text) < SIBLING_CHARS:
            continue
        pid = session.passage_id(text, name)
        entry = led.seen(pid, name)
        if entry is not None:
            doc[name] = led.reference(pid, entry)
        else:
            led.returned(pid, text, name)


def _window(results: list[dict], raw: list[dict], pids: list[tuple], room: int, text_key: str,
            always_one: bool) -> int:
    """How many of `results` this answer may hold: those standing for the results it would hold were none a
    reference. The room references free is not filled with lower-ranked results: the answer costs less, and
    its `next` gives the rest."""
    if len(results) == len(raw) and not any(REF in r for r in results):
        return len(results)
    shown = len(_pack(raw, room, text_key, always_one))
    return sum(1 for p in pids if p[3] < shown)


def _reserve_session(meta: dict, led, max_tokens: int) -> None:
    """What the session has spent, with this answer counted at its whole budget (the printed figure is never
    longer)."""
    if led.active:
        meta["session"] = led.spent(max_tokens)


def _rest_results(kept: list[dict], results: list[dict], text_key: str) -> list[dict]:
    """What a cut answer left out: the rest of its cut result (same fields, `continued`), then those after."""
    rest = [dict(r) for r in results[len(kept):]]
    if kept and kept[-1].get("truncated") and REF not in kept[-1]:
        whole = dict(results[len(kept) - 1])
        text, cut = str(whole.get(text_key, "")), str(kept[-1].get(text_key, ""))
        if text.startswith(cut):
            whole[text_key] = text[len(cut):].lstrip()
            whole["continued"] = True
            whole.pop("tokens", None)
            rest.insert(0, whole)
    return rest


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
        target = last.get("tokens", 0) - over - 8
        if target >= MIN_CUT_TOKENS and REF not in last:
            cut, _ = cut_json_text(str(last.get(text_key, "")), target)
            last[text_key], last["tokens"], last["truncated"] = cut, count_tokens(cut), True
        else:
            items.pop()
        meta["returned"] = len(items)
        meta["truncated"] = True
    meta["tokens_used"] = document_tokens(doc)


def fit_text(doc: dict, field_path: tuple[str, ...], max_tokens: int, *, dedupe: bool = True) -> dict:
    """Cut one text field of `doc` (by key path) so the whole document fits; records truncation. A text this
    session returned before becomes a reference (`metadata.ref`); a cut one gets `metadata.next`."""
    meta = doc.setdefault("metadata", {})
    meta.setdefault("max_tokens", max_tokens)
    meta["tokens_used"] = max_tokens
    led = session.current()
    led.start_fit()
    parent = doc
    for key in field_path[:-1]:
        parent = parent[key]
    last = field_path[-1]
    text = str(parent.get(last) or "")
    frame = session.shell(doc, field_path[0]) if len(field_path) == 1 else None
    if dedupe:
        _dedupe_siblings(doc, field_path[0], led)
    source = source_of(doc)
    pid = session.passage_id(text, source)
    seen = led.seen(pid, source) if dedupe and text else None
    if seen is not None:  # what described the text (its title, how it was made) went with it too
        _drop_described(doc, meta, field_path[0])
        meta[REF] = led.reference(pid, seen)
        meta["expand"] = f"{session.EXPAND} REF"
        text = ""
    _reserve_session(meta, led, max_tokens)
    parent[last] = ""
    meta.setdefault("truncated", False)
    overhead = envelope_tokens(doc, max_tokens)
    if frame is not None and json_tokens(text) > max_tokens - overhead - 4:
        meta["next"] = PLACEHOLDER_NEXT
        overhead = envelope_tokens(doc, max_tokens)
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
    if text and not parent[last]:  # a text answer with no text is no answer: refused, never a success
        raise too_small(max_tokens, meta["tokens_used"] + MIN_CUT_TOKENS, "its envelope and shortest text need")
    _text_cursor(doc, meta, led, frame, field_path[0], text, parent[last], pid)
    return doc


def _text_cursor(doc: dict, meta: dict, led, frame, key: str, text: str, cut: str, pid: str) -> None:
    """Mint the cursor of a cut text (its rest), or record the text as returned whole."""
    rest = text[len(cut):].lstrip() if cut and text.startswith(cut) and len(cut) < len(text) else ""
    if meta.get("next") == PLACEHOLDER_NEXT:
        if rest:
            meta["next"] = led.mint_cursor({"command": current_command(), "kind": "text", "frame": frame, "key": key,
                                            "text": rest})
        else:
            del meta["next"]
            meta["tokens_used"] = document_tokens(doc)
    if text and cut == text:  # a repeat leaves out the other fenced values: kept for `expand`
        led.returned(pid, text, source_of(doc), beside={k: doc[k] for k in session.fenced_keys(doc) if k != key})


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
