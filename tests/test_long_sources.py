"""What a model reads of a source longer than llm.max_input_tokens: with a focus, the sections about it wherever
they are; without one, the beginning; and the answer says it read only part (`metadata.source_cut`)."""

from __future__ import annotations

import json

import pytest

from gsd_research.read.selection import choose

LIMIT = 1500
TARGET = "Breaking change in 5.0: Widget.render was removed, call Widget.draw instead."
FILLER = ("Thanks to everyone who reported issues and sent pull requests for this release. "
          "The documentation was updated and several typos were fixed in the guides. ") * 6


def changelog(sections: int = 40) -> str:
    """A changelog whose every section says "changes"; only the last one is about 5.0's breaking change."""
    parts = [f"# Widget toolkit changelog\n\nAll notable changes to Widget toolkit are listed here.\n\n{FILLER}"]
    parts += [f"## 1.{n}\n\nBug fixes and small changes in release 1.{n}.\n\n{FILLER}" for n in range(sections)]
    parts.append(f"## 5.0\n\n{TARGET}")
    return "\n\n".join(parts)


def _model_input(fake) -> str:
    return json.dumps([h.json() for prefix in ("/gemini", "/ollama", "/openai") for h in fake.hits(prefix)])


@pytest.fixture
def long_page(pages, cli, tmp_path):
    assert cli("config", "set", "llm.max_input_tokens", str(LIMIT)).code == 0
    pages.state["pages"] = {"changelog": "<html><body><main>" + "".join(
        f"<h2>{p.split(chr(10))[0].lstrip('# ')}</h2>" + "".join(f"<p>{x}</p>" for x in p.split("\n\n")[1:])
        for p in changelog().split("\n\n## ")) + "</main></body></html>"}
    (tmp_path / "changelog.md").write_text(changelog())
    return pages


@pytest.mark.parametrize("args", [
    ["fetch", "{url}/pages/state/changelog", "--focus", "breaking changes in 5.0"],
    ["summarize", "{tmp}/changelog.md", "--focus", "breaking changes in 5.0"],
    ["analyze", "Which breaking changes does 5.0 bring?", "{tmp}/changelog.md"],
], ids=["fetch", "summarize", "analyze"])
def test_the_model_reads_the_sections_about_the_focus_of_a_long_source(cli, long_page, keys, tmp_path, args):
    r = cli(*(a.format(url=long_page.url, tmp=tmp_path) for a in args))

    assert r.code == 0, r.stdout
    assert TARGET in _model_input(long_page)
    assert r.json["metadata"]["source_cut"]["chosen_by"] == "focus"
    assert r.json["metadata"]["source_cut"]["read_tokens"] <= LIMIT


def test_without_a_focus_the_model_reads_the_beginning_and_the_answer_says_so(cli, long_page, keys, tmp_path):
    r = cli("summarize", str(tmp_path / "changelog.md"))

    assert "All notable changes to Widget toolkit" in _model_input(long_page)
    assert TARGET not in _model_input(long_page)
    assert r.json["metadata"]["source_cut"]["chosen_by"] == "beginning"


def test_a_source_that_fits_is_read_whole_and_says_nothing(cli, pages, keys, tmp_path):
    (tmp_path / "short.md").write_text(changelog(sections=2))

    r = cli("summarize", str(tmp_path / "short.md"), "--focus", "breaking changes in 5.0")

    assert TARGET in _model_input(pages)
    assert "source_cut" not in r.json["metadata"]


def test_with_no_model_the_extractive_summary_quotes_the_section_about_the_focus(cli, long_page):
    r = cli("fetch", long_page.url + "/pages/state/changelog", "--focus", "breaking changes in 5.0")

    assert r.json["metadata"]["summary_type"] == "extractive"
    assert "Widget.render was removed" in r.json["summary"]


def keep_a_changelog(versions: int = 300) -> str:
    """Newest first, each version's notes under ### subsections, the answer deep down under 2.0.0."""
    notes = "\n".join(f"- Fixed the scheduler timeout handling when the config is invalid (#{n})" for n in range(6))
    parts = ["# Changelog\n\nAll notable changes to this project are documented here."]
    for n in range(versions, 0, -1):
        version = "2.0.0" if n == 120 else f"{n // 10}.{n % 10}.{n % 7}"
        body = ("### Removed\n\n- Widget.render is gone; call Widget.draw instead.\n\n### Changed\n\n- Client "
                "timeouts are now given in milliseconds, not seconds.") if version == "2.0.0" else f"### Fixed\n\n{notes}"
        parts.append(f"## [{version}] - 2024-08-{n % 28 + 1:02d}\n\n{body}")
    return "\n\n".join(parts)


@pytest.mark.parametrize("focus, wanted", [
    ("What are the breaking changes in 2.0?", ["## [2.0.0]", "Widget.draw", "milliseconds"]),  # deep down
    ("What changed in 30.0.6?", ["## [30.0.6]", "Fixed the scheduler"]),  # the newest, at the top
], ids=["a version deep down", "the newest version"])
def test_a_version_is_read_with_the_notes_under_its_heading(focus, wanted):
    reading = choose(keep_a_changelog(), focus, LIMIT)

    assert all(w in reading.text for w in wanted), [w for w in wanted if w not in reading.text]


def test_github_style_v_versions_are_found_by_their_number():
    text = keep_a_changelog().replace("## [", "## v").replace("] - ", " (")

    reading = choose(text, "What changed in 2.0.0?", LIMIT)

    assert "## v2.0.0" in reading.text and "Widget.draw" in reading.text


def test_a_source_without_markdown_headings_is_read_from_its_beginning():
    """NEWS files and setext headings say nowhere where a version's notes end: the beginning, as always."""
    news = keep_a_changelog().replace("## [", "Version ").replace("### ", "  ")

    reading = choose(news, "What are the breaking changes in 2.0?", LIMIT)

    assert reading.cut["chosen_by"] == "beginning"


@pytest.mark.parametrize("focus", ["", "the weather on Mars"], ids=["no focus", "focus found nowhere"])
def test_a_focus_that_picks_nothing_reads_the_beginning(focus):
    reading = choose(changelog(), focus, LIMIT)

    assert reading.text.startswith("# Widget toolkit changelog")
    assert reading.cut["chosen_by"] == "beginning"
