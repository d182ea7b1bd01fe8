"""Exact-term lookup finds a distinctive identifier written inside a longer one: a short commit hash, a
version without its prefix and build suffix."""

from __future__ import annotations

import pytest

from tests.researcher_fixtures import kb, make_repo, seed_model

HASH = "9f3c2a7be41d08e2c1aa5b6f7e8d9c0b1a2f3e4d"
FILLER = ("The release notes describe the changes of each version of the toolkit, the fixes and the known "
          "issues, and which commit introduced them.")


def test_partial_expressions_and_containment():
    from gsd_research.researcher.gateways.lexical_gateway import holds, partial_expression

    assert partial_expression("9f3c2a7be41d") == '"9f3c2a7be41d"*'
    assert partial_expression("7.13.0-rc.4") == '"13 0 rc 4"'
    for ordinary in ("9f3c2a7", "deadbeefcafe", "12345678", "configure_frobnicator", "1.2", "sparse", "7-day-old",
                     "7.13.0 is out", "3 of 4 patients"):
        assert partial_expression(ordinary) is None, ordinary
    assert holds(f"commit {HASH} landed", "9f3c2a7be41d")
    assert not holds("commit x9f3c2a7be41d landed", "9f3c2a7be41d")
    assert holds("release v7.13.0-rc.4+build.9981", "7.13.0-rc.4")
    assert not holds("release v7.13.0-rc.40", "7.13.0-rc.4")


def test_a_version_matches_only_from_the_start_of_a_token():
    from gsd_research.researcher.gateways.lexical_gateway import holds

    assert not holds("release v17.13.0 is out", "7.13.0")  # another version ending the same way
    assert not holds("release 17.13.0 is out", "7.13.0")
    assert not holds("tagged v2.5.1-rc.3 today", "1-rc.3")  # the tail of another version
    assert not holds("tagged v2.5.1-rc.3 today", "5.1-rc.3")
    for text in ("release v7.13.0-rc.4+build.9981", "release V7.13.0-rc.4", "7.13.0-rc.4 first",
                 "(7.13.0-rc.4)", "release-7.13.0-rc.4", "pkg@7.13.0-rc.4"):
        assert holds(text, "7.13.0-rc.4"), text
    assert not holds("release xv7.13.0-rc.4", "7.13.0-rc.4")  # "v" not alone at the token's start


@pytest.fixture
def model(home):
    return seed_model()


def test_a_short_hash_and_a_bare_version_find_their_document(tmp_path, model):
    docs = {f"notes/r{i}.md": f"# Release {i}\n\n{FILLER} Version 7.{i}.0 shipped with commit "
                              f"{i:02d}{HASH[2:]}.\n" for i in range(8)}
    docs["notes/hash.md"] = f"# Incident\n\n{FILLER} The regression came from commit {HASH} in the parser.\n"
    docs["notes/version.md"] = f"# Candidate\n\n{FILLER} Build v7.13.0-rc.4+build.9981 is the candidate.\n"
    docs["notes/near.md"] = f"# Near\n\n{FILLER} Build v7.13.0-rc.40 is a later candidate.\n"
    root = make_repo(tmp_path / "repo", docs)
    kb("repo", "add", "r", str(root), "--json")
    kb("index", "r", "--json")

    for query, expected in (("9f3c2a7be41d", "notes/hash.md"), ("7.13.0-rc.4", "notes/version.md"),
                            ("which change does commit 9f3c2a7be41d make", "notes/hash.md"),
                            ("what is in 7.13.0-rc.4", "notes/version.md")):
        out = kb("search", query, "--json", "--documents", "3").json

        assert out["documents"][0]["document_path"] == expected, (query, [d["document_path"] for d in out["documents"]])
        assert out["fragments"][0]["match"] in ("lexical", "both")
