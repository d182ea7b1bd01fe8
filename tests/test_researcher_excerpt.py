"""A passage cut to fit --max-tokens keeps the lines the query matched, as a verbatim slice with its
omissions marked."""

from __future__ import annotations

import pytest

from tests.researcher_fixtures import kb, make_repo, seed_model

IDENT = "zq_flux_capacitor_77x"
OPTIONS = "".join(f"--option-{i}\nenable the feature number {i} of the copy command when asked\n\n" for i in range(40))
SHORT = "".join(f"--opt-{i}\nenable feature {i}\n\n" for i in range(25))
CP = f"# cp manual\n\n## Description\n\n{SHORT}The internal identifier `{IDENT}` controls sparse copies.\n"


def _check_slice(cut: str, text: str) -> None:
    inner = cut.removeprefix("…").removesuffix("…")
    assert inner and inner in text
    assert cut.startswith("…") == (not text.startswith(inner))
    assert cut.endswith("…") == (not text.endswith(inner))


def test_the_excerpt_keeps_the_matching_line_and_marks_omissions():
    from gsd_research.core.tokens import count_tokens
    from gsd_research.researcher.excerpt import excerpt

    cut = excerpt(OPTIONS + f"The identifier `{IDENT}` is here.\n" + OPTIONS, IDENT, 120, count_tokens)

    assert IDENT in cut and count_tokens(cut) <= 120
    assert cut.startswith("…") and cut.endswith("…")
    _check_slice(cut, OPTIONS + f"The identifier `{IDENT}` is here.\n" + OPTIONS)
    head = excerpt(f"The identifier `{IDENT}` is here.\n" + OPTIONS, IDENT, 60, count_tokens)
    assert head.startswith("The identifier") and head.endswith("…")
    plain = excerpt(OPTIONS, "nothing matches qqq", 60, count_tokens)
    assert plain.startswith("--option-0") and plain.endswith("…") and count_tokens(plain) <= 60
    long_line = "word " * 400 + IDENT + " tail " * 400
    cut = excerpt(long_line, IDENT, 50, count_tokens)
    assert IDENT in cut and count_tokens(cut) <= 50
    _check_slice(cut, long_line)


@pytest.fixture
def model(home):
    return seed_model()


def test_a_cut_fragment_keeps_the_identifier_the_query_named(tmp_path, model):
    docs = {"cp.md": CP, **{f"n{i}.md": f"# Note {i}\n\nCopying files keeps their mode bits, item {i}.\n"
                            for i in range(6)}}
    root = make_repo(tmp_path / "repo", docs)
    kb("repo", "add", "r", str(root), "--json")
    kb("index", "r", "--json")

    for budget in (300, 400):
        out = kb("search", IDENT, "--json", "--max-tokens", str(budget)).json
        top = out["documents"][0]
        passage = top["top_fragments"][0]

        assert top["document_path"] == "cp.md"
        assert IDENT in passage["text"], (budget, passage["text"])
        assert passage.get("truncated") is True
        _check_slice(passage["text"], CP.rstrip("\n"))
