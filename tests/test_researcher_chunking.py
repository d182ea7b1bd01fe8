"""researcher chunking: every fragment is a contiguous slice of the document's text (no invented breaks), code
blocks and tables stay whole when they fit and are split on line boundaries when they do not, and the heading
path is a separate, marked breadcrumb."""

from __future__ import annotations

import re

import pytest

from tests.conftest import require
from tests.researcher_fixtures import MIXED

_INLINE_SPACE = re.compile(r"[ \t]+")


def _norm(text: str) -> str:
    """Whitespace inside a line may be normalized; line breaks may not."""
    return "\n".join(_INLINE_SPACE.sub(" ", line).strip() for line in text.split("\n"))


def assert_slices(fragments, source: str) -> None:
    """Each fragment is a contiguous slice of `source`, in order, and together they tile it."""
    norm = _norm(source)
    pos = 0
    for f in fragments:
        text = _norm(f.text)
        assert text.strip(), "empty fragment"
        at = norm.find(text, pos)
        assert at >= 0, f"fragment {f.fragment_index} is not a slice of the document: {f.text[:200]!r}"
        pos = at + len(text)
    covered = re.sub(r"\s+", "", "".join(f.text for f in fragments))
    document = re.sub(r"\s+", "", norm)
    if covered != document:  # only heading lines may be missing, and only when a breadcrumb shows them
        crumbs = {h for f in fragments for h in f.breadcrumb.split(" > ")}
        missing = [line for line in norm.split("\n") if line.strip() and re.sub(r"\s+", "", line) not in covered]
        assert all(line.startswith("#") and line.lstrip("#").strip() in crumbs for line in missing), \
            f"the fragments do not tile the document: {missing[:3]}"


LONG_PROSE = " ".join(
    f"Step {i}: the service returns success: true when the job ended; otherwise it answers false` → retry "
    f"with a delay of {i} seconds!" for i in range(60))
CODE_LINES = [f"    value_{i} = compute({i}, option='x')  # line {i}" for i in range(120)]
DOC = ("# Guide\n\nIntro paragraph.\n\n## Setup\n\n" + LONG_PROSE + "\n\n"
       "```python\nimport fastapi\n\napp = fastapi.FastAPI()\n```\n\n"
       "| key | value |\n|-----|-------|\n| a | 1 |\n| b | 2 |\n\n"
       "## Big code\n\n```python\ndef big():\n" + "\n".join(CODE_LINES) + "\n```\n\n### Usage\n\nCall it.\n")


def test_fragments_are_contiguous_slices_without_invented_breaks():
    from gsd_research.researcher.chunking import approx_counter, chunk_text

    frags = chunk_text(DOC, "g.md", approx_counter, max_tokens=120)

    assert_slices(frags, DOC)
    assert [f.fragment_index for f in frags] == list(range(len(frags)))
    assert all(approx_counter([f.text])[0] + approx_counter([f.breadcrumb])[0] <= 120 for f in frags)
    joined = "\n".join(f.text for f in frags)
    assert "success:\n" not in joined and not any(f.text.startswith("false`") for f in frags)
    assert "```python\n\nimport" not in joined
    small_code = "```python\nimport fastapi\n\napp = fastapi.FastAPI()\n```"
    assert any(small_code in f.text for f in frags)  # a code block that fits is one piece
    table = "| key | value |\n|-----|-------|\n| a | 1 |\n| b | 2 |"
    assert any(table in f.text for f in frags)
    source_lines = set(DOC.split("\n"))
    big = [f for f in frags if "value_" in f.text]
    assert len(big) > 1  # the oversized block was split ...
    for f in big:  # ... on line boundaries: every line of each piece is a whole line of the document
        assert set(f.text.strip("\n").split("\n")) <= source_lines, f.text[:200]


def test_the_heading_path_is_a_marked_breadcrumb_not_part_of_the_text():
    from gsd_research.researcher.chunking import approx_counter, chunk_text

    frags = chunk_text(DOC, "g.md", approx_counter, max_tokens=120)

    assert frags[0].text.startswith("# Guide") and frags[0].breadcrumb == ""
    inside_setup = [f for f in frags if "success: true" in f.text and "## Setup" not in f.text]
    assert inside_setup and all(f.breadcrumb == "Guide > Setup" for f in inside_setup)
    assert not any(f.text.startswith("Guide > Setup") for f in frags)
    usage = [f for f in frags if "Call it." in f.text][0]
    assert usage.breadcrumb in ("Guide > Big code", "Guide > Big code > Usage")
    from gsd_research.researcher.chunking import embedding_text

    assert embedding_text(inside_setup[0]).startswith("Guide > Setup\n")
    assert embedding_text(frags[0]) == frags[0].text
    attributed = "# Extra Models { #extra-models }\n\n## Union { .note #union }\n\n" + "Text of it. " * 40
    crumbs = {f.breadcrumb for f in chunk_text(attributed, "a.md", approx_counter, max_tokens=60)}
    assert crumbs == {"Extra Models > Union"}  # a heading's attribute list is not part of its title


def test_a_heading_is_never_a_fragment_alone_when_its_content_follows():
    from gsd_research.researcher.chunking import approx_counter, chunk_text

    title = "A distinctive DNA damage response in human stem cells"
    abstract = " ".join(f"Sentence {i} of the abstract reports a finding." for i in range(30))
    doc = f"# {title}\n\n{abstract}\n"

    frags = chunk_text(doc, "s.md", approx_counter, max_tokens=100)

    assert len(frags) > 1 and all("Sentence" in f.text for f in frags)  # no fragment is the title alone
    for f in frags:  # the title goes with every piece: in its text, or as its breadcrumb
        assert f.breadcrumb == ("" if f.text.startswith(f"# {title}") else title)
    for size in (60, 80, 120):  # whatever the budget
        assert all("Sentence" in f.text for f in chunk_text(doc, "s.md", approx_counter, max_tokens=size))
    assert_slices(frags, doc)
    short = chunk_text(f"# {title}\n\nOne short abstract.\n", "t.md", approx_counter, max_tokens=100)
    assert [(f.text, f.breadcrumb) for f in short] == [(f"# {title}\n\nOne short abstract.", "")]
    empty_sections = "# A\n\n## B\n\n## C\n\ntext\n"
    assert "## B" in "".join(f.text for f in chunk_text(empty_sections, "e.md", approx_counter, max_tokens=5))


def test_plain_text_prose_and_edge_cases():
    from gsd_research.researcher.chunking import approx_counter, chunk_text

    assert chunk_text("", "e.txt") == []
    assert chunk_text("\n\n   \n", "e.txt") == []
    plain = "# not a heading\n\nsecond paragraph"
    frags = chunk_text(plain, "t.txt", markdown=False)
    assert [f.text for f in frags] == [plain] and frags[0].breadcrumb == ""
    one_long_line = "word " * 2000
    frags = chunk_text(one_long_line, "w.txt", approx_counter, max_tokens=100, markdown=False)
    assert len(frags) >= 20 and all(approx_counter([f.text])[0] <= 100 for f in frags)
    assert_slices(frags, one_long_line)
    blob = "x" * 5000  # no whitespace at all: cut between characters, still slices
    frags = chunk_text(blob, "b.txt", approx_counter, max_tokens=50, markdown=False)
    assert "".join(f.text for f in frags) == blob
    unclosed = "# T\n\n```\ncode without an end\nmore code\n"
    assert_slices(chunk_text(unclosed, "u.md", approx_counter, max_tokens=100), unclosed)
    crlf = "# Title\r\n\r\nLine one.\r\nLine two.\r\n"
    assert_slices(chunk_text(crlf, "c.md", approx_counter, max_tokens=100), crlf.replace("\r\n", "\n"))


@pytest.mark.parametrize("name", ["word_sample.docx", "unit_test_headers_numbered.docx", "example_01.html",
                                  "table_with_heading_01.html"])
def test_docling_documents_are_chunked_by_their_own_structure(name):
    require(MIXED / name, "docling's sample documents")
    from gsd_research.researcher.chunking import approx_counter, chunk_text
    from gsd_research.researcher.gateways.docling_gateway import DoclingGateway

    doc = DoclingGateway().convert(MIXED / name, name)
    for max_tokens in (60, 254):
        frags = chunk_text(doc.text, doc.path, approx_counter, max_tokens, doc.markdown)

        assert frags
        assert_slices(frags, doc.text)
    if name == "word_sample.docx":
        table = [f for f in frags if "| Leaves" in f.text]
        assert table and "| Grain" in table[0].text  # the table (fits the budget) is kept whole
        small = chunk_text(doc.text, doc.path, approx_counter, 60, doc.markdown)
        assert any(f.breadcrumb.startswith("Swimming in the lake") for f in small)


def _sections(n: int, paragraphs: int, words: int = 18) -> str:
    out = ["# Guide\n"]
    for s in range(n):
        out.append(f"## Section {s}\n")
        out += [" ".join(f"w{s}x{p}y{k}" for k in range(words)) + ".\n" for p in range(paragraphs)]
    return "\n".join(out)


@pytest.mark.parametrize("paragraphs", [1, 2, 3, 4, 5, 7])
def test_no_fragment_ends_on_a_bare_heading(paragraphs):
    from gsd_research.researcher.chunking import chunk_text

    text = _sections(12, paragraphs)
    fragments = chunk_text(text, "g.md", max_tokens=120)

    assert len(fragments) >= 3
    assert_slices(fragments, text)
    for f in fragments:
        assert not f.text.rstrip().split("\n")[-1].startswith("#"), f.text


def test_a_section_boundary_in_the_last_quarter_ends_the_fragment():
    from gsd_research.researcher.chunking import approx_counter, chunk_text

    text = _sections(10, 3, words=10)  # sections of ~39 counted tokens: a boundary falls near each fragment's end
    fragments = chunk_text(text, "g.md", max_tokens=100)

    assert_slices(fragments, text)
    starts = [f for f in fragments[1:] if f.text.startswith("## Section")]
    assert len(starts) >= len(fragments) - 2, [f.text[:40] for f in fragments]
    assert all(approx_counter([f.breadcrumb + "\n" + f.text])[0] <= 100 for f in fragments)
