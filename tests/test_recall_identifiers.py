"""recall puts the one source holding an exact identifier first, hyphenated or not, lexical or hybrid."""

from __future__ import annotations

import re

import pytest

from gsd_research.memory.store import Entry, MemoryStore
from tests.researcher_fixtures import seed_model

TOPICS = ["fault codes of coolant pumps", "error codes of printers", "serial numbers of valves", "part numbers",
          "warning codes of boilers", "status codes of routers", "option names of caches", "config keys",
          "helper functions of widget trees", "product codes", "model numbers of engines", "gear ratios of bicycles",
          "diagnostic trouble codes", "identifier naming conventions"]
FILLER = ("The second paragraph gives more context about the subject so that the page is long enough to be "
          "read and the article keeps its main content about {topic} for the reader.")
BREAD = ("Knead the sourdough for ten minutes, fold it every half hour and let it rise overnight in the fridge; "
         "shape the loaf gently, score the top with a sharp blade, bake it in a preheated cast iron pot at 250 "
         "degrees with the lid on for twenty minutes and without it until the crust is dark brown, then let "
         "the bread cool on a rack for an hour before slicing it so that the crumb sets.")
CASES = [("QK-7731-ZETA", "the fault code QK-7731-ZETA means the coolant valve is stuck"),
         ("ab_cd.ef9", "set the option ab_cd.ef9 to raise the cache size"),
         ("fooBarBaz2", "the helper fooBarBaz2 returns the parsed widget tree")]


def _near(sentence: str, i: int) -> str:
    """The sentence with its identifier spelled as one other word (no exact term in common, close by meaning)."""
    return re.sub(r"\S*\d\S*", lambda m: re.sub(r"[-_.]", "", m.group(0)) + str(i), sentence)


def _fill(target: str) -> str:
    store = MemoryStore()
    try:
        entries = [Entry(kind="page", url="https://example.org/target", title="Sourdough basics", provider="fetch",
                         body=BREAD + f" Also, {target}. " + BREAD + "\n\n" + FILLER.format(topic="bread baking"))]
        entries += [Entry(kind="page", url=f"https://example.org/{i}", title=topic.title(), provider="fetch",
                          body=f"Notes on {topic}: {_near(target, i)}.\n\n" + FILLER.format(topic=topic))
                    for i, topic in enumerate(TOPICS)]
        assert store.put_many(entries) == ["stored"] * 15
    finally:
        store.close()
    return "https://example.org/target"


@pytest.mark.parametrize("identifier,sentence", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("embedded", [False, True], ids=["lexical", "hybrid"])
def test_the_page_holding_an_identifier_comes_first(cli, identifier, sentence, embedded):
    target = _fill(sentence)
    if embedded:
        from gsd_research.researcher import embed_worker

        seed_model()
        embed_worker.embed_now("research-memory")

    doc = cli("recall", identifier).json

    assert doc["metadata"]["entries"] >= 14
    assert doc["metadata"]["mode"] == ("hybrid" if embedded else "lexical")
    assert doc["results"][0]["source_url"] == target, [r["source_url"] for r in doc["results"]]


def test_identifier_words():
    from gsd_research.memory.recall_command import identifiers

    assert identifiers('what does "QK-7731-ZETA" mean for ab_cd.ef9, fooBar and v2?') == [
        "QK-7731-ZETA", "ab_cd.ef9", "fooBar", "v2"]
    assert identifiers("how do sourdough loaves rise - slowly.") == []
