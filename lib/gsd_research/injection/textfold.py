"""Folded views of a text for injection detection, each mapping its positions back to the original.

Hidden text hides in the characters, not the words: an invisible character inside a word (soft hyphen,
zero-width space, word joiner, BOM, variation selector), a look-alike letter (Cyrillic `о`, Greek `ο`,
fullwidth `Ｏ`, mathematical `𝐨`, small capital `ᴏ`, an accented `ö`), ASCII smuggled in Unicode tag
characters, Markdown or HTML inside a word (`Ig**nore**`, `Ig<b></b>nore`), letter-spaced words
(`I g n o r e`) or a word cut at a line end (`Ig-\\nnore`). Three views undo this, none of them copying
text around (fast on pages of megabytes):

- `tags`:  compatibility folding (NFKD to one ASCII letter where one exists, marks and invisible
  characters dropped, tag characters decoded, look-alikes mapped), markup kept (fake role tags, markers);
- `words`: the same with Markdown and HTML markup removed and letter-spacing folded (instructions);
- `compact`: letters only, lower case, digits read as the letters they imitate (`1gn0r3`).

Every view is lower case (the patterns are written in lower case and run without re.I: several times
faster). A match in any view maps back to a span of the original text through `View.span`, so callers
can neutralize it in place and count its line.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from functools import lru_cache

BLANK = "\x00"
# Look-alikes NFKD does not fold: Cyrillic, Greek, IPA and small capitals -> the Latin letter they imitate.
CONFUSABLES = {
    **dict(zip("аеіјорсхуѕԁԛԝһӏвкмнтпьёїАВЕІЈКМНОРСТУХЅԀԚԜҺӀ", "aeijopcxysdqwhlbkmhtnbeiabeijkmhopctyxsdqwhl", strict=True)),
    **dict(zip("αβγεηικνορτυχωϲΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "abyenikvoptuxwcabezhikmnoptyx", strict=True)),
    **dict(zip("ıȷɑɡɩɪʟɴʀʏɢʜʙꜱᴀᴄᴅᴇᴊᴋᴍᴏᴘᴛᴜᴠᴡᴢ", "ijagiilnrygnbsacdejkmoptuvwz", strict=True)),
    **dict(zip("đĐħĦłŁøØŧŦƀɨʉƶǥɍ", "ddhhllootbbiuzgr", strict=True)),  # letters with a stroke (no NFKD decomposition)
    # Coptic letters drawn as their Greek models (TR39 leaves these out), the Latin upsilon that passes for U
    **dict(zip("ⲀⲁⲂⲃⲈⲉⲏⲓⲕⲙⲛⲧⲩⲭƱ", "aabbeehikmntyxu", strict=True)),
}
EXTRA_INVISIBLE = (0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x2800, 0x3164, 0xFFA0)
# Code points worth folding (Latin supplements, IPA, Greek, Cyrillic, phonetic, letter-like, enclosed,
# fullwidth, mathematical, format and tag blocks); everything else is left as it is.
_RANGES = ((0x80, 0x2FF), (0x370, 0x52F), (0x1AB0, 0x1AFF), (0x1D00, 0x1EFF), (0x2000, 0x24FF),
           (0x2C60, 0x2C7F), (0x3000, 0x3000), (0xA720, 0xA7FF), (0xFE00, 0xFE0F), (0xFE20, 0xFE2F),
           (0xFEFF, 0xFEFF), (0xFF00, 0xFFEF), (0xFFF0, 0xFFFB), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
           (0x1D400, 0x1D7FF), (0x1F100, 0x1F1FF), (0xE0000, 0xE007F), (0xE0100, 0xE01EF))
LEET = str.maketrans("013457@$", "oieastas")


@lru_cache(maxsize=1)
def skeleton_letters() -> dict[int, str]:
    """Letters of any script that Unicode TR39 lists as look-alikes of an ASCII letter (Lisu `ꓔ`, Cherokee
    `Ꭲ`, Armenian `Ս`, Coptic `Ⲧ`, Canadian syllabics `ᑌ` …) -> that letter, from data/confusables.txt."""
    from pathlib import Path

    table = {}
    data = Path(__file__).resolve().parent.parent / "data" / "confusables.txt"
    for line in data.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            code, letter = line.split()
            table[int(code, 16)] = letter
    return table


def _fold_char(cp: int) -> str | None:
    """What one code point reads as in the detection views (None: itself)."""
    ch = chr(cp)
    if 0xE0020 <= cp <= 0xE007E:
        return chr(cp - 0xE0000)  # a tag character smuggles the ASCII character it encodes
    if ch in CONFUSABLES:
        return CONFUSABLES[ch]
    category = unicodedata.category(ch)
    if category in ("Cf", "Mn", "Me", "Cc") or cp in EXTRA_INVISIBLE:
        return BLANK
    if category == "Zs":
        return " "
    if category in ("Zl", "Zp"):
        return "\n"
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if not unicodedata.combining(c))
    if len(base) == 1 and base.isascii() and base != ch:
        return base.lower() if base.isalpha() else base
    return skeleton_letters().get(cp)


_TABLE: dict[int, str] = {0: BLANK}  # code point -> what it reads as, for the characters met so far
_DECIDED: set[str] = set()  # characters whose entry (or its absence: left as they are) is settled
_COMPLETE: list[bool] = [False]  # every code point of the ranges and the skeleton letters is in _TABLE
_LAZY_CHARS = 20_000  # a longer text gets the whole table (built once, ~8 ms): cheaper than its characters
_LAZY_NON_ASCII = 1_000  # so does a text with more bytes of non-ASCII than this (CJK, Cyrillic pages)
_DECIDED_MAX = 20_000  # and every text once this many characters were worked out one by one
_RANGE_STARTS = [low for low, _ in _RANGES]


def fold_table(text: str = "") -> dict[int, str]:
    """The folding table (`str.translate`) with an entry for every character of `text` that folds (see
    `_fold_char`). A short, mostly ASCII text only has its own characters worked out: a docs snippet or a
    title holds a few distinct non-ASCII characters, and building the whole table (~70,000 code points) cost
    ~8 ms on every call that met one; a page (over 20,000 characters), a text in another script (over 1,000
    bytes of non-ASCII) or a process that met 20,000 distinct characters gets the whole table, once. A plain
    dict either way, so translating runs at C speed."""
    if _COMPLETE[0]:
        return _TABLE
    if (len(text) > _LAZY_CHARS or len(_DECIDED) > _DECIDED_MAX
            or len(text.encode("utf-8", "surrogatepass")) - len(text) > _LAZY_NON_ASCII):
        for low, high in _RANGES:
            _decide(range(low, high + 1))
        _decide(skeleton_letters())
        _COMPLETE[0] = True
        _DECIDED.clear()
        return _TABLE
    new = set(text).difference(_DECIDED)
    if new:
        skeleton = skeleton_letters()
        _decide(cp for cp in map(ord, new) if cp in skeleton or _in_ranges(cp))
        _DECIDED.update(new)
    return _TABLE


def _decide(code_points) -> None:
    for cp in code_points:
        if cp not in _TABLE:
            folded = _fold_char(cp)
            if folded is not None:
                _TABLE[cp] = folded


def _in_ranges(cp: int) -> bool:
    k = bisect.bisect_right(_RANGE_STARTS, cp) - 1
    return k >= 0 and cp <= _RANGES[k][1]


class View:
    """A text with the BLANK characters of its source squeezed out; positions map back to the source.

    The text is built at C speed; the position map only when a match needs it (matches are rare)."""

    def __init__(self, source: str, parent: View | None = None) -> None:
        self.parent = parent
        self._source = source
        self.text = source.replace(BLANK, "") if BLANK in source else source
        self._out: list[int] | None = None
        self._in: list[int] = []

    @property
    def source(self) -> str:
        """The text before BLANK characters were squeezed out (same length as its parent's text)."""
        return self._source

    def source_index(self, i: int) -> int:
        if self._out is None:
            self._out, self._in, at = [], [], 0
            for match in re.finditer(r"[^\x00]+", self._source):
                self._out.append(at)
                self._in.append(match.start())
                at += match.end() - match.start()
            if not self._out:
                self._out, self._in = [0], [0]
        k = max(0, bisect.bisect_right(self._out, i) - 1)
        return self._in[k] + (i - self._out[k])

    def original_index(self, i: int) -> int:
        j = self.source_index(i)
        return self.parent.original_index(j) if self.parent is not None else j

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original text's span of this view's [start, end) (hidden characters inside included)."""
        if end <= start:
            at = self.original_index(start)
            return at, at
        return self.original_index(start), self.original_index(end - 1) + 1


_COMMENT = re.compile(r"<!--|-->")
_COMMENT_BODY = re.compile(r"<!--.{0,2000}?(?:-->|$)", re.S)
_HTML_TAG = re.compile(r"</?[a-z][\w:-]{0,30}(?:\s[^<>]{0,300})?/?>")
_MD_LINK_TARGET = re.compile(r"\]\([^()\s]{0,500}(?:\s\"[^\"]{0,200}\")?\)")
_MD_ESCAPE = re.compile(r"\\(?=[^\w\s])|!(?=\[)")
_MD_CHARS = ("*", "_", "~~", "`", "[", "]")  # a single ~ stays: ~/.ssh
_HYPHEN_BREAK = re.compile(r"-\n[ \t]*(?=[a-z])")
_SPACED = re.compile(r"[a-z]( )[a-z] [a-z] [a-z](?: [a-z])*|[a-z](\.)[a-z]\.[a-z]\.[a-z](?:\.[a-z])*")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def fold(text: str) -> str:
    """`text` folded character by character (same length): look-alikes and compatibility forms to
    lower-case ASCII, invisible characters to BLANK, ASCII lower-cased."""
    if text.isascii():
        return text.lower()
    table = fold_table(text)
    # lower() keeps the length once U+0130 (the one character it expands) has been folded to `i`
    return _NON_ASCII.sub(lambda m: m.group().translate(table), text).lower()


def fold_native(pattern: str) -> str:
    """A pattern written in another script folded as `fold` folds text, its ASCII (regex syntax) untouched."""
    table = fold_table(pattern)
    return _NON_ASCII.sub(lambda m: m.group().translate(table).lower(), pattern).replace(BLANK, "")


_TEXT_ATTR = re.compile(r"""\b(?:alt|title|content|aria-label|placeholder|value|label|summary)\s*=\s*(?:"([^"]*)"|'([^']*)')""",
                        re.I)


def _tag_text(match: re.Match) -> str:
    """An HTML tag as the words view reads it: gone (so `Ig<b></b>nore` joins up), except the values of
    attributes that carry text (alt, title, content …), which stay in place between spaces."""
    tag = match.group()
    values = list(_TEXT_ATTR.finditer(tag))
    if not values:
        return BLANK * len(tag)
    out = [BLANK] * len(tag)
    out[0] = out[-1] = " "
    for value in values:
        group = 1 if value.group(1) is not None else 2
        out[value.start(group): value.end(group)] = value.group(group)
    return "".join(out)


def _blank(pattern: re.Pattern, text: str) -> str:
    return pattern.sub(lambda m: BLANK * len(m.group()), text)


def _fold_spacing(folded: str) -> str:
    """Letter-spaced words (`i g n o r e`, `i.g.n.o.r.e`) lose the single separators between their letters."""
    runs = [m for m in _SPACED.finditer(folded)
            if not (m.start() and folded[m.start() - 1].isalnum())
            and not (m.end() < len(folded) and folded[m.end()].isalnum())]
    if not runs:
        return folded
    chars = list(folded)
    for match in runs:
        for k in range(match.start() + 1, match.end(), 2):
            chars[k] = BLANK
    return "".join(chars)


_ENTITY = re.compile(r"&(?:#[0-9]{1,7};?|#x[0-9a-f]{1,6};?|[a-z][a-z0-9]{1,31};)", re.I)
_KEEP_ESCAPED = frozenset("<>&\"'")  # escaped code (`&lt;system&gt;`) stays as written: it renders as text


def decode_entities(original: str, folded: str) -> str:
    """`folded` with each HTML character reference of `original` (`&#84;`, `&#x54;`, `&lbrack;`) read as the
    character it renders as, folded, in place of its `&` (the rest of it BLANK): same length."""
    import html

    chars = None
    for match in _ENTITY.finditer(original):
        decoded = html.unescape(match.group())
        if len(decoded) != 1 or decoded == match.group() or decoded in _KEEP_ESCAPED:
            continue
        if chars is None:
            chars = list(folded)
        chars[match.start()] = fold(decoded) or BLANK
        chars[match.start() + 1: match.end()] = BLANK * (match.end() - match.start() - 1)
    return folded if chars is None else "".join(chars)


class Views:
    """The three detection views of one text (words and compact built on first use)."""

    def __init__(self, text: str) -> None:
        self.original = text
        self.folded = fold(text)  # same length as the original: index i is character i
        if "&" in text:
            self.folded = decode_entities(text, self.folded)
        self.tags = View(self.folded)
        self._words: View | None = None
        self._compact: View | None = None

    @property
    def words(self) -> View:
        if self._words is None:
            marked = _fold_spacing(self.folded)
            if "<" in marked:
                marked = _HTML_TAG.sub(_tag_text, _blank(_COMMENT, marked))
            if "](" in marked:
                marked = _blank(_MD_LINK_TARGET, marked)
            if "\\" in marked or "![" in marked:
                marked = _MD_ESCAPE.sub(BLANK, marked)
            for mark in _MD_CHARS:  # str.replace: much faster than a regex with thousands of matches
                marked = marked.replace(mark, BLANK * len(mark))
            if "-\n" in marked:
                marked = _blank(_HYPHEN_BREAK, marked)
            self._words = View(marked)
        return self._words

    @property
    def compact(self) -> View:
        if self._compact is None:
            kept = re.sub(r"[^a-z013457@$]", BLANK, self.words.text)  # ASCII only: translate's fast path
            letters = kept.translate(LEET)
            self._compact = View(letters, parent=self.words)
        return self._compact

    @property
    def uncommented(self) -> View | None:
        """The `tags` view with HTML comments (and what they hold) removed, as a Markdown or HTML reader
        sees `[END UNTRUS<!-- x -->TED TEXT]`; None when the text holds no comment."""
        if "<!--" not in self.folded:
            return None
        return View(_COMMENT_BODY.sub(lambda m: BLANK * len(m.group()), self.folded))

    def line(self, original_index: int) -> int:
        return self.original.count("\n", 0, original_index) + 1
