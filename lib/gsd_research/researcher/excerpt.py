"""A passage cut to a token budget around what the query matched (a plain cut can drop the very line that made
it match), still a verbatim slice of it, an omitted beginning or end marked `…`."""

from __future__ import annotations

import re
from collections.abc import Callable

from gsd_research.core.tokens import cut_to_tokens

MARK = "…"
CONTEXT_SHARE = 0.3  # of the room, at most, for the lines before the matching line
_TERM = re.compile(r"[^\W_](?:[\w.+:/#@-]*[^\W_])?")
_STOP = frozenset("the and for with from that this what which how does are was were you your not can "
                  "into about when where who why use using its".split())


def _anchor(text: str, query: str) -> int | None:
    """Where the best match starts: in the line holding the most characters of the query's words and
    identifiers worth finding."""
    terms = {w for w in {w.lower() for w in _TERM.findall(query)} if len(w) >= 3 and w not in _STOP}
    best, best_score, offset = None, 0, 0
    for line in text.lower().splitlines(keepends=True):
        score = sum(len(t) for t in terms if t in line)
        if score > best_score:
            best, best_score = offset + min(line.index(t) for t in terms if t in line), score
        offset += len(line)
    return best


def excerpt(text: str, query: str, room: int, measure: Callable[[str], int]) -> str:
    """`text` within `room` tokens by `measure` (markers included): its beginning when that keeps the best
    match, else a window from a little before the best-matching line. "" when nothing fits."""
    head, cut = cut_to_tokens(text, room - 1, measure=measure)
    if not cut:
        return text
    anchor = _anchor(text, query)
    if anchor is None:
        return head + MARK if head else ""
    newline = text.find("\n", anchor)
    line_end = newline if newline >= 0 else len(text)
    if len(head) >= line_end:
        return head + MARK
    start = text.rfind("\n", 0, anchor) + 1
    while start > 0:  # a few lines of context before the matching line
        before = text.rfind("\n", 0, start - 1) + 1
        if measure(text[before:anchor]) > CONTEXT_SHARE * room:
            break
        start = before
    if start >= anchor or measure(text[start:line_end]) > room - 2:
        start = anchor  # the matching line alone is too long: start at the match
    body, cut = cut_to_tokens(text[start:], room - 2, measure=measure)
    if not body:
        return ""
    return (MARK if start > 0 else "") + body + (MARK if cut else "")
