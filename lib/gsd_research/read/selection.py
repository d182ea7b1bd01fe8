"""What of a long source a model reads, within `llm.max_input_tokens`.

A source that fits is read whole. A longer one is read from its beginning, as it always was; with a focus
(fetch and summarize `--focus`, analyze's question) the beginning takes half of the room and the sections most
about the focus the other half: BM25 over parts of about 500 tokens, each scored with the headings above it
(a changelog's `### Fixed` belongs to its `## 5.0.0`), so text repeated in every section weighs nothing. A
chosen part brings the parts under its heading while room is left and is printed below its headings, gaps
marked. The answer says what was read (`metadata.source_cut`): a summary of part of a page never passes for
one of all of it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from gsd_research.core.tokens import UNSPACED

SCAN_CHARS = 4_000_000  # a longer source is chosen from its first 4 M characters (a few seconds at most)
PART_CHARS = 2_000  # about 500 tokens: a section, or a part of a long one
GAP = "\n\n[…]\n\n"  # where the source goes on unread
K1, B = 1.2, 0.75  # BM25
_TERM = re.compile(r"\w(?:[\w.'-]*\w)?")
_HEADING = re.compile(r"\n* {0,3}(#{1,6})[ \t]+\S")  # a Markdown (ATX) heading: `# `, not `#include` nor `  # x`
_UNSPACED = re.compile(f"[{UNSPACED}]")  # scripts without spaces between words (core.tokens)
_STOP = frozenset("""a an the and or but if then of to in on at by for with from as is are was were be been it its
this that these those what when where which who why how do does did has have had not no can will about into
there their they them we you your our i me my all any each more most other some such than too very also""".split())


@dataclass(frozen=True)
class Reading:
    text: str  # what the model reads
    cut: dict | None = None  # {"read_tokens", "chosen_by": "focus" | "beginning"}: the source was not read whole


@dataclass(frozen=True)
class _Part:
    headings: tuple[str, ...]  # the headings above it, outermost first (its own when it starts with one)
    text: str


def choose(markdown: str, focus: str | None, limit: int) -> Reading:
    from gsd_research.core.tokens import count_tokens, cut_to_tokens

    head, cut = cut_to_tokens(markdown[: limit * 8], limit)  # pre-cut by characters: huge pages stay fast
    if not cut and len(markdown) <= limit * 8:
        return Reading(markdown)
    chosen = _about(markdown[:SCAN_CHARS], _terms(focus or ""), limit)
    if chosen is None:
        return Reading(head, {"read_tokens": count_tokens(head), "chosen_by": "beginning"})
    text = cut_to_tokens(chosen, limit)[0]
    return Reading(text, {"read_tokens": count_tokens(text), "chosen_by": "focus"})


def _terms(text: str) -> list[str]:
    """Lower-cased terms, crudely stemmed (changes, changed: chang); a dotted version also as its prefixes
    (5.0.0 is found by 5.0); runs of a script written without spaces (Chinese, Japanese, Thai) as character pairs."""
    out = []
    for token in _TERM.findall(text.lower()):
        token = token[1:] if re.fullmatch(r"v\d+(?:\.\d+)+", token) else token  # v2.14.1 is 2.14.1
        if _UNSPACED.search(token):
            out += [token[i:i + 2] for i in range(max(1, len(token) - 1))]
        elif token not in _STOP and len(token) > 1:
            out.append(re.sub(r"(?:es|s|ed|ing)$", "", token) if token.isalpha() and len(token) > 4 else token)
            parts = token.split(".")
            if len(parts) > 2 and all(p.isdigit() for p in parts):
                out += [".".join(parts[:n]) for n in range(2, len(parts))]
    return out


def _parts(markdown: str) -> list[_Part]:
    """Parts of about PART_CHARS: a heading starts one; a long section goes on in several."""
    parts: list[_Part] = []
    stack: list[tuple[int, str]] = []  # (level, heading) above the current text
    current: list[str] = []
    for block in markdown.split("\n\n"):
        for piece in _pieces(block):
            heading = _HEADING.match(piece)
            level = len(heading.group(1)) if heading else 0
            if current and (level or sum(map(len, current)) + len(piece) > PART_CHARS):
                parts.append(_Part(tuple(h for _, h in stack), "\n\n".join(current)))
                current = []
            if level:
                stack = [(n, h) for n, h in stack if n < level] + [(level, piece.strip().splitlines()[0])]
            current.append(piece)
    if current:
        parts.append(_Part(tuple(h for _, h in stack), "\n\n".join(current)))
    return parts


def _pieces(paragraph: str) -> list[str]:
    """A paragraph longer than a part cut on spaces (minified text, a wall of prose)."""
    pieces = []
    while len(paragraph) > PART_CHARS:
        cut = paragraph.rfind(" ", PART_CHARS // 2, PART_CHARS)
        cut = cut if cut > 0 else PART_CHARS
        pieces.append(paragraph[:cut])
        paragraph = paragraph[cut:].lstrip()
    return [*pieces, paragraph]


def _scores(parts: list[_Part], terms: list[str]) -> list[float]:
    wanted = set(terms)
    counts = [Counter(t for t in _terms("\n".join([*p.headings, p.text])) if t in wanted) for p in parts]
    lengths = [len(p.text) for p in parts]
    average = sum(lengths) / len(lengths)
    held = Counter(t for c in counts for t in c)
    idf = {t: math.log(1 + (len(parts) - n + 0.5) / (n + 0.5)) for t, n in held.items()}
    return [sum(idf[t] * n * (K1 + 1) / (n + K1 * (1 - B + B * length / average)) for t, n in c.items())
            for c, length in zip(counts, lengths, strict=True)]


def _about(markdown: str, terms: list[str], limit: int) -> str | None:
    """The beginning (half of `limit`) and the best parts for `terms` after it, then the beginning's sequel in
    the room left; None when no part holds a term."""
    from gsd_research.core.tokens import count_tokens, cut_to_tokens

    if not terms:
        return None
    head = cut_to_tokens(markdown[: limit * 4], limit // 2)[0]
    parts = _parts(markdown[len(head):].lstrip("\n"))  # the first goes on where the beginning stops
    if sum(1 for p in parts if p.headings) < len(parts) // 2:
        return None  # no Markdown headings to tell where a section ends (NEWS, setext, plain text)
    scores = _scores(parts, terms) if parts else []
    if not any(scores):
        return None
    room = limit - count_tokens(head) - count_tokens(GAP)
    chosen: set[int] = set()
    for best in sorted(range(len(parts)), key=lambda i: -scores[i]):
        if scores[best] <= 0 or room <= 0:
            break
        room = _take(parts, chosen, _under(parts, best), room)
    _take(parts, chosen, range(len(parts)), room)  # room left: the beginning goes on, as it would have been read
    return head + "".join(_printed(parts, sorted(chosen)))


def _under(parts: list[_Part], first: int):
    """`first` and the parts after it under its heading (they come with it)."""
    yield first
    headings = parts[first].headings
    i = first + 1
    while i < len(parts) and parts[i].headings[:len(headings)] == headings:
        yield i
        i += 1


def _take(parts: list[_Part], chosen: set[int], indices, room: int) -> int:
    """The parts of `indices` added to `chosen` in order while they fit in `room` tokens; the room left."""
    from gsd_research.core.tokens import count_tokens

    for i in indices:
        if i in chosen:
            continue
        cost = count_tokens(parts[i].text) + 8
        if cost > room:
            break
        chosen.add(i)
        room -= cost
    return room


def _printed(parts: list[_Part], chosen: list[int]) -> list[str]:
    """The chosen parts in order (the first part goes on from the beginning); each run after a gap under its
    headings (those it does not start with)."""
    out, previous = [], -1
    for i in chosen:
        part = parts[i]
        if i != previous + 1:
            above = part.headings[:-1] if _HEADING.match(part.text) else part.headings  # its own is in its text
            out.append(GAP + "".join(f"{h}\n\n" for h in above) + part.text)
        else:
            out.append("\n\n" + part.text)
        previous = i
    if chosen and chosen[-1] != len(parts) - 1:
        out.append(GAP)
    return out
