"""The sourced claims of a Markdown research file: sentences with their sources and quoted text.

Sources: `[CITED: url]`, `[VERIFIED: …]` (a source when it names a URL or a domain; a package registry when
it names npm, PyPI or crates.io), Markdown links,
bare URLs, and `[n]` / `[^n]` references resolved through the file's reference list (`[n]: url`,
`[^n]: …`, or a numbered list under a Sources/References heading). Quotes: text in straight or curly
double quotes of at least MIN_QUOTE_WORDS words, and blockquotes that carry a source. Sentences tagged
`[ASSUMED]` are claims too (listed, never checked). Each claim keeps GSD's provenance tag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gsd_research.verify.registries import registry_of

MIN_QUOTE_WORDS = 4
REFERENCE_HEADINGS = re.compile(r"^#{1,6}\s*(sources|references|citations|bibliography|works cited|links)\b", re.I)
_HEADING = re.compile(r"^#{1,6}\s")
_FENCE = re.compile(r"^\s*(```|~~~)")
_URL_TAIL = r"[^\s<>()\[\]\"'`]"
_URL_END = r"[^\s<>()\[\]\"'`.,;:!?]"
# an IPv6 literal host ([::1]) is the one place a URL holds brackets
_URL = re.compile(rf"https?://(?:\[[0-9A-Fa-f:.]+\](?:{_URL_TAIL}*{_URL_END})?|{_URL_TAIL}+{_URL_END})")
_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\((https?://[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_MARKER = re.compile(r"\[(CITED|VERIFIED)\s*:\s*((?:[^\[\]]|\[[0-9A-Fa-f:.]*\])*)\]", re.I)
_ASSUMED = re.compile(r"\[ASSUMED[^\]]*\]", re.I)
_TAG = re.compile(r"\[(CITED|VERIFIED|ASSUMED)\b", re.I)  # GSD's provenance tags
_REF = re.compile(r"\[\^?(\d{1,3}(?:\s*[,–-]\s*\d{1,3})*)\](?![(:])")
_REF_DEF = re.compile(r"^\s*(?:[-*]\s*)?\[\^?(\d{1,3})\]:?\s*(.*)$")
_NUMBERED = re.compile(r"^\s*(\d{1,3})[.)]\s+(.*)$")
_DOMAIN = re.compile(r"^(?:[a-z0-9-]+\.)+[a-z]{2,}(?:/\S*)?$", re.I)
_QUOTE = re.compile(r"[\"“”]([^\"“”]{3,}?)[\"“”]")
_SENTENCE = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"”’)\]]))\s+(?=[A-Z\"“(\[])")
# citations at the start of a piece belong to the sentence before it ("Claim. [CITED: url] Next claim.")
_LEADING = re.compile(r"^(?:\s*\(?(?:\[(?:CITED|VERIFIED)\s*:(?:[^\[\]]|\[[0-9A-Fa-f:.]*\])*\]|\[ASSUMED[^\]]*\]|"
                      r"\[\^?\d[\d,\s–-]*\](?![(:])|"
                      r"\[[^\]]*\]\(https?://[^)\s]+\))\)?[.,;]?)+")


# `[1]: url` / `[label]: url "title"` / `[^1]: text`: a definition for references, never a claim
_LINK_DEF = re.compile(r"^\s{0,3}\[\^?[^\]\s][^\]]*\]:\s")
# a line ending with a citation ends its claim, even without a full stop
_CITED_END = re.compile(r"(?:\[(?:CITED|VERIFIED)\s*:(?:[^\[\]]|\[[0-9A-Fa-f:.]*\])*\]|\[ASSUMED[^\]]*\]|"
                        r"\[\^?\d[\d,\s–-]*\]|"
                        r"https?://\S+)[\s.,;:!?)]*$", re.I)
MAX_QUOTED_SENTENCE = 800  # characters: an unclosed quotation mark does not hold a paragraph together


@dataclass
class Claim:
    """One sentence (or blockquote) that carries a source or a quote."""

    line: int
    text: str  # the sentence without its source markers
    sources: list[str] = field(default_factory=list)
    quotes: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # markers naming no retrievable source
    short_quotes: list[str] = field(default_factory=list)  # quoted text too short to locate reliably
    tag: str = "other"  # GSD's provenance tag: CITED | VERIFIED | ASSUMED | other (the first in the sentence)
    registry: str | None = None  # npm | pypi | crates: a [VERIFIED: npm registry]-style claim


def _url_of(text: str) -> str | None:
    """The URL a marker or reference entry names (a bare domain gets https://)."""
    link = _LINK.search(text)
    if link:
        return link.group(2)
    found = _URL.search(text)
    if found:
        return found.group(0)
    token = text.strip().strip("<>").split()[0] if text.strip() else ""
    if _DOMAIN.match(token):
        return "https://" + token.rstrip(".,;")
    return None


def _expand(spec: str) -> list[str]:
    """'1, 3-5' -> ['1', '3', '4', '5']."""
    out: list[str] = []
    for part in re.split(r"\s*,\s*", spec):
        bounds = re.split(r"\s*[–-]\s*", part)
        if len(bounds) == 2 and bounds[0].isdigit() and bounds[1].isdigit() and int(bounds[1]) - int(bounds[0]) < 50:
            out += [str(n) for n in range(int(bounds[0]), int(bounds[1]) + 1)]
        elif part.strip().isdigit():
            out.append(part.strip())
    return out


def _lines(text: str) -> list[tuple[int, str, bool]]:
    """(line number, line, inside the reference section) of every line outside code fences."""
    out, in_fence, in_refs = [], False, False
    for n, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if _HEADING.match(line):
            in_refs = bool(REFERENCE_HEADINGS.match(line))
        out.append((n, line, in_refs))
    return out


def references(text: str) -> dict[str, str]:
    """Reference number -> URL: `[n]: url` definitions anywhere, numbered entries under a Sources heading."""
    refs: dict[str, str] = {}
    for _, line, in_refs in _lines(text):
        match = _REF_DEF.match(line)
        if match is not None and not in_refs and ":" not in line.split("]", 1)[1][:1]:
            match = None  # `[1] text` in the body is a citation, not a definition
        if match is None and in_refs:
            match = _NUMBERED.match(line)
        url = _url_of(match.group(2)) if match else None
        if url:
            refs.setdefault(match.group(1), url)
    return refs


def _paragraphs(text: str) -> list[tuple[list[tuple[int, str]], bool]]:
    """(lines, is_blockquote) of each paragraph, list item or table row outside the references; lines are
    (line number, text) so that each sentence can name the line it starts on."""
    out: list[tuple[list[tuple[int, str]], bool]] = []
    current: list[tuple[int, str]] = []
    quote = False

    def flush():
        if current:
            out.append((list(current), quote))
        current.clear()

    for n, line, in_refs in _lines(text):
        stripped = line.strip()
        is_quote = stripped.startswith(">")
        body = stripped.lstrip(">").strip()
        new_item = bool(re.match(r"^([-*+]|\d+[.)]|\|)\s", body)) or _HEADING.match(body)
        definition = bool(_LINK_DEF.match(body))
        if in_refs or not body or new_item or is_quote != quote or definition:
            flush()
        if in_refs or not body or _HEADING.match(body) or definition:
            quote = False
            continue
        if not current:
            quote = is_quote
        current.append((n, body))
    flush()
    return out


def _groups(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """A paragraph's lines in runs that end with a line ending with a citation."""
    out: list[list[tuple[int, str]]] = [[]]
    for n, body in lines:
        out[-1].append((n, body))
        if _CITED_END.search(body):
            out.append([])
    return [g for g in out if g]


def _split(text: str) -> list[str]:
    """Sentences, a quotation running over several of them kept whole."""
    out, start = [], 0
    for match in _SENTENCE.finditer(text):
        piece = text[start:match.start()]
        open_quote = piece.count('"') % 2 == 1 or piece.count("“") > piece.count("”")
        if open_quote and len(piece) < MAX_QUOTED_SENTENCE:
            continue
        out.append(piece)
        start = match.end()
    out.append(text[start:])
    return [p for p in out if p]


def _sentences(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """(line it starts on, sentence) of a paragraph's sentences."""
    out: list[tuple[int, str]] = []
    for group in _groups(lines):
        _group_sentences(group, out)
    return out


def _group_sentences(lines: list[tuple[int, str]], out: list[tuple[int, str]]) -> None:
    joined, starts = "", []
    for n, body in lines:
        starts.append((len(joined), n))
        joined += body + " "
    pos = 0
    for sentence in _split(joined.strip()):
        at = joined.find(sentence, pos)
        pos = at + len(sentence) if at >= 0 else pos
        line = next((n for offset, n in reversed(starts) if offset <= max(at, 0)), lines[0][0])
        lead = _LEADING.match(sentence) if out else None
        if lead and lead.group(0).strip():
            out[-1] = (out[-1][0], f"{out[-1][1]} {lead.group(0).strip()}")
            sentence = sentence[lead.end():].strip()
        if sentence:
            out.append((line, sentence))


def _quotes(sentence: str) -> tuple[list[str], list[str]]:
    """(quotes of at least MIN_QUOTE_WORDS words, shorter ones)."""
    found, short = [], []
    for match in _QUOTE.finditer(sentence):
        inner = match.group(1).strip()
        (found if len(re.findall(r"\w+", inner)) >= MIN_QUOTE_WORDS else short).append(inner)
    return found, short


def _sources(sentence: str, refs: dict[str, str]) -> tuple[list[str], list[str], str, str | None]:
    """(source URLs, unresolved markers, the sentence without markers, the registry a marker names)."""
    sources, unresolved, registry = [], [], None
    for kind, value in _MARKER.findall(sentence):
        named = registry_of(value) if kind.upper() == "VERIFIED" else None
        url = None if named else _url_of(value)
        if named:
            registry = registry or named
        elif url:
            sources.append(url)
        else:
            unresolved.append(f"[{kind.upper()}: {value.strip()}]")
    clean = _MARKER.sub("", sentence)
    for _, url in _LINK.findall(clean):
        sources.append(url)
    clean = _LINK.sub(lambda m: m.group(1), clean)
    for url in _URL.findall(clean):
        sources.append(url)
    for spec in _REF.findall(clean):
        for n in _expand(spec):
            if n in refs:
                sources.append(refs[n])
            else:
                unresolved.append(f"[{n}]")
    clean = _REF.sub("", _URL.sub("", _ASSUMED.sub("", clean)))
    clean = re.sub(r"\s+([.,;:!?])", r"\1", re.sub(r"\s{2,}", " ", clean)).strip(" -|*")
    return list(dict.fromkeys(sources)), unresolved, clean, registry


def _tag(sentence: str) -> str:
    found = _TAG.search(sentence)
    return found.group(1).upper() if found else "other"


def _blockquote_text(para: str) -> str:
    """A sourced blockquote's quoted words: without its attribution (links, markers, URLs, dashes)."""
    text = _REF.sub("", _URL.sub("", _LINK.sub("", _MARKER.sub("", para))))
    text = re.sub(r"[\s—–-]+$", "", text).strip()
    return re.sub(r"^[\"“]|[\"”]$", "", text).strip()


def extract_claims(text: str) -> list[Claim]:
    """Every sentence that carries a source marker or a quote, in file order."""
    refs = references(text)
    claims: list[Claim] = []
    for lines, is_quote in _paragraphs(text):
        para = " ".join(body for _, body in lines)
        if is_quote:
            sources, unresolved, clean, registry = _sources(para, refs)
            if sources or unresolved or registry:
                quote = _blockquote_text(para)
                claims.append(Claim(lines[0][0], quote or clean, sources, [quote] if quote else [], unresolved,
                                    tag=_tag(para), registry=registry))
                continue
        for line, sentence in _sentences(lines):
            sources, unresolved, clean, registry = _sources(sentence, refs)
            quotes, short = _quotes(clean)
            tag = _tag(sentence)
            if sources or unresolved or quotes or registry or tag == "ASSUMED":
                claims.append(Claim(line, clean, sources, quotes, unresolved, short, tag, registry))
    return claims
