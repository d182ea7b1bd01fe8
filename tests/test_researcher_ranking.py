"""researcher ranking (`ranking.rank`) and answers within a token budget (`answer.answer`), on synthetic evidence."""

from __future__ import annotations

import json

import pytest


def _frag(fid: str, path: str, distance: float | None = None, bm25: float = 0.0, text: str | None = None):
    from gsd_research.researcher.models import SearchResult

    return SearchResult(fragment_id=fid, text=text or f"text of {fid}", document_path=path, fragment_index=0,
                        distance=distance, score=bm25, match="vector" if distance is not None else "lexical")


def _vector(prefix: str, sims: list[float]):
    return [_frag(f"{prefix}{i}", f"{prefix}{i}.md", distance=1 - s) for i, s in enumerate(sims)]


def test_a_single_exact_hit_ranks_its_document_first():
    from gsd_research.researcher.ranking import Evidence, rank

    planted = _frag("p", "planted.md", bm25=3.2)
    ev = Evidence("r", vector=_vector("v", [0.62, 0.6, 0.58, 0.5, 0.45, 0.4, 0.35, 0.3]),
                  lexical=[planted], exact={"QZ_STALL_1": [planted]}, term_documents={"QZ_STALL_1": 1})

    ranked = rank([ev], n_fragments=5, n_documents=3)

    assert ranked.documents[0].document_path == "planted.md"
    assert ranked.documents[0].score > ranked.documents[1].score + 0.5
    assert ranked.fragments[0].fragment_id == "p"
    assert ranked.documents[0].top_fragments[0].text == "text of p"


def test_a_single_lexical_match_keeps_its_full_lexical_score():
    from gsd_research.researcher.ranking import LEXICAL_WEIGHT, Evidence, rank

    only = _frag("x", "x.md", bm25=2.0)
    ev = Evidence("r", vector=_vector("v", [0.7, 0.5, 0.3]), lexical=[only])

    ranked = rank([ev], 5, 5)

    x = next(d for d in ranked.documents if d.document_path == "x.md")
    assert x.score == pytest.approx(LEXICAL_WEIGHT)  # min-max made this 0 before: a single match lost all credit
    assert ranked.documents[0].document_path in ("v0.md", "x.md")


def test_no_lexical_or_exact_hit_keeps_the_vector_order():
    from gsd_research.researcher.ranking import VECTOR_WEIGHT, Evidence, rank

    ev = Evidence("r", vector=_vector("v", [0.9, 0.7, 0.5, 0.3]), term_documents={"ERR_NONE_1": 0})

    ranked = rank([ev], 4, 4)

    assert [d.document_path for d in ranked.documents] == ["v0.md", "v1.md", "v2.md", "v3.md"]
    assert [d.score for d in ranked.documents] == pytest.approx([VECTOR_WEIGHT, VECTOR_WEIGHT * 2 / 3,
                                                                 VECTOR_WEIGHT / 3, 0.0], abs=1e-6)
    assert all(f.match == "vector" for f in ranked.fragments)
    assert rank([Evidence("r")], 4, 4).documents == []


def test_lists_become_standard_scores_a_standout_keeps_its_strength():
    from gsd_research.researcher.ranking import Z_SPAN, _standard

    assert _standard({}) == {}
    assert _standard({"a": 3.0}) == {"a": 1.0}  # one candidate, or all alike: the full score
    assert _standard({"a": 2.0, "b": 2.0}) == {"a": 1.0, "b": 1.0}
    flat = _standard({f"f{i}": 1.0 + 0.01 * i for i in range(10)})
    standout = _standard({**{f"f{i}": 1.0 + 0.01 * i for i in range(9)}, "f9": 5.0})
    assert max(flat.values()) < 1.1 < 1.4 < standout["f9"]  # far out of its list: above 1, not capped
    assert min(standout.values()) > 0 and min(_standard({"a": 0.0, **{f"f{i}": 10.0 for i in range(30)}}).values()) == 0
    mean_only = _standard({"a": 1.0, "b": 2.0, "c": 3.0})
    assert mean_only["b"] == pytest.approx(0.5) and mean_only["c"] == pytest.approx(0.5 + 1.5 ** 0.5 / Z_SPAN)


def test_an_exact_hit_outranks_a_candidate_standing_far_out_of_both_lists():
    """Standard scores (the benchmark's reference fusion) are not capped: the exact evidence is counted in units
    of the best fused score, so the single document holding the query's identifier still ranks first."""
    from gsd_research.researcher.ranking import Evidence, rank

    standout = _frag("s", "standout.md", distance=1 - 0.95, bm25=40.0)
    planted = _frag("p", "planted.md", bm25=0.5)
    ev = Evidence("r", vector=[standout, *_vector("v", [0.31 + 0.001 * i for i in range(40)])],
                  lexical=[standout, *[_frag(f"l{i}", f"l{i}.md", bm25=1.0) for i in range(40)], planted],
                  exact={"QZ_STALL_1": [planted]}, term_documents={"QZ_STALL_1": 1})

    ranked = rank([ev], 5, 5, fusion="standard")

    assert [d.document_path for d in ranked.documents[:2]] == ["planted.md", "standout.md"]
    assert ranked.documents[1].score > 2.0  # the standout's fused score alone is above 1, the old exact weight
    assert ranked.fragments[0].fragment_id == "p"


def test_many_repositories_are_normalized_together():
    from gsd_research.researcher.ranking import Evidence, rank

    on_topic = Evidence("docs", vector=_vector("d", [0.71, 0.66, 0.62, 0.6, 0.58, 0.55]),
                        lexical=[_frag("d0", "d0.md", bm25=9.0), _frag("d3", "d3.md", bm25=7.5)])
    cooking = Evidence("cooking", vector=_vector("c", [0.21, 0.18, 0.12]), lexical=[_frag("c1", "c1.md", bm25=1.1)])
    same_path = Evidence("other", vector=[_frag("d0", "d0.md", distance=1 - 0.3)])

    ranked = rank([cooking, on_topic, same_path], n_fragments=20, n_documents=20)

    repos = [d.repository for d in ranked.documents]
    assert repos[:6] == ["docs"] * 6  # alone, each repository's best would have scored like the others' best
    assert repos.index("cooking") > 5
    assert {(d.repository, d.document_path) for d in ranked.documents} >= {("docs", "d0.md"), ("other", "d0.md")}
    assert ranked.total_documents == len(ranked.documents) == 10
    cooking_best = max(d.score for d in ranked.documents if d.repository == "cooking")
    assert cooking_best < 0.3 < ranked.documents[0].score


def test_exact_terms_are_rare_over_all_repositories():
    from gsd_research.researcher.ranking import RARE_TERM_MAX_DOCUMENTS, Evidence, rank

    hits = [_frag(f"h{i}", f"h{i}.md", bm25=2.0) for i in range(RARE_TERM_MAX_DOCUMENTS + 1)]
    split = [Evidence("a", vector=_vector("v", [0.9, 0.8]), lexical=hits[:2], exact={"X_1": hits[:2]},
                      term_documents={"X_1": 2}),
             Evidence("b", lexical=hits[2:], exact={"X_1": hits[2:]}, term_documents={"X_1": 2})]

    ranked = rank(split, 10, 10)

    scores = {d.document_path: d.score for d in ranked.documents}  # 4 documents hold it: BM25 evidence, no boost
    assert scores["v0.md"] == pytest.approx(0.5) and max(scores.values()) <= 0.5 + 1e-9
    alone = rank([split[0]], 10, 10)  # searched alone, repository a has 2 documents holding it: rare, boosted
    assert alone.documents[0].document_path == "h0.md" and alone.documents[0].score == pytest.approx(1.5)


@pytest.mark.parametrize("query, terms", [
    ("QZVX_STALL_8812", ["QZVX_STALL_8812"]),
    ("what does QZVX_STALL_8812 mean?", ["QZVX_STALL_8812", "what does QZVX_STALL_8812 mean?", "mean"]),
    ("error E-4417 in fastapi.Depends", ["E-4417", "fastapi.Depends", "error E-4417 in fastapi.Depends", "fastapi",
                                         "Depends", "error", "4417"]),
    ('the "connection pool drained" message', ["connection pool drained", 'the "connection pool drained" message',
                                               "connection", "drained", "message", "pool"]),
    ("how do I add CORS middleware", ["CORS", "how do I add CORS middleware", "middleware", "add"]),
    ("useState or /items/{id}", ["useState", "items/{id}", "useState or /items/{id}", "items"]),
    ("e.g. the end.", ["e.g", "e.g. the end.", "end"]),
    ("what does --dry-run do", ["--dry-run", "what does --dry-run do", "dry", "run"]),
    ("cookies", ["cookies"]),
    ("well-known dog", ["known", "well", "dog"]),
    ("a of to", []),
    ("", []),
])
def test_exact_terms_of_a_query(query, terms):
    from gsd_research.researcher.ranking import exact_terms

    assert exact_terms(query) == terms


def test_identifiers_and_phrases_are_rare_up_to_three_documents_plain_words_only_alone():
    from gsd_research.researcher.ranking import (
        RARE_TERM_MAX_DOCUMENTS,
        RARE_WORD_MAX_DOCUMENTS,
        is_marked,
        rare_limit,
    )

    assert RARE_WORD_MAX_DOCUMENTS < RARE_TERM_MAX_DOCUMENTS
    assert [is_marked(t) for t in ("ERR_X_1", "fetchIndex", "pool drained", "--dry-run", "drained", "sibyon")] == \
        [True, True, True, True, False, False]
    assert rare_limit("sibyon") == RARE_WORD_MAX_DOCUMENTS and rare_limit("ERR_X_1") == RARE_TERM_MAX_DOCUMENTS


def test_a_plain_word_one_document_alone_holds_counts_less_than_an_identifier():
    from gsd_research.researcher.ranking import EXACT_WEIGHT, RARE_WORD_WEIGHT, Evidence, rank

    planted, wordy = _frag("p", "planted.md", bm25=2.0), _frag("w", "word.md", bm25=2.5)
    ev = Evidence("r", vector=_vector("v", [0.7, 0.6, 0.5]), lexical=[wordy, planted],
                  exact={"QZ_1": [planted], "sibyon": [wordy], "common": [wordy]},
                  term_documents={"QZ_1": 1, "sibyon": 1, "common": 2})

    ranked = rank([ev], 5, 5)
    scores = {d.document_path: d.score for d in ranked.documents}

    assert [d.document_path for d in ranked.documents[:2]] == ["planted.md", "word.md"]
    assert scores["planted.md"] == pytest.approx(0.5 * 2.0 / 2.5 + EXACT_WEIGHT)
    assert scores["word.md"] == pytest.approx(0.5 + RARE_WORD_WEIGHT)  # "common": two documents, not rare
    assert RARE_WORD_WEIGHT < EXACT_WEIGHT


def _unrelated_case():
    from gsd_research.researcher.ranking import Evidence

    docs = Evidence("docs", vector=_vector("d", [0.62, 0.6, 0.55, 0.5, 0.45, 0.4]),
                    lexical=[_frag("d0", "d0.md", bm25=4.0)], term_documents={"Humans": 0, "QZ_9": 1},
                    exact={"QZ_9": [_frag("d5", "d5.md", bm25=1.0)]})
    word, planted = _frag("n0", "n0.md", bm25=9.0), _frag("n1", "n1.md", bm25=3.0)
    news = Evidence("news", vector=[_frag("n0", "n0.md", distance=1 - 0.4), _frag("n1", "n1.md", distance=1 - 0.3)],
                    lexical=[word, planted], exact={"Humans": [word], "QZ_9": [planted]},
                    term_documents={"Humans": 1, "QZ_9": 1})
    return docs, news


class _Service:
    """A repository's search service answering with fixed evidence."""

    class embedding:  # noqa: N801 - stands in for the embedding gateway
        signature = "m"

        @staticmethod
        def embed_queries(queries):
            return [[0.0] for _ in queries]

    def __init__(self, evidence):
        self.evidence = evidence

    def evidence_many(self, queries, depth, mode, vectors):
        return [self.evidence for _ in queries]


def test_an_unrelated_repository_enters_only_with_the_query_s_rare_identifiers():
    from gsd_research.researcher.services.search_service import search_repositories

    docs, news = _unrelated_case()

    ranked = search_repositories([_Service(docs), _Service(news)], ["Python HTTP for Humans QZ_9"], 10, 10)[0]

    found = [(d.repository, d.document_path) for d in ranked.documents]
    assert ("news", "n0.md") not in found  # best BM25 of all and the only holder of a plain word: not admitted
    assert ("news", "n1.md") in found and ("docs", "d5.md") in found  # both hold the rare identifier
    assert set(found[:2]) == {("docs", "d5.md"), ("news", "n1.md")}  # the identifier outweighs the rest
    assert {f.repository for f in ranked.fragments if f.fragment_id == "n0"} == set()
    assert ranked.total_documents == 7


def test_repositories_close_by_meaning_and_a_single_repository_are_left_whole():
    from gsd_research.researcher.ranking import REPOSITORY_GATE, Evidence, admit

    docs, news = _unrelated_case()
    close = Evidence("close", vector=[_frag("c0", "c0.md", distance=1 - 0.62 * REPOSITORY_GATE)],
                     lexical=[_frag("c1", "c1.md", bm25=2.0)])

    kept = admit([docs, close, news])

    assert kept[0] is docs and kept[1] is close
    assert [r.fragment_id for r in kept[2].vector] == ["n1"] and [r.fragment_id for r in kept[2].lexical] == ["n1"]
    assert set(kept[2].exact) == {"QZ_9"} and kept[2].term_documents == news.term_documents
    assert admit([news]) == [news] and admit([]) == []
    no_vectors = [Evidence("a", lexical=[_frag("a", "a.md", bm25=1.0)]), Evidence("b", lexical=[_frag("b", "b.md")])]
    assert admit(no_vectors) == no_vectors  # lexical mode: no similarity to compare, nothing is cut


# -- answers within a budget -----------------------------------------------------------------------

def _ranking(n_docs: int = 6, n_frags: int = 12, words: int = 120):
    from gsd_research.researcher.models import DocumentSearchResult, SearchResult
    from gsd_research.researcher.ranking import Ranking

    def frag(i: int) -> SearchResult:
        text = " ".join(f"passage{i} word{k}" for k in range(words))
        return SearchResult(fragment_id=f"f{i}", text=text, document_path=f"d{i % n_docs}.md", fragment_index=i,
                            repository="r", score=1 - i / 100, match="both", breadcrumb="Guide > Setup")

    frags = [frag(i) for i in range(n_frags)]
    docs = [DocumentSearchResult(document_path=f"d{i}.md", repository="r", score=1 - i / 50,
                                 top_fragments=[f for f in frags if f.document_path == f"d{i}.md"][:3])
            for i in range(n_docs)]
    return Ranking(docs, frags, n_docs, n_frags)


@pytest.mark.parametrize("budget", [150, 400, 1000, 3000, 20000])
def test_answers_fit_the_budget_by_cl100k(cl100k, budget):
    from gsd_research.researcher.answer import answer

    out = answer(_ranking(), {"query": "q", "metadata": {}}, {"r": "/repo"}, budget)
    printed = json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n"

    assert len(cl100k.encode(printed, disallowed_special=())) <= budget
    assert out["metadata"]["tokens_used"] <= budget
    assert out["metadata"]["truncated"] is (budget < 20000)
    assert out["metadata"]["returned"] == {"documents": len(out["documents"]), "fragments": len(out["fragments"])}
    assert out["metadata"]["total_available"] == {"documents": 6, "fragments": 12}
    assert out["documents"] and out["documents"][0]["top_fragments"]


def test_a_passage_is_printed_once():
    from gsd_research.researcher.answer import answer

    out = answer(_ranking(), {"query": "q", "metadata": {}}, {"r": "/repo"}, 20000)

    texts = [f["text"] for f in out["fragments"] if "text" in f] + [t["text"] for d in out["documents"]
                                                                     for t in d["top_fragments"]]
    assert len(texts) == len(set(texts)) == 12
    assert all("text" in t for d in out["documents"] for t in d["top_fragments"])
    first = out["fragments"][0]
    assert first["see"] == "documents[0].top_fragments[0]" and "text" not in first
    assert out["documents"][0]["top_fragments"][0]["text"].startswith("passage0 word0")
    assert out["documents"][0]["top_fragments"][0]["breadcrumb"] == "Guide > Setup"
    assert out["documents"][0]["absolute_path"] == "/repo/d0.md"


def test_documents_alone_carry_their_passages_and_a_tiny_budget_is_refused():
    from gsd_research.core.errors import UsageError
    from gsd_research.researcher.answer import answer

    ranking = _ranking()
    ranking.fragments = []
    out = answer(ranking, {"query": "q", "metadata": {}}, {"r": "/repo"}, 1500)
    assert all("text" in t for d in out["documents"] for t in d["top_fragments"])
    assert out["fragments"] == []
    with pytest.raises(UsageError, match="--max-tokens 30 is too small"):
        answer(ranking, {"query": "q " * 40, "metadata": {}}, {"r": "/repo"}, 30)


HASH = "9f3c2a7be41d08e2c1aa5b6f7e8d9c0b1a2f3e4d"


@pytest.mark.parametrize("term, expression", [
    ("9f3c2a7be41d", '"9f3c2a7be41d"*'), ("7.13.0-rc.4", '"13 0 rc 4"'),
    *[(ordinary, None) for ordinary in ("9f3c2a7", "deadbeefcafe", "12345678", "configure_frobnicator", "1.2",
                                        "sparse", "7-day-old", "7.13.0 is out", "3 of 4 patients")]])
def test_only_a_distinctive_identifier_is_looked_up_inside_longer_tokens(term, expression):
    from gsd_research.researcher.gateways.lexical_gateway import partial_expression

    assert partial_expression(term) == expression


@pytest.mark.parametrize("text, term, held", [
    (f"commit {HASH} landed", "9f3c2a7be41d", True), ("commit x9f3c2a7be41d landed", "9f3c2a7be41d", False),
    ("release v7.13.0-rc.40", "7.13.0-rc.4", False), ("release v17.13.0 is out", "7.13.0", False),
    ("release 17.13.0 is out", "7.13.0", False), ("tagged v2.5.1-rc.3 today", "1-rc.3", False),
    ("tagged v2.5.1-rc.3 today", "5.1-rc.3", False), ("release xv7.13.0-rc.4", "7.13.0-rc.4", False),
    *[(text, "7.13.0-rc.4", True) for text in ("release v7.13.0-rc.4+build.9981", "release V7.13.0-rc.4",
                                                "7.13.0-rc.4 first", "(7.13.0-rc.4)", "release-7.13.0-rc.4",
                                                "pkg@7.13.0-rc.4")]])
def test_an_identifier_is_held_from_the_start_of_a_token_to_its_end(text, term, held):
    from gsd_research.researcher.gateways.lexical_gateway import holds

    assert holds(text, term) is held


def test_a_short_hash_and_a_bare_version_find_their_document(tmp_path, home):
    from tests.researcher_fixtures import kb, make_repo, seed_model

    seed_model()
    filler = ("The release notes describe the changes of each version of the toolkit, the fixes and the known "
              "issues, and which commit introduced them.")
    docs = {f"notes/r{i}.md": f"# Release {i}\n\n{filler} Version 7.{i}.0 shipped with commit {i:02d}{HASH[2:]}.\n"
            for i in range(8)}
    docs["notes/hash.md"] = f"# Incident\n\n{filler} The regression came from commit {HASH} in the parser.\n"
    docs["notes/version.md"] = f"# Candidate\n\n{filler} Build v7.13.0-rc.4+build.9981 is the candidate.\n"
    docs["notes/near.md"] = f"# Near\n\n{filler} Build v7.13.0-rc.40 is a later candidate.\n"
    kb("repo", "add", "r", str(make_repo(tmp_path / "repo", docs)), "--json")
    kb("index", "r", "--json")

    for query, expected in (("9f3c2a7be41d", "notes/hash.md"), ("7.13.0-rc.4", "notes/version.md"),
                            ("which change does commit 9f3c2a7be41d make", "notes/hash.md"),
                            ("what is in 7.13.0-rc.4", "notes/version.md")):
        out = kb("search", query, "--json", "--documents", "3").json
        assert out["documents"][0]["document_path"] == expected, (query, [d["document_path"] for d in out["documents"]])
        assert out["fragments"][0]["match"] in ("lexical", "both")


def test_a_keyword_candidate_the_nearest_neighbours_missed_is_ranked_by_its_similarity(tmp_path, home,
                                                                                        monkeypatch):
    """Chroma's graph, rebuilt per process, can leave a fragment unreachable (among many identical ones): a
    repository whose on-topic fragments it missed must still be judged, and ranked, by their similarity."""
    from gsd_research.researcher.gateways.chroma_gateway import ChromaGateway, collection_name
    from tests.researcher_fixtures import MATRIX_DOCS, MATRIX_OTHER, indexed_copies, kb

    indexed_copies(tmp_path, home, {"r": (MATRIX_DOCS, "repo"), "o": (MATRIX_OTHER, "other")})
    query_many = ChromaGateway.query_many

    def graph_missing_o(self, embeddings, *args, **kwargs):  # every on-topic fragment of `o` out of reach
        found = query_many(self, embeddings, *args, **kwargs)
        return [[] for _ in found] if self.collection_name == collection_name("o") else found
    monkeypatch.setattr(ChromaGateway, "query_many", graph_missing_o)

    top = kb("search", "sourdough bread and rye flour after a restart", "--documents", "3", "--json").json["documents"][0]

    assert top["repository"] == "o", top
    assert top["best_distance"] is not None and top["best_distance"] < 0.5, top


def test_stored_vectors_a_writer_keeps_from_the_search_leave_the_answer_as_the_neighbours_gave_it(tmp_path, home,
                                                                                                   monkeypatch):
    """Another process writing the store can fail the read of stored vectors ("Error finding id"): their
    similarities only enrich the neighbours, so the answer stands as the graph gave it, never as damage."""
    from gsd_research.researcher.gateways.chroma_gateway import ChromaGateway, collection_name
    from gsd_research.researcher.state import StoreUnreadable
    from tests.researcher_fixtures import MATRIX_DOCS, MATRIX_OTHER, indexed_copies, kb

    indexed_copies(tmp_path, home, {"r": (MATRIX_DOCS, "repo"), "o": (MATRIX_OTHER, "other")})
    query_many = ChromaGateway.query_many

    def graph_missing_o(self, embeddings, *args, **kwargs):  # `o`'s keyword candidates need their stored vectors
        found = query_many(self, embeddings, *args, **kwargs)
        return [[] for _ in found] if self.collection_name == collection_name("o") else found

    def written_meanwhile(self, ids):
        raise StoreUnreadable(self.persist_directory, "cannot be read (InternalError: Error finding id)")
    monkeypatch.setattr(ChromaGateway, "query_many", graph_missing_o)
    query = ["search", "sourdough bread and rye flour after a restart", "--documents", "3", "--json"]
    monkeypatch.setattr(ChromaGateway, "vectors_of", lambda self, ids: {})
    unenriched = kb(*query).json["documents"]
    monkeypatch.setattr(ChromaGateway, "vectors_of", written_meanwhile)

    out = kb(*query)

    assert out.code == 0, out.stdout
    assert out.json["documents"] == unenriched
