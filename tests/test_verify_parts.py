"""The parts of `verify`: finding sourced claims in Markdown, locating quotes, scoring support."""

from __future__ import annotations

import pytest

from gsd_research.verify.claims import extract_claims, references
from gsd_research.verify.quotes import closest, locate
from gsd_research.verify.registries import Package, has_version, package_of, registry_of
from gsd_research.verify.support import best_window, score, stem

RESEARCH = """# Widget research

React 18.2 is the current stable release [CITED: react.dev/blog/2022/06/15/react-v18]. Next.js 15 "uses the
React 19 canary with the App Router" [VERIFIED: npm registry].

- The toolkit needs Python 3.10 or newer [1]. It dropped 3.9 support [2, 3].
- See the [install guide](https://example.com/install) for "the most common errors that users run into".
- Parsers were benchmarked [1-3]. Footnoted claim[^4].

> The widget toolkit installs with pip on Python 3.10 and newer.
> — [Widgets](https://example.com/widgets)

```
A claim in code [CITED: https://not.a/claim] "is not a claim at all here"
```

Someone said "this is not sourced at all anywhere" in a talk. A claim. [CITED: https://example.com/after]

| Feature | Source |
|---|---|
| Tables cite too | [CITED: https://example.com/table] |

## Sources

1. Widget docs https://example.com/a
2. [Other](https://example.com/b)
- [3] Third. <https://example.com/c> (tavily, score 0.9)
  > snippet "with a quoted phrase in it here" is not a claim
[^4]: https://example.com/d
"""


@pytest.fixture(scope="module")
def claims():
    return {c.text: c for c in extract_claims(RESEARCH)}


def test_the_reference_list_is_read_in_every_style():
    assert references(RESEARCH) == {"1": "https://example.com/a", "2": "https://example.com/b",
                                    "3": "https://example.com/c", "4": "https://example.com/d"}


def test_cited_markers_links_and_numbered_references_become_sources(claims):
    assert claims["React 18.2 is the current stable release."].sources == [
        "https://react.dev/blog/2022/06/15/react-v18"]
    assert claims["The toolkit needs Python 3.10 or newer."].sources == ["https://example.com/a"]
    assert claims["It dropped 3.9 support."].sources == ["https://example.com/b", "https://example.com/c"]
    assert claims["Parsers were benchmarked."].sources == [f"https://example.com/{x}" for x in "abc"]
    assert claims["Footnoted claim."].sources == ["https://example.com/d"]
    assert claims["Tables cite too"].sources == ["https://example.com/table"]


def test_quotes_line_numbers_and_markers_without_a_source(claims):
    nextjs = next(c for t, c in claims.items() if t.startswith("Next.js"))
    assert nextjs.quotes == ["uses the React 19 canary with the App Router"]
    assert nextjs.sources == [] and nextjs.unresolved == [] and nextjs.line == 3
    assert (nextjs.tag, nextjs.registry) == ("VERIFIED", "npm")
    link = next(c for t, c in claims.items() if t.startswith("See the install guide"))
    assert link.sources == ["https://example.com/install"] and link.line == 7
    assert link.quotes == ["the most common errors that users run into"]


def test_a_sourced_blockquote_is_one_quote_without_its_attribution(claims):
    block = claims["The widget toolkit installs with pip on Python 3.10 and newer."]
    assert block.quotes == ["The widget toolkit installs with pip on Python 3.10 and newer."]
    assert block.sources == ["https://example.com/widgets"] and block.line == 10


def test_a_citation_after_the_full_stop_belongs_to_the_sentence_before(claims):
    assert claims["A claim."].sources == ["https://example.com/after"]
    unsourced = claims['Someone said "this is not sourced at all anywhere" in a talk.']
    assert unsourced.sources == [] and unsourced.quotes == ["this is not sourced at all anywhere"]


def test_code_and_the_reference_list_are_not_claims(claims):
    texts = " ".join(claims)
    assert "not a claim at all" not in texts and "snippet" not in texts
    assert all(c.line < 27 for c in claims.values())


def test_a_file_without_citations_has_no_claims():
    assert extract_claims("# Notes\n\nJust prose, with 'short quotes' and no sources.\n") == []


@pytest.mark.parametrize("line,tag,registry,sources", [
    ("Uses `react` 19.1.0 [VERIFIED: npm registry].", "VERIFIED", "npm", []),
    ("Needs pydantic 2.6 [VERIFIED: PyPI].", "VERIFIED", "pypi", []),
    ("Pin `serde` 1.0 [VERIFIED: crates.io].", "VERIFIED", "crates", []),
    ("Pin `tokio` [VERIFIED: cargo search].", "VERIFIED", "crates", []),
    ("Docs say so [VERIFIED: https://crates.io/crates/serde].", "VERIFIED", None, ["https://crates.io/crates/serde"]),
    ("Docs say so [CITED: docs.example.com/page].", "CITED", None, ["https://docs.example.com/page"]),
    ("Memoization makes widgets faster [ASSUMED].", "ASSUMED", None, []),
    ("See [the guide](https://example.com/g) [ASSUMED: from memory].", "ASSUMED", None, ["https://example.com/g"]),
    ("Plain link [guide](https://example.com/g).", "other", None, ["https://example.com/g"]),
])
def test_each_claim_keeps_its_provenance_tag_and_registry(line, tag, registry, sources):
    claim, = extract_claims(line + "\n")

    assert (claim.tag, claim.registry, claim.sources) == (tag, registry, sources)


def test_an_assumption_after_the_full_stop_belongs_to_the_sentence_before():
    first, second = extract_claims("Widgets are fast. [ASSUMED] Gadgets are cited [CITED: https://e.com/x].\n")

    assert (first.text, first.tag) == ("Widgets are fast.", "ASSUMED")
    assert (second.tag, second.sources) == ("CITED", ["https://e.com/x"])


@pytest.mark.parametrize("marker,registry", [
    ("npm registry", "npm"), ("npmjs.com", "npm"), ("PyPI", "pypi"), ("pip index versions", "pypi"),
    ("crates.io", "crates"), ("cargo search", "crates"), ("Context7", None), ("https://pypi.org/p/x", None),
])
def test_a_verified_marker_names_its_registry(marker, registry):
    assert registry_of(marker) == registry


@pytest.mark.parametrize("text,package", [
    ("`react` 19.1.0 is the current major", Package("react", "19.1.0")),
    ("Install react@19.1.0 for the new hooks", Package("react", "19.1.0")),
    ("Types come from @types/node@20.11.0", Package("@types/node", "20.11.0")),
    ("Use `useState` from `react` v19", Package("react", "19")),
    ("pydantic==2.6.1 validates settings", Package("pydantic", "2.6.1")),
    ("pydantic 2.6 validates settings on Python 3.12", Package("pydantic", "2.6")),
    ("`react` | 19.1.0 | UI |", Package("react", "19.1.0")),
    ("pydantic | 2.6 | validation |", Package("pydantic", "2.6")),
    ("`tokio` is the async runtime", Package("tokio", None)),
    ("`next` 15.0.0-rc.1 ships the compiler", Package("next", "15.0.0-rc.1")),
    ("Version 2.6 added strict mode", None),
    ("The framework is popular", None),
])
def test_the_package_and_version_a_claim_names(text, package):
    assert package_of(text) == package


@pytest.mark.parametrize("published,wanted,found", [
    (["2.6.0", "2.6.1"], "2.6", True),
    (["2.6"], "2.6.0", True),
    (["19.0.0", "19.1.0"], "19", True),
    (["19.1.0"], "v19.1.0", True),
    (["19.1.0"], "19.1", True),
    (["19.1.0"], "19.2", False),
    (["1.10.0"], "1.1", False),
    (["15.0.0-rc.1"], "15.0.0-rc.1", True),
    ([], "1.0.0", False),
])
def test_a_version_is_published_when_a_release_is_it_or_starts_with_it(published, wanted, found):
    assert has_version(published, wanted) is found


# -- quotes ----------------------------------------------------------------------------------------

SOURCE = ("# Title\n\nThe widget toolkit  installs with **pip** on Python 3.10 and newer. Version 4.2.0 dropped "
          "support for Python 3.9, which reached its end of life in October 2025. See [the guide]"
          "(https://x.com/guide) for “common errors”—and more.\n\nIt is not supported on Windows. Café naïve text.")


@pytest.mark.parametrize("quote,method,found", [
    ("Version 4.2.0 dropped support for Python 3.9", "exact", "Version 4.2.0 dropped support for Python 3.9"),
    ('See the guide for "common errors"', "fuzzy", "See [the guide](https://x.com/guide) for “common errors"),
    ("the widget toolkit installs with pip on python 3.10", "fuzzy",
     "The widget toolkit  installs with **pip** on Python 3.10"),
    ("Version 4.2.0 dropped support ... which reached its end of life", "fuzzy",
     "Version 4.2.0 dropped support for Python 3.9, which reached its end of life"),
    ("[The toolkit] installs with pip on Python 3.10", "fuzzy", "installs with **pip** on Python 3.10"),
    ("cafe naive text", "fuzzy", "Café naïve text"),
])
def test_quotes_are_found_with_their_offsets(quote, method, found):
    located = locate(quote, SOURCE)

    assert located is not None and located.method == method
    assert SOURCE[located.start:located.end] == found


@pytest.mark.parametrize("quote,quote_only,source_only", [
    ("Version 4.2.0 dropped support for Python 3.8", ["8"], ["9"]),
    ("It is supported on Windows", [], ["not"]),
    ("Version 4.2.0 dropped support for Ruby 3.9", ["ruby"], ["python"]),
])
def test_a_changed_word_number_or_negation_is_not_found_and_the_difference_is_shown(quote, quote_only, source_only):
    assert locate(quote, SOURCE) is None

    near = closest(quote, SOURCE)
    assert near["similarity"] >= 0.8
    assert near["quote_only"] == quote_only and near["source_only"] == source_only


def test_a_quote_must_start_and_end_on_word_boundaries():
    assert locate("kit installs with pip", SOURCE) is None
    assert locate("widget toolkit installs with pip on Python 3.1", SOURCE) is None


# -- support ---------------------------------------------------------------------------------------

def test_support_needs_the_words_the_numbers_and_the_same_negation():
    passage = "Emirates finalized a deal to purchase 30 Boeing 787-9 Dreamliner jets at the Dubai Air Show."

    assert score("Emirates agreed to purchase 30 Boeing Dreamliner jets at the Dubai Air Show.", passage)["supported"]
    assert score("Emirates will purchase 40 Boeing Dreamliner jets at the Dubai Air Show.", passage)["missing"] == ["40"]
    assert "negation differs" in score("Emirates did not purchase 30 Boeing Dreamliner jets at the Dubai Air Show.",
                                       passage)["reasons"]
    assert not score("The airline ordered Airbus planes for its fleet.", passage)["supported"]
    assert score("Qatar agreed to purchase 30 Boeing Dreamliner jets at the Dubai Air Show.", passage)["missing"] == ["qatar"]
    assert score("However, Emirates agreed to purchase 30 Boeing Dreamliner jets at the Dubai Air Show.",
                 passage)["supported"]


def test_a_negation_in_a_neighbouring_sentence_does_not_excuse_a_flipped_claim():
    passages = ["The plant did not open in 2019 as planned. Workers were hired for the plant in 2020."]

    _, result = best_window("Workers were not hired for the plant in 2020.", passages)

    assert not result["supported"] and "negation differs" in result["reasons"]


def test_the_best_window_is_the_sentence_that_supports_the_claim():
    passages = ["Intro sentence about the show. Emirates bought 30 Boeing 787 jets in Dubai. Weather was warm.",
                "Unrelated paragraph about football."]

    window, result = best_window("Emirates bought 30 Boeing 787 jets in Dubai", passages)

    assert window == "Emirates bought 30 Boeing 787 jets in Dubai." and result["supported"]


def test_stemming_is_light_and_consistent():
    assert {stem(w) for w in ("purchase", "purchases", "purchased")} == {"purchas"}
    assert [stem(w) for w in ("studies", "announced", "running", "class", "status", "boxes")] == [
        "study", "announc", "runn", "class", "status", "box"]


def test_the_pages_visible_text_leaves_out_what_a_reader_does_not_see():
    from gsd_research.read.api import visible_text

    html = ("<html><head><title>T</title><style>p{}</style></head><body><p>café a<b>bold</b> word<!-- note --> "
            "after</p><div style='display: none'>HIDDEN</div><span hidden>ALSO</span>tail<script>x=1</script>"
            "<ul><li>one</li><li>two</li></ul></body></html>").encode()

    text = visible_text(html)

    assert text.splitlines() == ["café abold word after", "tail", "one", "two"]
    assert visible_text(b"") == ""


def test_a_reference_definition_in_the_body_is_not_a_claim():
    found = extract_claims("The toolkit needs Python 3.10 or newer [1].\n\n[1]: https://example.com/a\n"
                           "[docs]: https://example.com/docs \"Docs\"\n")

    assert [(c.line, c.sources) for c in found] == [(1, ["https://example.com/a"])]


def test_consecutive_cited_lines_are_one_claim_each():
    found = extract_claims("The toolkit installs with pip [CITED: https://example.com/1]\n"
                           "It runs on Python 3.10 or newer [CITED: https://example.com/2]\n"
                           "A claim wrapped over\ntwo lines [CITED: https://example.com/3]\n")

    assert [(c.line, c.text, c.sources) for c in found] == [
        (1, "The toolkit installs with pip", ["https://example.com/1"]),
        (2, "It runs on Python 3.10 or newer", ["https://example.com/2"]),
        (3, "A claim wrapped over two lines", ["https://example.com/3"])]


def test_ipv6_literal_urls_are_sources_like_any_other():
    found = extract_claims("Loopback [CITED: http://[::1]:8080/pages/article]. A link [x](http://[fe80::1]/y).\n"
                           "Bare http://[2001:db8::1]:81/z here.\n")

    assert [c.sources for c in found] == [["http://[::1]:8080/pages/article"], ["http://[fe80::1]/y"],
                                          ["http://[2001:db8::1]:81/z"]]
    assert not any(c.unresolved for c in found)


def test_a_quote_of_two_sentences_is_one_quote():
    found = extract_claims('He wrote "The toolkit installs with pip. It runs on Python 3.10 and newer" '
                           "[CITED: https://example.com/x].\n")

    assert len(found) == 1
    assert found[0].quotes == ["The toolkit installs with pip. It runs on Python 3.10 and newer"]
