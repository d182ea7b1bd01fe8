"""Structure-aware chunking of Markdown/plain text: heading-scoped, block-packed, token-bounded.

Equivalent in spirit to docling's HybridChunker (sections by heading, blocks never split unless
they alone exceed the budget, each fragment prefixed with its heading path) without its hub
tokenizer download: token counts come from the local tokenizer of the embedding model.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gsd_research.researcher.models import Fragment

Counter = Callable[[list[str]], list[int]]
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
_WORDISH = re.compile(r"\w+|[^\w\s]")


def approx_counter(texts: list[str]) -> list[int]:
    """Word-piece-like count when no tokenizer is available (words and punctuation marks)."""
    return [len(_WORDISH.findall(t)) for t in texts]


class _SectionParser:
    """Line-by-line Markdown structure: heading path, code fences, blank-line separated blocks."""

    def __init__(self, markdown: bool) -> None:
        self.markdown = markdown
        self.sections: list[tuple[list[str], list[str]]] = []
        self.path: list[tuple[int, str]] = []
        self.blocks: list[str] = []
        self.current: list[str] = []
        self.in_fence = False

    def flush_block(self) -> None:
        if self.current and "".join(self.current).strip():
            self.blocks.append("\n".join(self.current).strip("\n"))
        self.current = []

    def flush_section(self) -> None:
        self.flush_block()
        if self.blocks:
            self.sections.append(([h for _, h in self.path], self.blocks))
        self.blocks = []

    def fence(self, line: str) -> None:
        if not self.in_fence:
            self.flush_block()
        self.current.append(line)
        self.in_fence = not self.in_fence
        if not self.in_fence:
            self.flush_block()

    def feed(self, line: str) -> None:
        if self.markdown and _FENCE.match(line):
            self.fence(line)
            return
        heading = _HEADING.match(line) if self.markdown and not self.in_fence else None
        if heading:
            self.flush_section()
            level = len(heading.group(1))
            self.path = [(lv, h) for lv, h in self.path if lv < level] + [(level, heading.group(2).strip())]
        elif not line.strip() and not self.in_fence:
            self.flush_block()
        else:
            self.current.append(line)


def parse_sections(text: str, markdown: bool = True) -> list[tuple[list[str], list[str]]]:
    """[(heading path, blocks)] in document order; blocks are paragraphs, lists, tables or code fences."""
    parser = _SectionParser(markdown)
    for line in text.splitlines():
        parser.feed(line)
    parser.flush_section()
    if not parser.sections and parser.path:  # headings only
        parser.sections.append(([h for _, h in parser.path], [parser.path[-1][1]]))
    return parser.sections


def _split_oversized(block: str, budget: int, count: Counter) -> list[str]:
    """Pieces of one block that each fit the budget: sentences first, then words."""
    pieces = [p for p in _SENTENCE.split(block) if p.strip()]
    out: list[str] = []
    for piece, n in zip(pieces, count(pieces), strict=False):
        if n <= budget:
            out.append(piece)
            continue
        words = piece.split()
        per = max(1, int(len(words) * budget / max(n, 1) * 0.9))
        out.extend(" ".join(words[i:i + per]) for i in range(0, len(words), per))
    return out


def _units(text: str, markdown: bool, max_tokens: int, count: Counter) -> list[tuple[str, int, str, bool]]:
    """(text, tokens, heading path, is_heading) for every block, oversized blocks split."""
    units: list[tuple[str, int, str, bool]] = []
    for headings, blocks in parse_sections(text, markdown):
        prefix = " > ".join(headings)
        budget = max(16, max_tokens - (count([prefix])[0] + 1 if prefix else 0))
        if headings:
            units.append((headings[-1], count([headings[-1]])[0], prefix, True))
        for block, n in zip(blocks, count(blocks), strict=False):
            if n <= budget:
                units.append((block, n, prefix, False))
            else:
                parts = _split_oversized(block, budget, count)
                units.extend((p, c, prefix, False) for p, c in zip(parts, count(parts), strict=False))
    return units


def chunk_text(text: str, document_path: str, count: Counter | None = None, max_tokens: int = 254,
               markdown: bool = True) -> list[Fragment]:
    """Fragments of a document, each within `max_tokens`: blocks packed in order, small sections merged,
    every fragment prefixed with the heading path where it starts."""
    count = count or approx_counter
    prefix_size: dict[str, int] = {}
    texts: list[str] = []
    body: list[str] = []
    prefix, used, budget = "", 0, max_tokens

    def flush():
        if body and not (len(body) == 1 and body[0] == prefix.rsplit(" > ", 1)[-1] and prefix):
            texts.append(f"{prefix}\n" + "\n\n".join(body) if prefix else "\n\n".join(body))
        elif body:
            texts.append(prefix)

    for unit, size, path, is_heading in _units(text, markdown, max_tokens, count):
        if body and used + size > budget:
            flush()
            body, used = [], 0
        if not body:
            prefix = path
            if prefix not in prefix_size:
                prefix_size[prefix] = count([prefix])[0] + 1 if prefix else 0
            budget = max(16, max_tokens - prefix_size[prefix])
            if is_heading:
                continue  # the prefix already carries it
        body.append(f"## {unit}" if is_heading else unit)
        used += size + (1 if is_heading else 0)
    flush()
    return [Fragment(text=t, document_path=document_path, fragment_index=i) for i, t in enumerate(texts)]
