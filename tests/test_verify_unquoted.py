"""Without a model, word overlap is not support: unquoted claims are `related` at best (with a caveat), a
number next to another word than in the source is `not_found`, a claim of a word or two is `too_short`."""

from __future__ import annotations

import pytest

from tests.memory_fixtures import page

SOURCE = ("The Rottnest power station has a capacity of 240 megawatts and it opened in 1966 on the island. "
          "The quokka lives on Rottnest Island, where it is common and protected.")


@pytest.fixture
def cited(cli, fake, monkeypatch, tmp_path):
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    url = page(fake, "rottnest", "Rottnest notes", SOURCE)

    def run(*claims: str, source: str | None = None) -> list[dict]:
        cited_url = page(fake, "other", "Other notes", source) if source else url
        path = tmp_path / "R.md"
        path.write_text("\n\n".join(f"{c} [CITED: {cited_url}]" for c in claims) + "\n")
        doc = cli("verify", str(path), "--max-tokens", "4000").json
        return sorted(doc["claims"], key=lambda c: c["line"])

    return run


def test_swapped_numbers_are_not_found(cited):
    swapped, true = cited("The Rottnest power station has a capacity of 1966 megawatts and it opened in 240.",
                          "The Rottnest power station has a capacity of 240 megawatts and it opened in 1966.")

    assert swapped["verdict"] == "not_found" and any("same unit" in r for r in swapped["reasons"])
    assert true["verdict"] == "related" and true["method"] == "ranking"


@pytest.mark.parametrize(("claim", "source"), [
    ("Python 3.9 reached its end of life in October 2025.",
     "Version 4.2.0 dropped support for Python 3.9, which reached its end of life in October 2025."),
    ("Widget toolkit 5.0 requires Python 3.12 or newer.",
     "Widget toolkit 5.0, released in March, requires Python 3.12 or newer."),
    ("Django 5.0 dropped support for Python 3.9.", "Django 5.0 dropped support for Python 3.8 and 3.9."),
    ("The search index of the cluster uses 5 shards and 3 replicas.",
     "Search index settings of the cluster. Shards: 5. Replicas: 3."),  # a label's next entry is no unit
])
def test_a_number_next_to_a_word_that_is_no_unit_is_found(cited, claim, source):
    (result,) = cited(claim, source=source)

    assert result["verdict"] == "related", result.get("reasons")


def test_overlap_with_added_facts_is_never_supported_without_a_model(cited):
    claims = cited("The quokka is extinct on Rottnest Island.",
                   "The Rottnest power station is the largest in the world and opened in 1966.")

    assert all(c["verdict"] != "supported" for c in claims)
    assert all("not a support judgement" in c["caveat"] for c in claims if c["verdict"] == "related")


def test_a_one_word_claim_is_too_short(cited):
    (claim,) = cited("Rottnest.")

    assert claim["verdict"] == "too_short" and claim["method"] == "none"

