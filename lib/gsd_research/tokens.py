"""Token counting that holds for real (cl100k) tokens, without loading a BPE model at start-up.

The estimator splits text the way cl100k's pre-tokenizer does, counts a piece that is one vocabulary
entry as one token, and counts other pieces by greedy longest match against the vocabulary (every
character of a piece that no entry covers counts as its UTF-8 byte length). A safety factor measured
in bench/token_budget.py keeps the estimate at or above cl100k's count on prose, Markdown and code.
"""

from __future__ import annotations

import gzip
import math
import re
from functools import lru_cache
from importlib import resources

SAFETY = 1.06  # measured: bench/token_budget.py (max real/estimate over the bench corpora)
_MAX_TOKEN_CHARS = 24

_PIECE = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    r"|(?:[^\r\n\w]|_)?[^\W\d_]+"
    r"|\d{1,3}"
    r"| ?(?:[^\s\w]|_)+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)


@lru_cache(maxsize=1)
def _vocab() -> frozenset[str]:
    raw = resources.files("gsd_research").joinpath("data/cl100k_vocab.txt.gz").read_bytes()
    return frozenset(gzip.decompress(raw).decode("utf-8").split("\x00"))


def _piece_tokens(piece: str, vocab: frozenset[str]) -> int:
    if piece in vocab:
        return 1
    count, i, n = 0, 0, len(piece)
    while i < n:
        for j in range(min(n, i + _MAX_TOKEN_CHARS), i, -1):
            if piece[i:j] in vocab:
                count += 1
                i = j
                break
        else:
            count += len(piece[i].encode("utf-8"))
            i += 1
    return count


def raw_estimate(text: str) -> int:
    """Token count before the safety factor."""
    if not text:
        return 0
    vocab = _vocab()
    return sum(_piece_tokens(m.group(), vocab) for m in _PIECE.finditer(text))


def count_tokens(text: str) -> int:
    """An upper estimate of the cl100k token count of `text`."""
    if not text:
        return 0
    return math.ceil(raw_estimate(text) * SAFETY)


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])[\"')\]]*\s+|\n\s*\n")


def cut_to_tokens(text: str, max_tokens: int, measure=None) -> tuple[str, bool]:
    """Cut `text` to at most `max_tokens`: on a sentence or paragraph boundary when one fits, else on a word.

    `measure` counts a candidate (default: count_tokens); pass one that counts the JSON-escaped form.
    """
    measure = measure or count_tokens
    if max_tokens <= 0:
        return "", bool(text)
    if measure(text) <= max_tokens:
        return text, False
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    best = _longest_prefix(text, ends, max_tokens, measure)
    if best is None:
        words = [m.end() for m in re.finditer(r"\S+", text)]
        best = _longest_prefix(text, words, max_tokens, measure)
    if best is None:
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if measure(text[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        best = lo
    return text[:best].rstrip(), True


def _longest_prefix(text: str, boundaries: list[int], max_tokens: int, measure) -> int | None:
    """The largest boundary whose prefix fits, by binary search (token counts grow with length)."""
    lo, hi, best = 0, len(boundaries) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if measure(text[: boundaries[mid]]) <= max_tokens:
            best = boundaries[mid]
            lo = mid + 1
        else:
            hi = mid - 1
    return best
