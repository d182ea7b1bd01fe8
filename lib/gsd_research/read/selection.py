"""What of a long source a model reads, within `llm.max_input_tokens`.

A source that fits is read whole. A longer one with a focus (fetch and summarize `--focus`, analyze's question)
is read as its beginning plus the sections most about the focus (BM25 over sections of about 500 tokens, so text
repeated in every section weighs nothing), in their order, each gap marked; without a focus, or when no section
mentions it, as its beginning. A changelog's last section is no longer invisible to a question about it, and
the answer says what was read (`metadata.source_cut`), so a summary of part of a page never passes for one of
all of it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

SCAN_CHARS = 4_000_000  # a longer source is chosen from its first 4 M characters (a few seconds at most)
SECTION_CHARS = 2_000  # about 500 tokens: a section, or a part of a long one
GAP = "\n\n[…]\n\n"  # where the source goes on unread
K1, B = 1.2, 0.75  # BM25
_TERM = re.compile(r"[a-z0-9](?:[a-z0-9_.'-]*[a-z0-9])?")
_STOP = frozenset("""a an the and or but if then of to in on at by for with from as is are was were be been it its
this that these those what when where which who why how do does did has have had not no can will about into
there their they them we you your our i me my all any each more most other some such than too very also""".split())


@dataclass(frozen=True)
class Reading:
    text: str  # what the model reads
    cut: dict | None = None  # {"read_tokens", "chosen_by": "focus" | "beginning"}: the source was not read whole


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


def _terms(text: str) -> set[str]:
    return {t for t in _TERM.findall(text.lower()) if t not in _STOP and len(t) > 1}


def _sections(markdown: str) -> list[tuple[str, str]]:
    """(heading, text) parts of about SECTION_CHARS: a heading starts one; a long section goes on in several,
    each scored with its heading."""
    parts: list[tuple[str, str]] = []
    heading, current = "", []
    for para in (piece for block in markdown.split("\n\n") for piece in _pieces(block)):
        starts = para.lstrip().startswith("#")
        if current and (starts or sum(map(len, current)) + len(para) > SECTION_CHARS):
            parts.append((heading, "\n\n".join(current)))
            current = []
        if starts:
            heading = para.strip().splitlines()[0]
        current.append(para)
    if current:
        parts.append((heading, "\n\n".join(current)))
    return parts


def _pieces(paragraph: str) -> list[str]:
    """A paragraph longer than a section cut on spaces (minified text, a wall of prose)."""
    pieces = []
    while len(paragraph) > SECTION_CHARS:
        cut = paragraph.rfind(" ", SECTION_CHARS // 2, SECTION_CHARS)
        cut = cut if cut > 0 else SECTION_CHARS
        pieces.append(paragraph[:cut])
        paragraph = paragraph[cut:].lstrip()
    return [*pieces, paragraph]


def _about(markdown: str, terms: set[str], limit: int) -> str | None:
    """The beginning and the best sections for `terms` within about `limit` tokens; None when none holds one."""
    sections = _sections(markdown)
    if not terms or len(sections) < 2:
        return None
    counts = [Counter(t for t in _TERM.findall(f"{h}\n{text}".lower()) if t in terms) for h, text in sections]
    lengths = [len(text) for _, text in sections]
    average = sum(lengths) / len(lengths)
    held = Counter(t for c in counts for t in c)
    idf = {t: math.log(1 + (len(sections) - n + 0.5) / (n + 0.5)) for t, n in held.items()}
    scores = [sum(idf[t] * n * (K1 + 1) / (n + K1 * (1 - B + B * length / average)) for t, n in c.items())
              for c, length in zip(counts, lengths, strict=True)]
    if not any(scores[1:]):
        return None
    room = limit * _chars_per_token(markdown)
    chosen, used = {0}, lengths[0]
    for i in sorted(range(1, len(sections)), key=lambda i: -scores[i]):
        if scores[i] <= 0 or used + lengths[i] + len(GAP) > room:
            continue
        chosen.add(i)
        used += lengths[i] + len(GAP)
    out, last = [], -1
    for i in sorted(chosen):
        out.append((GAP if i != last + 1 and out else "\n\n" if out else "") + sections[i][1])
        last = i
    return "".join(out) + (GAP if last != len(sections) - 1 else "")


def _chars_per_token(markdown: str) -> float:
    from gsd_research.core.tokens import count_tokens

    sample = markdown[:20_000]
    return max(1.0, 0.9 * len(sample) / max(1, count_tokens(sample)))
