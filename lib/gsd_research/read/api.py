"""What other capabilities may use of `read`: one URL read the way `fetch` reads it (SSRF guard on every hop,
size cap, the shared HTTP cache first), as Markdown plus the page's whole visible text."""

from __future__ import annotations

from dataclasses import dataclass, field

_INVISIBLE = {"script", "style", "noscript", "template", "svg", "head"}
_BLOCKS = {"p", "div", "br", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "td", "th", "section",
           "article", "blockquote", "header", "footer", "main", "aside", "nav", "figure", "figcaption", "pre"}


@dataclass
class Source:
    """A page read for another capability: its main content and all of its visible text."""

    url: str
    final_url: str
    title: str | None
    markdown: str
    page_text: str  # every visible text node (a quote may stand outside the main content)
    extraction: str
    from_cache: bool
    warnings: list[dict] = field(default_factory=list)
    fetched_at: str | None = None  # when the HTTP cache's copy was read (None: read now)


def fetch_source(rt, url: str, stop_at: float | None = None) -> Source:
    """Read `url` like `gsd-research fetch --extract` does; raises the same typed errors (BLOCKED_URL, …).
    `stop_at` (a time.monotonic() value) bounds the whole read: past it, TIMEOUT."""
    from gsd_research.llm.tasks import source_warnings
    from gsd_research.read.command import page_markdown
    from gsd_research.read.fetcher import Fetcher

    page = Fetcher(rt, stop_at).fetch(url)
    markdown, title, hidden, method = page_markdown(page)
    text = visible_text(page.body, page.encoding) if page.kind == "html" else markdown
    return Source(url, page.final_url, title, markdown, text or markdown, method, page.from_cache,
                  source_warnings(markdown, hidden), page.fetched_at)


def page_text(rt, url: str, stop_at: float | None = None) -> str:
    """Only the page's visible text (no main-content extraction: cheaper), read like `fetch_source`."""
    from gsd_research.read.fetcher import Fetcher

    page = Fetcher(rt, stop_at).fetch(url)
    if page.kind == "html":
        return visible_text(page.body, page.encoding)
    if page.kind == "text":
        from gsd_research.read.extract import decode_text

        return decode_text(page.body, page.encoding)
    return fetch_source(rt, url, stop_at).markdown


def _hidden(el, tag: str) -> bool:
    style = (el.get("style") or "").replace(" ", "").lower()
    return (tag in _INVISIBLE or el.get("hidden") is not None or el.get("aria-hidden") == "true"
            or "display:none" in style or "visibility:hidden" in style)


def _decoded(html: bytes, encoding: str | None) -> str | bytes:
    """Text for the parser: the charset the server named, else UTF-8 when it decodes, else bytes (lxml then
    reads the page's own meta charset)."""
    try:
        return html.decode(encoding or "utf-8")
    except (LookupError, UnicodeDecodeError):
        return html


def _tree(html: bytes, encoding: str | None):
    """The parsed page without comments and processing instructions (their following text kept), or None."""
    import lxml.html
    from lxml import etree

    for source in (_decoded(html, encoding), html):  # str refuses an XML encoding declaration: bytes then
        try:
            tree = lxml.html.document_fromstring(source)
        except (etree.ParserError, ValueError):
            continue
        for node in tree.xpath("//comment() | //processing-instruction()"):
            if node.getparent() is not None:
                node.drop_tree()  # keeps the text after it (the walk does not visit comments)
        return tree
    return None


def visible_text(html: bytes, encoding: str | None = None) -> str:
    """The text a reader of the page sees, blocks on their own lines (hidden, script and style text left out:
    a page must not vouch for a quote with words it hides)."""
    from lxml import etree

    tree = _tree(html, encoding)
    if tree is None:
        return ""
    out: list[str] = []
    skip = 0
    for event, el in etree.iterwalk(tree, events=("start", "end")):
        tag = el.tag.lower() if isinstance(el.tag, str) else "#"
        if event == "start":
            if skip or (tag != "#" and _hidden(el, tag)):
                skip += 1
            elif tag != "#":
                out.append(("\n" if tag in _BLOCKS else "") + (el.text or ""))
            continue
        if skip:
            skip -= 1
            if skip:
                continue
        elif tag in _BLOCKS:
            out.append("\n")
        out.append(el.tail or "")
    return "\n".join(" ".join(line.split()) for line in "".join(out).splitlines() if line.strip())
