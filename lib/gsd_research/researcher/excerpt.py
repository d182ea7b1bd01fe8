"""A passage cut to fit a token budget around what the query matched, with its omissions marked.

Keeping the beginning of a passage can drop the very line that made it match (an identifier at its end).
When the passage holds the query's terms beyond the part a plain cut keeps, the window starts a few lines
before the best-matching line instead. The text stays a verbatim slice of the passage; an omitted beginning
or end is marked with `…` (and the entry says `"truncated": true`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gsd_research.core.tokens import cut_to_tokens

MARK = "…"
CONTEXT_SHARE = 0.3  # of the room, at most, for the lines before the matching line
_TERM = re.compile(r"[^\W_](?:[\w.+:/#@-]*[^\W_])?")
_STOP = frozenset("the and for with from that this what which how does are was were you your not can "
                  "into about when where who why use using its".split())


def query_terms(query: str) -> list[str]:
    """The query's words and identifiers worth finding (lower case, longest first)."""
    words = {w.lower() for w in _TERM.findall(query)}
    return sorted((w for w in words if len(w) >= 3 and w not in _STOP), key=lambda w: (-len(w), w))


def _anchor(text: str, terms: list[str]) -> int | None:
    """Where the best match starts: the whole query's longest term if it is distinctive, else the line
    holding the most query term characters."""
    lower = text.lower()
    if not terms:
        return None
    best, best_score, offset = None, 0, 0
    for line in lower.splitlines(keepends=True):
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
    anchor = _anchor(text, query_terms(query))
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
