"""Main-content extraction: what is trimmed around an article and what must stay."""

from __future__ import annotations

from gsd_research.read.extract import extract, trim_chrome

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


def test_runs_of_link_lines_at_either_end_are_dropped():
    teasers = ["### Mayor opens the new library downtown", "- Bridge closures extended until the summer"]
    text = "\n\n".join([teasers[0], *PARAGRAPHS, *teasers[::-1]])
    anchors = {"mayor opens the new library downtown", "bridge closures extended until the summer"}
    assert trim_chrome(text, None, anchors) == "\n\n".join(PARAGRAPHS)
    # a non-link line ends the run: a teaser above it, inside the article, stays
    closing = "\n\n".join([*PARAGRAPHS, teasers[1], "*Reporting by the city desk.*"])
    assert teasers[1] in trim_chrome(closing, None, anchors)


def test_a_link_in_the_middle_stays_unless_it_is_an_emphasised_teaser():
    text = "\n\n".join([PARAGRAPHS[0], "- Budget figures for every district", PARAGRAPHS[1],
                       "**Related: Bridge closures extended until the summer**", PARAGRAPHS[2]])
    anchors = {"budget figures for every district", "bridge closures extended until the summer"}
    out = trim_chrome(text, None, anchors)
    assert "- Budget figures for every district" in out  # a plain link line inside the article is content
    assert "Bridge closures" not in out
    assert PARAGRAPHS[2] in out


def test_lines_that_merely_contain_a_link_or_are_bare_urls_stay():
    text = "\n\n".join(["Read the full budget report for the details of the plan",
                       PARAGRAPHS[0], "https://city.example/budget-2019.pdf"])
    anchors = {"full budget report", "https city example budget 2019 pdf"}
    assert trim_chrome(text, None, anchors) == text


def test_a_text_made_only_of_links_is_not_emptied():
    text = "- Mayor opens the new library downtown\n- Bridge closures extended until the summer"
    anchors = {"mayor opens the new library downtown", "bridge closures extended until the summer"}
    assert trim_chrome(text, "Mayor opens the new library downtown", anchors) == text


def test_trimming_never_touches_a_title_match_past_the_first_line():
    text = "\n\n".join([PARAGRAPHS[0], "## Council passes budget", PARAGRAPHS[1]])
    assert trim_chrome(text, "Council passes budget", set()) == text
