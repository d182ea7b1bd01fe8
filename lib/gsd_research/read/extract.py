"""Main-content extraction to Markdown: boilerplate out; headings, lists, tables and code kept."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gsd_research.core.tokens import word_count

# Markdown escapes trafilatura adds that split words (`widget\_toolkit`) and inline tags it leaves.
_INTRAWORD_ESCAPE = re.compile(r"(?<=\w)\\_|\\_(?=\w)")
_LEFTOVER_TAGS = re.compile(r"</?(?:u|ins|sup|sub|mark|small|span|font|abbr|cite|s|del|strike)\b[^>]*>", re.I)
_BLANK_RUNS = re.compile(r"\n{3,}")
# A cheap XPath pre-filter (measured ~3x faster than testing every style in XPath), then exact checks.
_HIDDEN_CANDIDATES = ("//*[@hidden or @aria-hidden='true' or (@style and (contains(@style,'none') or "
                      "contains(@style,'hidden') or contains(@style,'0'))) or contains(@class,'sr-only') or "
                      "contains(@class,'visually-hidden')]")
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?![.\d])|"
                           r"opacity\s*:\s*0(?![.\d])", re.I)
_NOT_TEXT = {"script", "style", "template", "noscript", "svg", "head"}
MIN_CHARS = 200  # below this the precise pass probably missed the article: try harder
# Chrome trimming (tuned on one half of AEB's sites, checked on the other: bench/extraction.py).
_WORDS = re.compile(r"\w+")
_HEADING = re.compile(r"^#{1,6}\s+")
_LINE_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)]|#{1,6})\s+")
_LABEL = re.compile(r"^\s*(?:[-*+]|\d+[.)]|#{1,6})?\s*[*_]*\s*[\w ]{1,25}:\s*[*_]*\s*")  # "**Related: "
_URL_LINE = re.compile(r"^\W*(?:https?://|www\.)\S+\W*$", re.I)
_TITLE_SEPARATOR = re.compile(r"\s+[|\u2013\u2014\u00b7-]+\s+|\s*::\s*")  # "Story | Site", "Site - Story"


@dataclass
class Extracted:
    """The main content of a page as Markdown, with its title and the text the page hides."""

    markdown: str
    title: str | None = None
    method: str = "trafilatura"
    hidden_text: list[str] = field(default_factory=list)


def clean_markdown(text: str) -> str:
    """Undo escapes and leftovers that corrupt words; collapse blank runs."""
    text = _INTRAWORD_ESCAPE.sub("_", text)
    text = _LEFTOVER_TAGS.sub("", text)
    text = "\n".join(line.rstrip() for line in text.splitlines())
    return _BLANK_RUNS.sub("\n\n", text).strip()


def _title(tree) -> str | None:
    for path in ("//meta[@property='og:title']/@content", "//title/text()", "//h1//text()"):
        found = tree.xpath(path)
        if found:
            title = " ".join(str(found[0]).split())
            if title:
                return title[:300]
    return None


def _is_hidden(node) -> bool:
    classes = node.get("class") or ""
    return (node.get("hidden") is not None or node.get("aria-hidden") == "true" or "sr-only" in classes
            or "visually-hidden" in classes or bool(_HIDDEN_STYLE.search(node.get("style") or "")))


def hidden_texts(tree, limit: int = 20) -> list[str]:
    """Text the page hides from human readers (display:none, hidden, aria-hidden ...): a classic injection spot."""
    out: list[str] = []
    for node in tree.xpath(_HIDDEN_CANDIDATES):
        if not isinstance(node.tag, str) or node.tag.lower() in _NOT_TEXT:
            continue
        if not _is_hidden(node):
            continue
        text = " ".join(t for t in node.xpath(".//text()[not(ancestor::script) and not(ancestor::style)]"))
        text = " ".join(text.split())
        if len(text) >= 20:
            out.append(text[:2000])
        if len(out) >= limit:
            break
    return out


def _norm(text: str) -> str:
    return " ".join(_WORDS.findall(text.lower()))


def anchor_texts(tree) -> set[str]:
    """The normalised texts of the page's links of two words or more (read before trafilatura prunes)."""
    out = set()
    for node in tree.iter("a"):
        text = _norm(node.text_content())
        if " " in text:
            out.add(text)
    return out


def _is_link_line(line: str, anchors: set[str]) -> bool:
    """The whole line is the text of one link (a teaser, "Related: ..." or "- Other story"), not a bare URL."""
    stripped = line.strip()
    if not stripped or _URL_LINE.match(stripped.strip("*_")):
        return False
    if _norm(_LINE_MARK.sub("", stripped)) in anchors:
        return True
    label = _LABEL.match(stripped)
    rest = _norm(stripped[label.end():]) if label else ""
    return rest.count(" ") >= 2 and rest in anchors


def _is_title(line: str, title: str) -> bool:
    """The heading says what the page's title says: the whole title, or its part before or after a site-name
    separator ("Story | Site", "Site - Story"), once both are normalised."""
    heading = _norm(_HEADING.sub("", line))
    parts = [title, *_TITLE_SEPARATOR.split(title)]
    return bool(heading) and any(heading == _norm(part) for part in parts)


def _end_run(lines: list[str], order: list[int], links: set[int]) -> list[int]:
    """The link-only lines at one end of the text (`order` walks it from that end)."""
    run = []
    for i in order:
        if i not in links:
            break
        run.append(i)
    return run


def _mostly_links(lines: list[str], body: list[int], links: set[int]) -> bool:
    """The link lines hold most of the text: an index, a link list, steps that are links: the content itself."""
    total = sum(len(lines[i].strip()) for i in body)
    return 2 * sum(len(lines[i].strip()) for i in body if i in links) >= total


def _trailing(lines: list[str], body: list[int], links: set[int]) -> list[int]:
    """The trailing run of link lines to drop, with the section heading that announces it ("Related
    stories"); none when the run is what an intro line announces ("Steps to enable it:") or sits under the
    page's own first heading."""
    run = _end_run(lines, body[::-1], links)
    if not run or len(run) == len(body):
        return []
    before = body[len(body) - len(run) - 1]
    text = lines[before].strip()
    if text.endswith(":") and not _HEADING.match(text):
        return []
    if _HEADING.match(text):
        if before == body[0]:
            return []  # the page's own heading over a list of links: the content
        run.append(before)
    return run


def trim_chrome(text: str, title: str | None, anchors: set[str]) -> str:
    """Drop what surrounds an article rather than belonging to it: a leading heading that repeats the page
    title (returned apart), a run of link-only lines at the top of the text, and a trailing run of them
    (related stories) with the heading that announces it. Nothing inside the body is dropped, nor a link run
    that holds most of the text or that the page's heading or an intro line announces; no heading is left
    with nothing under it."""
    lines = text.split("\n")
    filled = [i for i, line in enumerate(lines) if line.strip()]
    drop: set[int] = set()
    if filled and title and _HEADING.match(lines[filled[0]]) and _is_title(lines[filled[0]], title):
        drop.add(filled[0])
    body = [i for i in filled if i not in drop]
    links = {i for i in body if _is_link_line(lines[i], anchors)}
    if body and not _mostly_links(lines, body, links):
        if not drop:  # links right under the page's own heading introduce it: kept
            drop.update(_end_run(lines, body, links))
        drop.update(_trailing(lines, [i for i in body if i not in drop], links))
    if len(drop) == len(filled):
        return text
    return _BLANK_RUNS.sub("\n\n", "\n".join(line for i, line in enumerate(lines) if i not in drop)).strip()


def _trafilatura(tree, **opts) -> str:
    import trafilatura

    opts = {"fast": True, **opts}
    return trafilatura.extract(tree, output_format="markdown", include_comments=False, include_tables=True,
                               include_images=False, include_links=False, deduplicate=False, **opts) or ""


def _listy(text: str) -> bool:
    """More than half of the lines have three words or fewer (navigation, archives, tag clouds)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return len(lines) >= 5 and sum(word_count(line) <= 3 for line in lines) > len(lines) / 2


def _markdownify_body(tree) -> str:
    """Last resort: the body without its obvious chrome, converted whole."""
    from lxml import etree
    from markdownify import markdownify

    body = tree.find(".//body")
    body = body if body is not None else tree
    for bad in body.xpath(".//script|.//style|.//nav|.//footer|.//header|.//aside|.//form|.//noscript|.//svg"):
        parent = bad.getparent()
        if parent is not None:
            parent.remove(bad)
    return markdownify(etree.tostring(body, encoding="unicode"), heading_style="ATX", strip=["a", "img"])


def parse_html(html: str | bytes):
    """An lxml tree of the page (trafilatura's tolerant loader); None when it is not HTML."""
    import logging

    from trafilatura import load_html

    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)  # its parse warnings are not the agent's business

    return load_html(html)


def extract(html: str | bytes, *, scan_hidden: bool = True) -> Extracted:
    """The page's main content as Markdown. Empty markdown means nothing article-like was found."""
    tree = parse_html(html)
    if tree is None:
        return Extracted("", None, "none")
    title = _title(tree)
    hidden = hidden_texts(tree) if scan_hidden else []
    anchors = anchor_texts(tree)
    # fast=True skips trafilatura's readability/justext comparison (measured in bench/extraction.py:
    # about 0.7x of its time at a higher F1 once Markdown escapes are undone); the few pages it gets
    # wrong look like lists of short lines and get the full, precision-favouring pass.
    text = clean_markdown(_trafilatura(tree))
    method = "trafilatura"
    if _listy(text):  # mostly short lines: fast mode grabbed an archive or link list; the full pass fixes it
        precise = clean_markdown(_trafilatura(parse_html(html), fast=False, favor_precision=True))
        if precise:
            text, method = precise, "trafilatura-precise"
    if len(text) < MIN_CHARS:  # rare: a fresh parse each time, trafilatura may have pruned the tree
        recall = clean_markdown(_trafilatura(parse_html(html), favor_recall=True))
        if len(recall) > len(text):
            text, method = recall, "trafilatura-recall"
    if not text:
        text, method = clean_markdown(_markdownify_body(parse_html(html))), "markdownify"
    return Extracted(trim_chrome(text, title, anchors), title, method, hidden)


def decode_text(data: bytes, charset: str | None = None) -> str:
    """Bytes as text, a page's or a local file's alike: the declared charset, else UTF-8 (also with a few bad
    bytes: a file cut by `head -c`, one stray byte), else the charset trafilatura detects for HTML pages
    (charset_normalizer)."""
    for name in filter(None, (charset, "utf-8")):
        try:
            return data.decode(name)
        except (LookupError, UnicodeDecodeError):
            continue
    text = data.decode("utf-8", "replace")
    high = sum(1 for b in data if b >= 0x80)  # in UTF-8 text nearly all are valid; in Latin-1 text none is
    if text.count("\ufffd") * 10 <= high:  # mostly valid UTF-8: its few bad bytes replaced
        return text
    from trafilatura.utils import detect_encoding  # heavy: only for text that is not UTF-8

    for name in detect_encoding(data):
        try:
            return data.decode(name)
        except (LookupError, UnicodeDecodeError):
            continue
    return text


def text_to_markdown(text: str) -> str:
    """Plain text as Markdown (it already is; normalise blank runs)."""
    return _BLANK_RUNS.sub("\n\n", text.replace("\r\n", "\n")).strip()


def convert_document(body: bytes, kind: str) -> str:
    """A PDF or Office file as Markdown: docling (imported here, it is heavy); PDFs without docling's
    layout models (torch) fall back to pypdfium2's text layer."""
    if kind == "pdf" and not _has_module("torch"):
        return _pdf_text(body)
    import io

    from docling.datamodel.base_models import DocumentStream
    from docling.document_converter import DocumentConverter

    try:
        result = DocumentConverter().convert(DocumentStream(name=f"document.{kind}", stream=io.BytesIO(body)))
        return clean_markdown(result.document.export_to_markdown())
    except Exception:  # noqa: BLE001 - a document docling cannot read: try the text layer for PDFs
        if kind == "pdf":
            return _pdf_text(body)
        raise


def _has_module(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


def _pdf_text(body: bytes) -> str:
    import pypdfium2

    pdf = pypdfium2.PdfDocument(body)
    try:
        pages = []
        for index in range(len(pdf)):
            page = pdf[index]
            text = page.get_textpage().get_text_range()
            pages.append(f"## Page {index + 1}\n\n{text.strip()}" if len(pdf) > 1 else text.strip())
        return text_to_markdown("\n\n".join(pages).replace("\r", ""))
    finally:
        pdf.close()
