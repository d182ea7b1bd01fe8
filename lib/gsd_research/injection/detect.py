"""What the fence acts on: instruction-like passages (findings) and fence-marker spellings and fake role tags
(spans) of external text, read on its folded views; `core.untrusted` fences and warns with them.

An answer's texts are scanned as one batch (views built once, only the patterns that can match any of them
run), and an instruction split over two fields of a result is looked for near their seams only.
"""

from __future__ import annotations

import bisect
import re

from gsd_research.injection.markers import fuzzy_spans
from gsd_research.injection.scan import candidates, compiled, detect, regex
from gsd_research.injection.textfold import Views

# Fence markers in any spelling: END [OF [THE]] UNTRUSTED [TEXT|CONTENT|DATA …], with brackets or a slash.
_MARKER = re.compile(
    r"(?P<open>[\[\(\{<«‹⟦【〔][ \t]*(?P<slash>/)?[ \t]*)?(?P<end>\bend(?:[\s_:-]*of)?(?:[\s_:-]*the)?[\s_:-]*)?"
    r"untrusted(?P<word>[\s_:-]*(?:text|content|data|input|evidence|section|passage))?"
    r"(?P<ends>[\s_:-]*(?:ends|is over|stops|finished)\b)?(?P<tail>[^\[\](){}<>«»‹›⟦⟧【】〔〕\n]{0,100}[\])}>»›⟧】〕])?")
_MARKER_COMPACT = re.compile(r"end(?:of)?(?:the)?untrusted(?:text|content|data|input|evidence|section)|"
                             r"untrusted(?:text|content|data)ends|"
                             # backwards, as a right-to-left override shows it (even once the override is cut off)
                             r"(?:txet|tnetnoc|atad|tupni|ecnedive|noitces)detsurtnu(?:eht)?(?:fo)?dne")
_ENTITY = re.compile(r"&#(?:\d{2,7}|x[0-9a-f]{2,6});", re.I)


_CACHE: dict[str, tuple] = {}  # the newest analyses (insertion order), as commands scan and fence a text
_CACHE_SIZE = 16


def _analysis(text: str, views: Views | None = None, only: frozenset[int] | None = None,
              ) -> tuple[tuple[dict, ...], tuple[tuple[int, int, str], ...]]:
    """(findings, spans to neutralize) of a text (`views`, `only`: from a batch, see `_Batch`); cached."""
    hit = _CACHE.get(text)
    if hit is not None:
        return hit
    result = _analyze(text, views or Views(text), only)
    _CACHE[text] = result
    while len(_CACHE) > _CACHE_SIZE:
        try:
            del _CACHE[next(iter(_CACHE))]
        except (KeyError, RuntimeError, StopIteration):  # another thread got there first
            break
    return result


def _analyze(text: str, views: Views, only: frozenset[int] | None):
    found = detect(views, only)
    if "&#" in text and _ENTITY.search(text):  # `&#73;gnore …`: read the text as a browser would, too
        import html

        for kind, at in detect(Views(html.unescape(text))).items():
            found.setdefault(kind, min(at, len(text) - 1))
    spans = _spans(views)
    if any(s[2] == "marker" for s in spans):
        found.setdefault("fence_escape", min(s[0] for s in spans if s[2] == "marker"))
    findings = tuple({"kind": kind, "line": views.line(at)} for kind, at in sorted(found.items(), key=lambda x: x[1]))
    return findings, spans


def _spans(views: Views) -> tuple[tuple[int, int, str], ...]:
    """What `neutralize` replaces: fence-marker spellings and fake role tags, in order."""
    return tuple(sorted(_marker_spans(views) + _tag_spans(views)))


def _marker_spans(views: Views) -> list[tuple[int, int, str]]:
    exact = [v for v in (views.tags, views.uncommented) if v is not None]
    spans: list[tuple[int, int, str]] = []
    if any("untrusted" in v.text for v in (*exact, views.compact)) or "detsurtnu" in views.compact.text:  # or backwards
        spans = _exact_marker_spans(views, exact)
    for fuzzy in (s for view in exact for s in fuzzy_spans(view)):  # look-alikes of scripts nobody listed
        if not any(start < fuzzy[1] and fuzzy[0] < end for start, end, _ in spans):
            spans.append(fuzzy)
    return _widen(views.original, spans)


def _exact_marker_spans(views: Views, exact: list) -> list[tuple[int, int, str]]:
    spans = []
    for view in (*exact, views.words):
        for m in _MARKER.finditer(view.text):
            bracketed = m.group("open") and (m.group("word") or m.group("tail") or m.group("slash"))
            closed = m.group("word") and m.group("tail")  # `[ENĐ UNTRUSTED TEXT]`: whatever comes before
            if m.group("end") or m.group("ends") or bracketed or closed:
                spans.append((*view.span(m.start(), m.end()), "marker"))
    for m in _MARKER_COMPACT.finditer(views.compact.text):
        spans.append((*views.compact.span(m.start(), m.end()), "marker"))
    return spans


_ENTITY_TAIL = re.compile(r"#?x?[0-9a-z]*;?", re.I)


def _widen(text: str, spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Spans that end inside a character reference (`…TEXT&#93;` matched up to its `&`) take the rest of it."""
    if "&" not in text:
        return spans
    out = []
    for start, end, what in spans:
        if text[end - 1: end] == "&":  # a reference reads as its character at its `&` (injection.textfold)
            end = _ENTITY_TAIL.match(text, end).end()
        out.append((start, end, what))
    return out


def _tag_spans(views: Views) -> list[tuple[int, int, str]]:
    pattern = regex(next(p[1] for p in compiled() if p[0] == "fake_tag"))
    return [(*views.tags.span(m.start(), m.end()), "tag") for m in pattern.finditer(views.tags.text)]


def scan(text: str) -> list[dict]:
    """Instruction-like passages in `text`: one {"kind", "line"} per kind found, first line first. Never text."""
    if not text:
        return []
    return [dict(f) for f in _analysis(text)[0]]


def spans(text: str) -> tuple[tuple[int, int, str], ...]:
    """(start, end, "marker"|"tag") of what the fence neutralizes in `text`: from the analysis when the text
    was scanned already (fence scans, then neutralizes), else the spans alone, without detection."""
    hit = _CACHE.get(text)
    return hit[1] if hit is not None else _spans(Views(text))


class _Batch:
    """The texts of one answer scanned together: their views built once and the patterns that can match any
    of them worked out once (`injection_scan.candidates`), so each text only looks at those."""

    def __init__(self, texts: list[str], built: dict[str, Views] | None = None) -> None:
        built = built or {}
        self.views = {text: built.get(text) or Views(text) for text in dict.fromkeys(texts)
                      if text and text not in _CACHE}
        self.only = candidates(list(self.views.values())) if len(self.views) > 1 else None

    def scan(self, text: str) -> list[dict]:
        if not text:
            return []
        views = self.views.get(text)  # a text left out of the batch (it was cached) may not use its candidates
        return [dict(f) for f in _analysis(text, views, self.only if views is not None else None)[0]]


SEAM_LETTERS = 256  # letters read on each side of a seam between fields when looking for a split instruction
SEAM_WORDS = 4  # and whole words beyond them, however long (patterns allow a few words of any length)


def _seam_windows(values: list[str], views: list[Views]) -> list[str]:
    """The text near each seam of the fields joined by newlines: SEAM_LETTERS letters on each side as the
    detector reads them (invisible characters, references, markup and whitespace cost nothing), then
    SEAM_WORDS more whole words; merged where they meet. The letters are counted in each field's own views
    (`views`, built for scanning it), or in the join's when a tag or comment is open at a seam (it closes in
    the next field, and the join reads it as markup). The windows only tell whether to scan the whole join."""
    joined = "\n".join(values)
    if any(_open_markup(v.folded) for v in views[:-1]):
        return _windows(joined, [_join_letters(joined, values)])
    bounds, offset = [], 0
    for left, right, view_left, view_right in zip(values, values[1:], views, views[1:], strict=False):
        start = offset + _letters_back(view_left)
        offset += len(left) + 1
        bounds.append((start, offset + _letters_on(view_right, len(right))))
    return _windows(joined, [bounds])


def _windows(joined: str, bound_lists: list) -> list[str]:
    spans: list[list[int]] = []
    for start, end in (b for bounds in bound_lists for b in bounds):
        start, end = _words_back(joined, start), _words_on(joined, end)
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(end, spans[-1][1])
        else:
            spans.append([start, end])
    return [joined[start:end] for start, end in spans]


_OPEN_TAG = re.compile(r"</?[a-z][\w:-]{0,30}(?:\s[^<>]{0,300})?\Z")  # textfold's tag, not yet closed


def _open_markup(folded: str) -> bool:
    """Whether a field (folded, as the views read it) ends inside a tag or a comment, which the next field
    may close: the join then reads them as markup (textfold's _HTML_TAG and _COMMENT_BODY)."""
    comment = folded[-2100:]
    return bool(_OPEN_TAG.search(folded[-400:])) or comment.rfind("<!--") > comment.rfind("-->")


_NTH_LETTER = re.compile(rf"(?:[^a-z013457@$]*[a-z013457@$]){{{SEAM_LETTERS}}}")  # the compact view's letters


def _letters_back(views: Views) -> int:
    """Where, in the original text, its last SEAM_LETTERS letters (as the detector reads them) start. The
    words view before squeezing (`source`) has the original's length, so its positions are the original's."""
    source = views.words.source
    found = _NTH_LETTER.match(source[::-1])
    return 0 if found is None else len(source) - found.end()


def _letters_on(views: Views, length: int) -> int:
    """Where, in the original text, its first SEAM_LETTERS letters (as the detector reads them) end."""
    found = _NTH_LETTER.match(views.words.source)
    return length if found is None else found.end()


def _join_letters(joined: str, values: list[str]) -> list[tuple[int, int]]:
    """The window bounds of each seam, letters counted in the join's own views."""
    letters = Views(joined).compact
    count, bounds, seam = len(letters.text), [], -1
    for value in values[:-1]:
        seam += len(value) + 1  # the newline between this field and the next
        k = bisect.bisect_left(range(count), seam, key=letters.original_index)  # the first letter after it
        start = 0 if k <= SEAM_LETTERS else letters.span(k - SEAM_LETTERS, k - SEAM_LETTERS + 1)[0]
        end = len(joined) if k + SEAM_LETTERS >= count else letters.span(k + SEAM_LETTERS - 1, k + SEAM_LETTERS)[1]
        bounds.append((start, end))
    return bounds


_WORD_ON = re.compile(rf"(?:\W*\w+){{0,{SEAM_WORDS}}}")


def _words_on(text: str, at: int) -> int:
    return _WORD_ON.match(text, at).end()


def _words_back(text: str, at: int) -> int:
    for _ in range(SEAM_WORDS):
        while at > 0 and not text[at - 1].isalnum():
            at -= 1
        while at > 0 and text[at - 1].isalnum():
            at -= 1
    return at


def scan_fields(fielded: list[dict[str, str]]) -> list[list[dict]]:
    """Per result (its text fields by name), the findings of each field ({"kind", "line", "field"}); an
    instruction split over two fields, confirmed on their join, is found under "field1+field2"."""
    views = {text: Views(text) for texts in fielded for text in texts.values()}
    windows = {i: [_seam_windows(order, [views[v] for v in order]) for order in
                   (list(texts.values()), list(texts.values())[::-1])] for i, texts in enumerate(fielded) if len(texts) > 1}
    batch = _Batch([v for texts in fielded for v in texts.values()] +  # fields and seams: one batch
                   [w for both in windows.values() for side in both for w in side], views)
    found = [[dict(h, field=field) for field, value in texts.items() for h in batch.scan(value)] for texts in fielded]
    for i in windows:  # an instruction split over the title and the snippet, confirmed on the whole join
        if not found[i] and any(batch.scan(w) for side in windows[i] for w in side):
            values = list(fielded[i].values())
            hits = scan("\n".join(values)) or scan("\n".join(values[::-1]))
            found[i] = [dict(h, field="+".join(fielded[i])) for h in hits]
    return found
