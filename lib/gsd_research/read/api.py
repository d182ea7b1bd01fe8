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


def fetch_source(rt, url: str) -> Source:
    """Read `url` like `gsd-research fetch --extract` does; raises the same typed errors (BLOCKED_URL, …)."""
    from gsd_research.llm.tasks import source_warnings
    from gsd_research.read.command import page_markdown
    from gsd_research.read.fetcher import Fetcher

    page = Fetcher(rt).fetch(url)
    markdown, title, hidden, method = page_markdown(page)
    text = visible_text(page.body) if page.kind == "html" else markdown
    return Source(url, page.final_url, title, markdown, text or markdown, method, page.from_cache,
                  source_warnings(markdown, hidden))


def _hidden(el, tag: str) -> bool:
    style = (el.get("style") or "").replace(" ", "").lower()
    return (tag in _INVISIBLE or el.get("hidden") is not None or el.get("aria-hidden") == "true"
            or "display:none" in style or "visibility:hidden" in style)


def visible_text(html: bytes) -> str:
    """The text a reader of the page sees, blocks on their own lines (hidden, script and style text left out:
    a page must not vouch for a quote with words it hides)."""
    from lxml import etree

    from gsd_research.read.extract import parse_html

    tree = parse_html(html)
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
