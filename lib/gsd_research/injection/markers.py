"""Fence markers that no exact pattern spells: look-alike runs, judged by their letter skeleton.

`core.untrusted` neutralizes the spellings its patterns know (case, spacing, markup, known look-alikes).
What is left is a letter the folding table does not know (a script nobody listed, `ƱNTRUSTED`), a letter
dropped or doubled, or the marker written backwards behind a right-to-left override. A short run that
stands between brackets, or alone on its line, is a marker when its skeleton (letters only, digits read as
the letters they imitate, any other letter a wildcard) lies within a small edit distance of a marker's
letters, read forwards or backwards. Cheap: candidates are filtered by length and letters first.

Encoded markers (`%5BEND%20UNTRUSTED%20TEXT%5D`, base64 `W0VORCBVTlRSVVNURUQgVEVYVF0=`, HTML entities are
decoded earlier by the view) are left as they are, on purpose. A fence ends for a reader where it *sees* a
closing line: what a model reads here is a run of percent signs and hex digits, or an opaque base64 word, not
a line that looks like our `[END UNTRUSTED TEXT]` followed by text outside it. To read one as a marker the
model must first decode it, i.e. act on the untrusted text, which the fence's notice tells it not to do; and
the decoded marker would still stand before our one real closing line, which every fenced value ends with
(`untrusted.is_fenced`). Decoding every %XX or base64-looking run of every page to look for markers would
cost time on ordinary URLs and data for no boundary a reader can be misled by.
"""

from __future__ import annotations

import re

from gsd_research.injection.textfold import LEET, View

TARGETS = ("enduntrustedtext", "untrustedtext")
SIMILARITY = 0.85  # 1 - distance / length: two edits on the closing marker, one on the opening
LINE_SIMILARITY = 0.93  # a line without brackets: one edit
_WILD = "?"
_BRACKETS = "\\[\\](){}<>«»‹›⟦⟧【】〔〕〚〛⟪⟫⁅⁆❲❳〈〉⦅⦆"
_BRACKETED = re.compile(rf"[{_BRACKETS}]([^\n{_BRACKETS}]{{6,80}})(?=[{_BRACKETS}])")
_LINE = re.compile(r"^[ \t>*#_=-]*([^\n]{6,40}?)[ \t*_=.-]*$", re.M)
_MARKER_LETTERS = frozenset("enduntrstx" + _WILD)
# Pieces of `untrusted` (forwards and backwards) that survive one unknown letter: no piece, no marker (speed).
_PIECES = re.compile(r"ntru|trus|usted|detsu|surt|urtn")


def skeleton(text: str) -> str:
    """Letters only (lower-case ASCII as folded), digits as letters, any other letter a wildcard."""
    out = []
    for ch in text.translate(LEET):
        if "a" <= ch <= "z":
            out.append(ch)
        elif ch.isalpha():
            out.append(_WILD)
    return "".join(out)


def distance(a: str, b: str) -> float:
    """Levenshtein distance of `a` to `b`, where a wildcard in `a` stands for any letter at half a cost."""
    previous = [float(i) for i in range(len(b) + 1)]
    for i, ca in enumerate(a, 1):
        current = [float(i)]
        for j, cb in enumerate(b, 1):
            swap = 0.0 if ca == cb else (0.5 if ca == _WILD else 1.0)
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + swap))
        previous = current
    return previous[-1]


def is_marker_like(inner: str, similarity: float = SIMILARITY) -> bool:
    """Whether the text of a bracketed run (or a short line) reads as a fence marker."""
    head = inner.split(":", 1)[0]  # the flagged opening goes on after a colon
    sk = skeleton(head)
    if not 10 <= len(sk) <= 20 or sum(c in _MARKER_LETTERS for c in sk) < len(sk) - 3:
        return False
    for form in (sk, sk[::-1]):
        for target in TARGETS:
            if abs(len(form) - len(target)) <= 3 and distance(form, target) <= (1 - similarity) * len(target):
                return True
    return False


def fuzzy_spans(view: View) -> list[tuple[int, int, str]]:
    """Original spans of the marker-like runs of a detection view (brackets included)."""
    spans: list[tuple[int, int, str]] = []
    text = view.text
    if not _PIECES.search(text):
        return spans
    for match in _BRACKETED.finditer(text):
        if _PIECES.search(match.group(1).replace(" ", "")) and is_marker_like(match.group(1)):
            spans.append((*view.span(match.start(), match.end() + 1), "marker"))  # the closing bracket too
    for match in _LINE.finditer(text):
        if _PIECES.search(match.group(1).replace(" ", "")) and is_marker_like(match.group(1), LINE_SIMILARITY):
            spans.append((*view.span(*match.span()), "marker"))
    return spans
