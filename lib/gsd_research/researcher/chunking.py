"""Structure-aware chunking whose fragments are the document's own text.

A document (Markdown, plain text, or the Markdown docling exports from PDF/DOCX/PPTX/XLSX/HTML, which keeps
docling's structure: heading levels, tables, lists, code) is read into blocks: headings, code fences,
tables, paragraphs. Consecutive blocks are packed into fragments of at most `max_tokens` tokens of the
embedding model, and every fragment is one contiguous slice of the text: nothing is re-joined, no break is
invented. A block too large for one fragment is cut on line boundaries, then (prose only) after sentences,
then between words, then between characters. The heading path where a fragment starts is kept apart as its
`breadcrumb` (shown as such, embedded in front of the text, never mixed into it).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gsd_research.researcher.models import Fragment

Counter = Callable[[list[str]], list[int]]
VERSION = 3  # part of the spool recipe and of the state record: fragments of another version are rebuilt
MAX_TOKENS = 254  # a fragment with its breadcrumb, within the model's 256 with [CLS] and [SEP]
BREADCRUMB_SEPARATOR = " > "
MIN_BUDGET = 16
TAIL_SHARE = 0.25  # a full fragment ends at a section boundary found in its last quarter
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TABLE = re.compile(r"^ {0,3}\|")
_ATTRIBUTES = re.compile(r"\s*\{\s*[:#.][^{}]*\}\s*$")  # a heading's attribute list: "Setup { #setup }"
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_WORDISH = re.compile(r"\w+|[^\w\s]")


def approx_counter(texts: list[str]) -> list[int]:
    """Word-piece-like count when no tokenizer is available (words and punctuation marks)."""
    return [len(_WORDISH.findall(t)) for t in texts]


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def embedding_text(fragment: Fragment) -> str:
    """What is embedded and indexed for a fragment: its breadcrumb (context) on a line before its text."""
    return f"{fragment.breadcrumb}\n{fragment.text}" if fragment.breadcrumb else fragment.text


@dataclass
class Block:
    """A span [start, end) of the text: a heading, code fence, table or paragraph, with the heading path
    in effect (for a heading, the path above it)."""

    start: int
    end: int
    kind: str
    path: tuple[str, ...]
    title: str = ""  # a heading's own title


class _Parser:
    """Line-by-line Markdown structure; plain text has paragraphs only."""

    def __init__(self, markdown: bool) -> None:
        self.markdown = markdown
        self.blocks: list[Block] = []
        self.path: list[tuple[int, str]] = []
        self.open: Block | None = None
        self.fence: str | None = None

    def _heading_path(self) -> tuple[str, ...]:
        return tuple(h for _, h in self.path)

    def close(self) -> None:
        if self.open is not None:
            self.blocks.append(self.open)
        self.open = None

    def _extend(self, kind: str, start: int, end: int) -> None:
        if self.open is None or self.open.kind != kind:
            self.close()
            self.open = Block(start, end, kind, self._heading_path())
        else:
            self.open.end = end

    def feed(self, line: str, start: int) -> None:
        end = start + len(line)
        if self.fence is not None:  # inside a code fence: everything up to the closing fence
            self.open.end = end
            stripped = line.strip()
            if stripped and set(stripped) == {self.fence[0]} and len(stripped) >= len(self.fence):
                self.fence = None
                self.close()
            return
        if not line.strip():
            self.close()
            return
        if self.markdown:
            if fence := _FENCE.match(line):
                self.fence = fence.group(1)
                self._extend("code", start, end)  # no code block is open here: a fence closes its own
                return
            if heading := _HEADING.match(line):
                self.close()
                level, title = len(heading.group(1)), _ATTRIBUTES.sub("", heading.group(2) or "").strip()
                self.blocks.append(Block(start, end, "heading", self._heading_path(), title))
                self.path = [(lv, h) for lv, h in self.path if lv < level] + ([(level, title)] if title else [])
                return
            if _TABLE.match(line):
                self._extend("table", start, end)
                return
        self._extend("text", start, end)


def parse_blocks(text: str, markdown: bool = True) -> list[Block]:
    """The document's blocks in order (offsets into `text`)."""
    parser = _Parser(markdown)
    pos = 0
    for line in text.split("\n"):
        parser.feed(line, pos)
        pos += len(line) + 1
    parser.close()
    return parser.blocks


_Unit = tuple[int, int, int, Block]  # start, end, tokens, block
_CUTS = {"lines": re.compile(r"\n"), "sentences": _SENTENCE_END, "words": re.compile(r"(?<=\S)\s+(?=\S)")}
_LEVELS = {True: ("lines", "sentences", "words", "chars"), False: ("lines", "words", "chars")}  # by prose


class _Chunker:
    """One document's text and token counter, and the sizes of the breadcrumbs met so far."""

    def __init__(self, text: str, count: Counter, max_tokens: int) -> None:
        self.text, self.count, self.max_tokens = text, count, max_tokens
        self.crumb_sizes: dict[str, int] = {"": 0}

    def crumb_size(self, crumb: str) -> int:
        if crumb not in self.crumb_sizes:
            self.crumb_sizes[crumb] = self.count([crumb])[0]
        return self.crumb_sizes[crumb]

    def crumb(self, path: tuple[str, ...]) -> str:
        """The heading path as a breadcrumb; a runaway one (over half the budget) keeps only its nearest headings."""
        parts = list(path)
        while parts and self.crumb_size(BREADCRUMB_SEPARATOR.join(parts)) > self.max_tokens // 2:
            parts.pop(0)
        return BREADCRUMB_SEPARATOR.join(parts)

    def budget(self, path: tuple[str, ...]) -> int:
        """The text's share of a fragment whose breadcrumb is `path`'s."""
        return max(MIN_BUDGET, self.max_tokens - self.crumb_size(self.crumb(path)))

    def units(self, blocks: list[Block]):
        """(start, end, tokens, block) per block; blocks over their budget cut into pieces."""
        sizes = self.count([self.text[b.start:b.end] for b in blocks])
        for block, n in zip(blocks, sizes, strict=True):
            budget = self.budget(block.path)
            if n <= budget:
                yield block.start, block.end, n, block
                continue
            for a, b, pn in self.split(block.start, block.end, budget, _LEVELS[block.kind == "text"]):
                yield a, b, pn, Block(a, b, block.kind, block.path)

    def split(self, start: int, end: int, budget: int, levels: tuple[str, ...]) -> list[tuple[int, int, int]]:
        """Slices of an oversized span that each fit the budget, cut at the first level that cuts it."""
        if levels[0] == "chars":
            return self.split_chars(start, end, budget)
        cuts = [start + m.end() for m in _CUTS[levels[0]].finditer(self.text[start:end])]
        bounds = [start, *(c for c in cuts if start < c < end), end]
        segments = [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if self.text[a:b].strip()]
        if len(segments) <= 1:
            return self.split(start, end, budget, levels[1:])
        sizes = self.count([self.text[a:b] for a, b in segments])
        pieces: list[tuple[int, int, int]] = []
        for (a, b), n in zip(segments, sizes, strict=True):
            parts = [(a, b, n)] if n <= budget else self.split(a, b, budget, levels[1:])
            for pa, pb, pn in parts:
                if pieces and pieces[-1][2] + pn <= budget:
                    pieces[-1] = (pieces[-1][0], pb, pieces[-1][2] + pn)
                else:
                    pieces.append((pa, pb, pn))
        return pieces

    def split_chars(self, start: int, end: int, budget: int) -> list[tuple[int, int, int]]:
        pieces = []
        while start < end:
            n_total = self.count([self.text[start:end]])[0]
            if n_total <= budget:
                pieces.append((start, end, n_total))
                break
            width = max(1, int((end - start) * budget / n_total * 0.9))
            while width > 1 and self.count([self.text[start:start + width]])[0] > budget:
                width = max(1, width * 3 // 4)
            pieces.append((start, start + width, self.count([self.text[start:start + width]])[0]))
            start += width
        return pieces

    def start_fragment(self, packed: list[list[_Unit]], unit: _Unit, budget: int) -> None:
        """Start a new fragment with `unit`, taking over the previous fragment's section tail when it fits (see
        `_section_tail`); trailing headings that do not fit with it become a fragment of their own (left out
        when the next fragment's breadcrumb shows them)."""
        carry = _section_tail(packed[-1], budget) if packed else []
        fits = bool(carry) and sum(u[2] for u in carry) + unit[2] <= self.budget(carry[0][3].path)
        bare = bool(carry) and all(u[3].kind == "heading" for u in carry)
        if fits or bare:
            del packed[-1][-len(carry):]
            packed += [[*carry, unit]] if fits else [carry, [unit]]
        else:
            packed.append([unit])

    def carried_by_next(self, units: list[_Unit], following: list[_Unit] | None) -> bool:
        """A fragment of headings alone whose headings the next fragment's breadcrumb shows in full: left out
        (the headings are not lost, and a title-only fragment would only be noise in both rankings)."""
        if following is None or any(u[3].kind != "heading" for u in units):
            return False
        shown = units[0][3].path + tuple(u[3].title for u in units)
        path = following[0][3].path
        return path[:len(shown)] == shown and self.crumb(path) == BREADCRUMB_SEPARATOR.join(path)


def _section_tail(units: list[_Unit], budget: int) -> list[_Unit]:
    """The units a full fragment hands to the next one so that it ends at a section boundary: its trailing
    headings (a fragment never ends on a bare heading), else everything from the first heading in its last
    TAIL_SHARE of the budget. At least one unit stays."""
    i = len(units)
    while i > 1 and units[i - 1][3].kind == "heading":
        i -= 1
    if i < len(units):
        return units[i:]
    tail = 0
    for j in range(len(units) - 1, 0, -1):
        tail += units[j][2]
        if tail > TAIL_SHARE * budget:
            break
        if units[j][3].kind == "heading":
            i = j
    return units[i:]


def chunk_text(text: str, document_path: str, count: Counter | None = None, max_tokens: int = MAX_TOKENS,
               markdown: bool = True) -> list[Fragment]:
    """Fragments of a document, in order: contiguous slices of `text`, each with its breadcrumb within
    `max_tokens` (counted by `count`, the embedding model's tokenizer)."""
    text = normalize_newlines(text)
    chunker = _Chunker(text, count or approx_counter, max_tokens)
    packed: list[list[_Unit]] = []
    used = budget = 0
    for unit in chunker.units(parse_blocks(text, markdown)):
        if packed and used + unit[2] <= budget:
            packed[-1].append(unit)
            used += unit[2]
            continue
        chunker.start_fragment(packed, unit, budget)
        budget = chunker.budget(packed[-1][0][3].path)
        used = sum(u[2] for u in packed[-1])
    out = []
    for i, units in enumerate(packed):
        if chunker.carried_by_next(units, packed[i + 1] if i + 1 < len(packed) else None):
            continue
        piece = text[units[0][0]:units[-1][1]].lstrip("\n").rstrip()
        if piece:
            out.append(Fragment(text=piece, document_path=document_path, fragment_index=len(out),
                                breadcrumb=chunker.crumb(units[0][3].path)))
    return out
