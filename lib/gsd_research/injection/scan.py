"""The detection engine of `core.untrusted`: the patterns of `injection.patterns` run over folded views.

Each pattern comes with needles: groups of substrings, one of each group in every match. A pattern runs only
on a text whose view holds a member of every group, so most texts skip most patterns; what is left is the
cost of looking for the needles, which this module keeps low three ways:

- letter needles (a-z only) are looked for in the text's distinct runs of letters, not in the text: a
  needle of letters occurs in a text exactly when it occurs in one of its maximal letter runs;
- `map` over bound `__contains__` methods (C speed) instead of a generator;
- a batch (`candidates`): the patterns whose needles all occur somewhere in a set of texts (a docs answer's
  snippets and titles, a search's results) are worked out once over the texts together; a pattern that fails
  there fails on each of them, so each text only looks at the few patterns left.

Speed never changes what is found: each shortcut skips only patterns that cannot match.
"""

from __future__ import annotations

import re
from functools import lru_cache

from gsd_research.injection.patterns import NATIVE_PATTERNS, PATTERNS
from gsd_research.injection.textfold import Views

_TURN_START = re.compile(r"(?:^|[.!?] )[ \t>*#]*$")
_NEGATED = re.compile(r"\b(?:not|never|don't|do not|doesn't|cannot|can't|shouldn't|won't)\s+(?:\w+\s+)?$")
_LETTERS = re.compile(r"[a-z]+")
_RUNS_FROM = 256  # texts at least this long are searched for letter needles through their distinct runs,
_RUNS_UPTO = 65_536  # up to this long (on longer pages, listing their runs costs more than it saves)


@lru_cache(maxsize=1)
def compiled() -> list[tuple[str, str, str, tuple]]:
    """(kind, pattern source, view, needles): a pattern is compiled (`regex`) only once its needles are in a
    text, so a call whose texts hold none of them never pays the compilation (~10 ms for all of them).
    Each needle group is split in two (`_split`): its needles of letters alone, and the rest."""
    return [(kind, pattern, view, _split(needles)) for kind, view, needles, pattern in PATTERNS]


@lru_cache(maxsize=1)
def compiled_native() -> list[tuple[str, str, str, tuple]]:
    """The patterns written in other scripts, folded as text is (see injection_patterns.NATIVE_PATTERNS)."""
    from gsd_research.injection.textfold import fold_native

    return [(kind, pattern, view, _split(tuple(tuple(fold_native(n) for n in group) for group in needles)))
            for kind, view, needles, pattern in NATIVE_PATTERNS]


def _split(needles: tuple) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """Each group as (needles of letters a-z only, the others)."""
    return tuple((tuple(n for n in group if _LETTERS.fullmatch(n)),
                  tuple(n for n in group if not _LETTERS.fullmatch(n))) for group in needles)


def _letter_runs(text: str) -> str:
    """The distinct maximal runs of letters a-z of `text`, NUL-separated (a NUL ends every run); a short
    text as it is (finding its runs would cost more than it saves)."""
    return "\x00".join(set(_LETTERS.findall(text))) if _RUNS_FROM <= len(text) <= _RUNS_UPTO else text


def _holds_all(in_runs, in_text, needles: tuple) -> bool:
    """Whether every group of needles has a member in the text: its letter needles looked for in the text's
    letter runs (`in_runs`), the others in the text (`in_text`)."""
    for letters, others in needles:
        if not (any(map(in_runs, letters)) or any(map(in_text, others))):
            return False
    return True


@lru_cache(maxsize=512)
def regex(pattern: str, native: bool = False) -> re.Pattern:
    if native:
        from gsd_research.injection.textfold import fold_native

        pattern = fold_native(pattern)
    return re.compile(pattern, re.M)


@lru_cache(maxsize=2)
def _patterns(ascii_only: bool) -> list[tuple[int, str, str, str, tuple, bool]]:
    """(index, kind, source, view, needles, native) of every pattern a text needs: the native ones only
    for a text with non-ASCII characters (an ASCII text folds to no letter of another script)."""
    patterns = [(i, *p, False) for i, p in enumerate(compiled())]
    if not ascii_only:
        offset = len(patterns)
        patterns += [(offset + i, *p, True) for i, p in enumerate(compiled_native())]
    return patterns


def candidates(views: list[Views]) -> frozenset[int]:
    """The indexes of the patterns whose needles all occur in these texts taken together (each view's texts
    joined): every pattern that can match one of the texts is among them."""
    joined: dict[str, tuple] = {}
    out = set()
    for index, _kind, _source, name, needles, _native in _patterns(all(v.original.isascii() for v in views)):
        if name not in joined:
            text = "\x01".join(getattr(v, name).text for v in views)
            joined[name] = (_letter_runs(text).__contains__, text.__contains__)
        if _holds_all(*joined[name], needles):
            out.add(index)
    return frozenset(out)


def detect(views: Views, only: frozenset[int] | None = None) -> dict[str, int]:
    """Kind -> original position of its first match, over the folded views (`only`: the candidate patterns
    of a batch the text belongs to; others cannot match)."""
    found: dict[str, int] = {}
    runs: dict[str, str] = {}
    for index, kind, source, name, needles, native in _patterns(views.original.isascii()):
        if kind in found or (only is not None and index not in only):
            continue
        view = getattr(views, name)
        text = view.text
        if name not in runs:
            runs[name] = _letter_runs(text)
        if not _holds_all(runs[name].__contains__, text.__contains__, needles):
            continue  # a word every match contains is missing: nothing to find (most pages, most patterns)
        at = _first_match(regex(source, native), text, kind, name)
        if at is not None:
            found[kind] = view.span(at, at + 1)[0]
    return found


def _first_match(pattern: re.Pattern, text: str, kind: str, name: str) -> int | None:
    for match in pattern.finditer(text):
        at = match.start()
        if name != "compact" and at and "a" <= text[at] < "\u3000" and text[at].isalpha() and (
                text[at - 1].isalnum() or text[at - 1] == "_"):
            continue  # inside a word: the patterns leave the leading \b to this check (speed)
        if name == "words" and _NEGATED.search(text[max(0, at - 24):at]):
            continue  # "never send your API key to a URL …", "don't ignore the rules"
        if kind == "role_prefix" and not _TURN_START.search(text[text.rfind("\n", 0, at) + 1:at]):
            continue  # a chat turn starts a line or a sentence
        return at
    return None
