"""Main-content extraction: what is trimmed around an article and what must stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from gsd_research.read.extract import _listy, extract, trim_chrome

FIXTURES = Path(__file__).parent / "fixtures" / "extraction"

PARAGRAPHS = [
    "The council approved the new budget on Tuesday after a long debate about school funding and roads.",
    "Members argued for three hours before the final vote, which passed by a narrow margin of seven to six.",
    "The mayor said the decision would let the city repair bridges that have been closed since the spring.",
    "Opponents said they would challenge parts of the plan at the next meeting of the finance committee.",
]


def page(body: str, title: str = "Council passes budget after long debate | City News") -> str:
    return (f"<html><head><title>{title}</title></head><body><header><a href='/'>City News home</a></header>"
            f"<article>{body}</article><footer>Contact us</footer></body></html>")


def article(*extra_before: str, extra_after: str = "") -> str:
    return "".join(extra_before) + "".join(f"<p>{p}</p>" for p in PARAGRAPHS) + extra_after


def test_a_leading_heading_that_repeats_the_title_is_dropped_and_the_title_kept():
    found = extract(page(article("<h1>Council passes budget after long debate</h1>")))
    assert found.title == "Council passes budget after long debate | City News"
    assert "Council passes budget" not in found.markdown
    assert found.markdown.startswith("The council approved")


def test_a_leading_heading_that_is_not_the_title_stays():
    found = extract(page(article("<h2>Background to the vote on the budget</h2>")))
    assert "Background to the vote on the budget" in found.markdown


TEASERS = ["### Mayor opens the new library downtown", "- Bridge closures extended until the summer"]
TEASER_ANCHORS = {"mayor opens the new library downtown", "bridge closures extended until the summer"}
BODY = "\n\n".join(PARAGRAPHS)
INSTALL = "\n\n".join(["## Installation", PARAGRAPHS[0]])

# (text, page title, link texts of the page, what trimming leaves)
TRIMS = {
    "link runs at either end go": ("\n\n".join([TEASERS[0], *PARAGRAPHS, *TEASERS[::-1]]), None, TEASER_ANCHORS,
                                   BODY),
    "a non-link line ends the run": ("\n\n".join([*PARAGRAPHS, TEASERS[1], "*Reporting by the city desk.*"]), None,
                                     TEASER_ANCHORS, "same"),
    "a link inside the article, even emphasised": (
        "\n\n".join([PARAGRAPHS[0], "- Budget figures for every district", PARAGRAPHS[1],
                      "**Related: Bridge closures extended until the summer**", PARAGRAPHS[2]]), None,
        {"budget figures for every district", "bridge closures extended until the summer"}, "same"),
    "a line containing a link, a bare URL": (
        "\n\n".join(["Read the full budget report for the details of the plan", PARAGRAPHS[0],
                      "https://city.example/budget-2019.pdf"]), None,
        {"full budget report", "https city example budget 2019 pdf"}, "same"),
    "a text made only of links": ("- Mayor opens the new library downtown\n- Bridge closures extended until the summer",
                                  "Mayor opens the new library downtown", TEASER_ANCHORS, "same"),
    "a title match past the first line": ("\n\n".join([PARAGRAPHS[0], "## Council passes budget", PARAGRAPHS[1]]),
                                          "Council passes budget", set(), "same"),
    "a leading heading that is not the title": (INSTALL, "Python packaging tutorial: installation and setup", set(),
                                                "same"),
    "a leading heading that is the title": (INSTALL, "Installation", set(), PARAGRAPHS[0]),
    "a leading heading that is the title before the site name": (INSTALL, "Installation | Python packaging", set(),
                                                                 PARAGRAPHS[0]),
    "a leading heading that is only the title's start": (INSTALL, "Installation and setup", set(), "same"),
}


@pytest.mark.parametrize("text, title, anchors, left", list(TRIMS.values()), ids=list(TRIMS))
def test_trim_chrome_drops_only_link_runs_at_the_ends_and_a_leading_title(text, title, anchors, left):
    assert trim_chrome(text, title, anchors) == (text if left == "same" else left)


def fixture(name: str):
    return extract((FIXTURES / f"{name}.html").read_text())


def lines(markdown: str) -> list[str]:
    return [line.strip() for line in markdown.splitlines() if line.strip()]


@pytest.mark.parametrize("name, wanted", [
    # a page whose content is a list of links under its own heading: the list is the content
    ("index-page", ["Installing on Linux systems", "Upgrading from version one"]),
    # a procedure whose steps are links, announced by an intro line
    ("steps-are-links", ["Steps to enable the feature in production clusters:",
                         "Enable the feature flag in settings", "Verify the health dashboard turns green"]),
    # a bold link paragraph inside the article
    ("bold-link-mid-article", ["**Read the migration guide before upgrading**"]),
    # a first section heading whose words are all in the title, but which is not the title
    ("section-heading-in-title", ["## Installation", "## Setup"]),
    ("heading-not-the-title", ["# Getting Started with the Widget API", "## Getting started"]),
])
def test_link_runs_and_headings_that_are_content_stay(name, wanted):
    found = lines(fixture(name).markdown)
    for line in wanted:
        assert line in found, (line, found)


def test_a_related_links_section_goes_with_its_heading_never_a_bare_heading():
    found = lines(fixture("next-steps-links").markdown)
    assert found[-1].startswith("Run certctl issue")
    assert not any("Next steps" in line or "cron job" in line for line in found)


def test_no_heading_is_left_with_nothing_under_it():
    for path in sorted(FIXTURES.glob("*.html")):
        found = lines(extract(path.read_text()).markdown)
        assert found and not found[-1].startswith("#"), (path.name, found)
        for line, after in zip(found, found[1:], strict=False):
            if line.startswith("#") and after.startswith("#"):
                assert after.count("#") > line.split()[0].count("#"), (path.name, line, after)


def test_lines_of_chinese_sentences_are_not_a_list_of_short_lines():
    lines = "\n".join(["缓冲区的默认大小为四千零九十六字节。", "可以在配置文件中修改。", "修改后需要重新启动服务才能生效。",
                       "该库支持Linux和macOS。", "Windows支持仍处于实验阶段。"])

    assert not _listy(lines)


GERMAN = "Die Größe der Büros ist groß. Grüße aus München. " * 20


@pytest.mark.parametrize("data", [
    GERMAN.encode("utf-8") + b"\xff" + GERMAN.encode("utf-8"),  # one stray byte
    (GERMAN + "Globus 🌐").encode("utf-8")[:-2],  # cut inside the last character (head -c)
    GERMAN.encode("latin-1"),
], ids=["utf-8 with a stray byte", "utf-8 cut mid-character", "latin-1"])
def test_text_is_decoded_by_its_charset_despite_a_few_bad_bytes(data):
    from gsd_research.read.extract import decode_text

    assert decode_text(data).startswith("Die Größe der Büros ist groß.")
