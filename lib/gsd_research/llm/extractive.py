"""The fallback when no model is reachable: the page's most informative sentences, quoted in order."""

from __future__ import annotations

import math
import re
from collections import Counter

from gsd_research.core.tokens import count_tokens, word_count
from gsd_research.core.untrusted import scan

LABEL = "extractive summary (no model reachable): sentences quoted from the source, not a model's summary"
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[])")
_WORD = re.compile(r"[a-z0-9][a-z0-9_'-]*")
_STOP = frozenset("""a an the and or but if then of to in on at by for with from as is are was were be been being
it its this that these those he she they we you i his her their our your not no so than too very can will
just do does did has have had which who whom what when where why how all any each more most other some such
into over also about after before between through during out up down off again further there here""".split())
_SKIP_LINE = re.compile(r"^\s*(?:\||```|~~~|!\[|<)")


def sentences(markdown: str) -> list[str]:
    """Prose sentences and list items; headings become context, tables and code are skipped."""
    out, in_code = [], False
    for block in re.split(r"\n\s*\n", markdown):
        lines = []
        for line in block.splitlines():
            if line.strip().startswith(("```", "~~~")):
                in_code = not in_code
                continue
            if in_code or _SKIP_LINE.match(line) or line.lstrip().startswith("#"):
                continue
            lines.append(re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line).strip())
        text = " ".join(t for t in lines if t)
        out.extend(s.strip() for s in _SENTENCE.split(text) if word_count(s) >= 4)
    return out


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def rank(sents: list[str], focus: str | None) -> list[float]:
    """Term-frequency centrality, a lead bonus, and a strong pull towards the focus terms, the rarer the
    stronger (a focus word every section repeats says little about which sentence answers it)."""
    freq = Counter(w for s in sents for w in set(_words(s)))
    focus_terms = set(_words(focus or ""))
    scores = []
    for index, sent in enumerate(sents):
        words = _words(sent)
        if not words:
            scores.append(0.0)
            continue
        centrality = sum(math.log1p(freq[w]) for w in set(words)) / math.sqrt(len(words))
        lead = 1.5 if index < 3 else 0.0
        pull = sum(1 + math.log(len(sents) / freq[w]) for w in focus_terms & set(words))
        scores.append(centrality + lead + 4.0 * pull)
    return scores


def summarize(markdown: str, focus: str | None, max_tokens: int) -> tuple[str, int]:
    """Bullets of the best sentences in source order within `max_tokens`; how many instruction-like were left out."""
    sents = list(dict.fromkeys(sentences(markdown)))  # boilerplate repeated on a page is quoted once
    scores = rank(sents, focus)
    order = sorted(range(len(sents)), key=lambda i: -scores[i])
    chosen, used, dropped = [], 0, 0
    for i in order:
        cost = count_tokens(sents[i]) + 3
        if used + cost > max_tokens:
            continue
        if scan(sents[i]):  # instruction-like text is never quoted as if it were content
            dropped += 1
            continue
        chosen.append(i)
        used += cost
        if used > max_tokens * 0.95:
            break
    return "\n".join(f"- {sents[i]}" for i in sorted(chosen)), dropped
