"""Where a quote stands in a source: exact (typography and spacing aside), then fuzzy, with offsets.

Fuzzy matching compares letters and digits only (case, accents, punctuation, spacing, hyphenation and
Markdown markup aside) and accepts the editorial marks of quoting: `...`/`…` for left-out text and
`[bracketed]` words standing in for the original ones. A changed word, number, name or negation is a
different text: it is not found, and `closest` shows the passage that comes nearest, with what differs.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

TYPOGRAPHY = str.maketrans({"‘": "'", "’": "'", "‛": "'", "′": "'", "“": '"', "”": '"', "„": '"', "″": '"',
                            "–": "-", "—": "-", "‐": "-", "‑": "-", "‒": "-", "−": "-", "\u00ad": None,
                            "\u200b": None, "\u2060": None, "\ufeff": None})
_MARKUP = re.compile(r"!?\[([^\]]*)\]\([^)]*\)|<[^>]{1,200}>")  # links and images keep their text only
_EDITS = re.compile(r"\.\.\.|…|\[[^\]]{0,60}\]")
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_GAP = 600  # stream characters an ellipsis or a bracketed edit may stand for
MIN_SEGMENT = 8  # stream characters: shorter pieces between edits are not located on their own


@dataclass
class Located:
    start: int
    end: int
    method: str  # exact | fuzzy


def _blank_markup(text: str) -> str:
    """Markdown link targets, image sources and tags replaced by spaces of the same length (offsets kept)."""
    def keep_text(match: re.Match) -> str:
        whole, inner = match.group(0), match.group(1)
        if inner is None:
            return " " * len(whole)
        at = whole.index(inner) if inner else 0
        return " " * at + inner + " " * (len(whole) - at - len(inner))

    return _MARKUP.sub(keep_text, text)


@lru_cache(maxsize=64)  # a source is normalized once for all the claims that cite it
def _typographic(text: str) -> tuple[str, list[int]]:
    """Text with quotes/dashes unified, NFKC applied and spaces collapsed, and each char's source offset."""
    out: list[str] = []
    index: list[int] = []
    space = False
    for i, ch in enumerate(text):
        ch = ch.translate(TYPOGRAPHY)
        if not ch:
            continue
        if ch.isspace():
            if space:
                continue
            ch, space = " ", True
        else:
            space = False
        for c in unicodedata.normalize("NFKC", ch):
            out.append(c)
            index.append(i)
    return "".join(out), index


@lru_cache(maxsize=64)
def _stream(text: str) -> tuple[str, list[int]]:
    """Lower-case letters and digits without accents, each with its source offset."""
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        if not ch.isalnum():
            continue
        for c in unicodedata.normalize("NFKD", ch):
            if c.isalnum():
                out.append(c.lower())
                index.append(i)
    return "".join(out), index


def _boundary(text: str, start: int, end: int) -> bool:
    """The match starts and ends on word boundaries of the source."""
    return (start == 0 or not text[start - 1].isalnum()) and (end >= len(text) or not text[end].isalnum())


def locate(quote: str, source: str) -> Located | None:
    """The quote's position in `source` (character offsets), exact first, then fuzzy; None if absent."""
    quote = quote.strip()
    if not quote:
        return None
    norm_source, index = _typographic(source)
    norm_quote = _typographic(quote)[0].strip()
    at = norm_source.find(norm_quote)
    if at >= 0:
        return Located(index[at], index[at + len(norm_quote) - 1] + 1, "exact")
    return _fuzzy(quote, _blank_markup(source))


def _fuzzy(quote: str, source: str) -> Located | None:
    stream, index = _stream(source)
    segments = [s for s in (_stream(part)[0] for part in _EDITS.split(quote)) if s]
    if not segments:
        return None
    long_enough = [s for s in segments if len(s) >= MIN_SEGMENT] or [max(segments, key=len)]
    first, rest = long_enough[0], long_enough[1:]
    at = stream.find(first)
    while at >= 0:
        end = _follow(stream, at + len(first), rest)
        if end is not None:
            start, stop = index[at], index[end - 1] + 1
            if _boundary(source, start, stop):
                return Located(start, stop, "fuzzy")
        at = stream.find(first, at + 1)
    return None


def _follow(stream: str, pos: int, segments: list[str]) -> int | None:
    """End (stream offset) of the segments found in order, each within MAX_GAP of the previous one."""
    for segment in segments:
        at = stream.find(segment, pos, pos + MAX_GAP + len(segment))
        if at < 0:
            return None
        pos = at + len(segment)
    return pos


@lru_cache(maxsize=64)
def words(text: str) -> list[tuple[str, int, int]]:
    """(lower-case word, start, end) of every word."""
    return [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(text)]


def closest(quote: str, source: str) -> dict | None:
    """The source passage most like the quote (word-level similarity), with the words that differ."""
    qwords = [w for w, _, _ in words(_EDITS.sub(" ", quote))]
    swords = words(source)
    if not qwords or not swords:
        return None
    frequency: dict[str, int] = {}
    for w, _, _ in swords:
        frequency[w] = frequency.get(w, 0) + 1
    anchors = sorted({w for w in qwords if w in frequency}, key=lambda w: frequency[w])[:4]
    size = len(qwords)
    best = (0.0, 0, 0)
    for i, (w, _, _) in enumerate(swords):
        if w not in anchors:
            continue
        aligned = max(0, i - qwords.index(w))
        for start in sorted(range(max(0, aligned - 2), min(len(swords), aligned + 3)), key=lambda s: abs(s - aligned)):
            for length in (size, size + 1, size - 1, size + 2):  # a word added or left out
                window = [x for x, _, _ in swords[start:start + max(1, length)]]
                ratio = SequenceMatcher(None, qwords, window, autojunk=False).ratio() - 0.1 * abs(length - size)
                if ratio > best[0]:
                    best = (ratio, start, min(len(swords), start + max(1, length)))
    _, start, stop = best
    if stop <= start:
        return None
    window = [x for x, _, _ in swords[start:stop]]
    ratio = SequenceMatcher(None, qwords, window, autojunk=False).ratio()
    return {"start": swords[start][1], "end": swords[stop - 1][2], "similarity": round(ratio, 3),
            "quote_only": [w for w in dict.fromkeys(qwords) if w not in window][:8],
            "source_only": [w for w in dict.fromkeys(window) if w not in qwords][:8]}
