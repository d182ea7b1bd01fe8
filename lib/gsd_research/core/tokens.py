"""Token counting that holds for real (cl100k) tokens, without loading a BPE model at start-up.

The estimator splits text the way cl100k's pre-tokenizer does, counts a piece that is one vocabulary
entry as one token, and counts other pieces with cl100k's own merge rule (byte-pair merges, lowest
rank first) over the vocabulary shipped in data/ (cl100k_vocab.txt in rank order, plus the entries
that are no valid UTF-8 on their own in cl100k_extra.txt for non-ASCII text). Pieces over 64 characters
are merged in chunks. A safety factor measured in bench/token_budget.py covers what remains (the
pre-tokenizer regex differs slightly from cl100k's in Unicode classes), so the estimate stays at or
above cl100k's count on prose, Markdown and code.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from importlib import resources

SAFETY = 1.01  # measured: bench/token_budget.py finds real/raw estimate <= 1.0000 on every bench corpus

# cl100k's pre-tokenizer, '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+
# |\s++$|\s*[\r\n]|\s+(?!\S)|\s', in the standard library's re: \w covers letters and numbers, \d only
# decimal digits, so the common other numbers (superscripts, fractions, Roman, circled) are listed.
_OTHER_NUM = "\u00b2\u00b3\u00b9\u00bc-\u00be\u2070\u2074-\u2079\u2080-\u2089\u2150-\u2189\u2460-\u249b\u24ea-\u24ff\u2776-\u2793"
_LETTER = rf"[^\W\d_{_OTHER_NUM}]"
_PIECE = re.compile(
    r"'(?i:[sdmt]|ll|ve|re)"
    rf"|(?:[^\r\n\w]|_)?{_LETTER}+"
    rf"|[\d{_OTHER_NUM}]{{1,3}}"
    r"| ?(?:[^\s\w]|_)+[\r\n]*"
    r"|\s+\Z|\s*[\r\n]|\s+(?!\S)|\s"
)


_SPECIAL = frozenset({"<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|endofprompt|>"})
_MAX_BPE_CHARS = 64  # longer pieces (base64, minified code) are merged in chunks: BPE is quadratic


@lru_cache(maxsize=1)
def _ranks() -> dict[str, int]:
    """cl100k's text entries -> merge priority (the file lists them in rank order, NUL-separated; ranks among
    them only). The file is stored uncompressed and the dict built with zip: loading it is most of what a
    cached `docs` call spends on counting (~17 ms; gzip and a dict comprehension made it ~26 ms)."""
    entries = resources.files("gsd_research").joinpath("data/cl100k_vocab.txt").read_bytes().decode("utf-8")
    tokens = entries.split("\x00")
    return dict(zip(tokens, range(len(tokens)), strict=True))


def _vocab() -> dict[str, int]:
    return _ranks()


@lru_cache(maxsize=1)
def _byte_ranks() -> dict[bytes, int]:
    """Every cl100k entry as bytes -> its true rank, with the entries that are no valid UTF-8 on their own
    (data/cl100k_extra.txt). Built only when non-ASCII text needs byte-level merges."""
    extra: dict[int, bytes] = {}
    text = resources.files("gsd_research").joinpath("data/cl100k_extra.txt").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line and not line.startswith("#"):
            rank, hexed = line.split("\t")
            extra[int(rank)] = bytes.fromhex(hexed)
    ranks = {data: rank for rank, data in extra.items()}
    rank = 0
    for tok in _ranks():
        if tok in _SPECIAL:
            continue
        while rank in extra:
            rank += 1
        ranks[tok.encode("utf-8")] = rank
        rank += 1
    return ranks


def _bpe(parts: list, ranks: dict) -> int:
    """Tokens left after cl100k's merge rule (adjacent pair of lowest rank first) over `parts`."""
    while len(parts) > 1:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best, best_rank = i, rank
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return len(parts)


@lru_cache(maxsize=65536)
def _piece_count(piece: str) -> int:
    ranks = _ranks()
    if piece in ranks:
        return 1
    if piece.isascii():  # every character is an entry and the text entries keep cl100k's order: exact
        step = _MAX_BPE_CHARS
        return sum(_bpe(list(piece[i:i + step]), ranks) for i in range(0, len(piece), step))
    data, branks = piece.encode("utf-8", "surrogatepass"), _byte_ranks()  # a lone surrogate: 3 bytes, no crash
    step = _MAX_BPE_CHARS
    return sum(_bpe([data[j:j + 1] for j in range(i, min(i + step, len(data)))], branks)
               for i in range(0, len(data), step))


def _piece_tokens(piece: str, vocab=None) -> int:
    return _piece_count(piece)


def raw_estimate(text: str) -> int:
    """Token count before the safety factor."""
    if not text:
        return 0
    return sum(map(_piece_count, _PIECE.findall(text)))  # findall: no match objects (1.5x faster on long text)


def count_tokens(text: str) -> int:
    """An upper estimate of the cl100k token count of `text`."""
    if not text:
        return 0
    return math.ceil(raw_estimate(text) * SAFETY)


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])[\"')\]]*\s+|\n\s*\n")
_LINE_END = re.compile(r"\n")
_WORD_END = re.compile(r"(?<=\S)(?=\s)")
# A coarser boundary is used while it keeps at least this share of what a cut on a word would keep.
COARSE_SHARE = 0.6


def cut_to_tokens(text: str, max_tokens: int, measure=None) -> tuple[str, bool]:
    """Cut `text` to at most `max_tokens`: on a sentence or paragraph boundary when one fits, else on a
    line, else on a word, else anywhere. Returns (text, truncated).

    `measure` counts a candidate (default: count_tokens); pass one that counts the JSON-escaped form.
    A sentence or line boundary is preferred unless it would waste more than 40% of the room.
    """
    measure = measure or count_tokens
    if max_tokens <= 0:
        return "", bool(text)
    if measure(text) <= max_tokens:
        return text, False
    head = _head(text, max_tokens, measure)
    finest = _longest_prefix(text, [m.end() for m in _WORD_END.finditer(head)], max_tokens, measure)
    if finest is None:
        finest = _longest_char_prefix(text, len(head), max_tokens, measure)
    for pattern in (_SENTENCE_END, _LINE_END):
        best = _longest_prefix(text, [m.end() for m in pattern.finditer(head)], max_tokens, measure)
        if best is not None and best >= COARSE_SHARE * finest:
            return text[:best].rstrip(), True
    return text[:finest].rstrip(), True


def _head(text: str, max_tokens: int, measure) -> str:
    """A prefix of `text` already over budget, so searches stay short on long texts (galloping)."""
    span = max(64, max_tokens * 8)
    while span < len(text) and measure(text[:span]) <= max_tokens:
        span *= 2
    return text[: span + 1]


def _longest_char_prefix(text: str, hi: int, max_tokens: int, measure) -> int:
    lo = 0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


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


# Scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, kana, Han): each character is
# counted as a word, as word processors count them; elsewhere words are what whitespace separates.
UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f"
_WORD_UNITS = re.compile(f"[{UNSPACED}]|[^\\s{UNSPACED}]+")


def word_count(text: str) -> int:
    """How many words the text holds, in any script (not how many spaces separate them)."""
    return len(_WORD_UNITS.findall(text))
