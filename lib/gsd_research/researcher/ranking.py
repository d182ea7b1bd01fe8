"""Ranking: the evidence of every searched repository fused into one ranked list of documents and of fragments.

The one place where ranking is decided; its constants are named below. For one query each repository gives its
nearest fragments by cosine similarity (vector), its BM25 matches (lexical, SQLite FTS5) and, for each of the
query's exact terms (identifier-like tokens such as `ERR_X_42`, `fastapi.Depends`, `4417`; quoted strings; the
whole query when long enough to be a pasted message; its plain words), the fragments holding it as a phrase
and how many documents hold it.

All candidates of all repositories are normalized together, never per repository, so an unrelated
repository's best hit scores by its own evidence: similarity min-max normalized, BM25 divided by the best
(anchored at zero: a lone lexical match keeps its full score), exact evidence as the share of the query's rare
terms held. A term is rare when 1..RARE_TERM_MAX_DOCUMENTS documents of all repositories hold it; a plain word
only when one does (with 3, merely uncommon words cost 0.01 nDCG@10 on SciFact; with 1, none, and a made-up
name typed in a question still finds its document). EXACT_WEIGHT equals the other two weights together: the
document that alone holds the query's rare identifiers ranks first, vector and BM25 decide among equals. Exact
evidence counts in units of the best fused score, at least 1 (1 under these normalizations; the rule holds
under `standard` too).

`admit` closes the door to unrelated repositories: one whose best similarity is below REPOSITORY_GATE times
the best repository's keeps only the fragments holding the query's rare identifiers or phrases (its BM25 and
plain words, computed with its own term statistics, are not comparable evidence).

`fusion="rrf"` and `fusion="standard"` are references for bench/kb_retrieval.py, not shipped: standard scores
gained on the tuning half A of SciFact train (0.7592 vs 0.7507 nDCG@10) but lost on the held-out half B
(0.7222 vs 0.7294); see BENCHMARKS.md, "Ranking tuned on half A".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from gsd_research.researcher.models import DocumentSearchResult, SearchResult

VECTOR_WEIGHT = 0.5
LEXICAL_WEIGHT = 0.5
EXACT_WEIGHT = 1.0
RARE_TERM_MAX_DOCUMENTS = 3  # an exact term held by more documents than this is ordinary BM25 evidence
RARE_WORD_MAX_DOCUMENTS = 1  # the same for a plain word (not identifier-like, not a phrase)
RARE_WORD_WEIGHT = 0.5  # a plain word one document alone holds: strong evidence, but below an identifier
EXACT_HITS = 50  # fragments fetched per rare exact term
MAX_EXACT_TERMS = 16  # exact terms looked up per query (plain words last, longest first)
MIN_WORD_CHARS = 3
VERBATIM_MIN_WORDS = 4  # a query of at least this many words is also looked up as one phrase (a pasted message)
MIN_CANDIDATES = 50  # candidates per list and repository, at least
TOP_FRAGMENTS_PER_DOCUMENT = 3
RRF_K = 60
REPOSITORY_GATE = 0.75  # a repository whose best similarity is below this share of the best one's is unrelated
Z_SPAN = 3.0  # standard deviations above a list's mean that score 1 (the mean scores 0.5)
MODES = ("hybrid", "vector", "lexical")

_QUOTED = re.compile(r'"([^"]{2,200})"|`([^`]{2,200})`|\u201c([^\u201d]{2,200})\u201d')
_TOKEN = re.compile(r"[^\s\"'`,;()\[\]<>!?]+")
_WORD = re.compile(r"\w+")


def candidate_depth(n_fragments: int, n_documents: int) -> int:
    """How many candidates each list of each repository contributes."""
    return max(MIN_CANDIDATES, 5 * n_fragments, 10 * n_documents)


def identifier_like(token: str) -> bool:
    """A token written like a name or a code rather than a word: snake_case, camelCase, CONSTANTS, dotted
    names and paths, letter-digit codes, numbers of three digits or more, hyphenated codes with capitals
    or digits, command-line options (--dry-run)."""
    if re.fullmatch(r"--?[A-Za-z][\w-]+", token.rstrip(".:")):
        return True
    token = token.strip(".:-/")
    if len(token) < 3 or not _WORD.search(token):
        return False
    return bool("_" in token
                or re.search(r"\d", token) and (re.search(r"[A-Za-z]", token) or re.fullmatch(r"\d{3,}", token))
                or re.search(r"[a-z][A-Z]", token)
                or re.fullmatch(r"[A-Z][A-Z0-9]{2,}", token)
                or re.search(r"\S[./]\S", token)
                or re.search(r"\w-\w", token) and re.search(r"[A-Z0-9]", token))


def is_marked(term: str) -> bool:
    """An identifier-like token or a phrase (quoted string, whole query), as opposed to a plain word."""
    return identifier_like(term) or len(_WORD.findall(term)) > 1


def rare_limit(term: str) -> int:
    """How many documents may hold `term` for it to count as rare: fewer for a plain word."""
    return RARE_TERM_MAX_DOCUMENTS if is_marked(term) else RARE_WORD_MAX_DOCUMENTS


def exact_terms(query: str) -> list[str]:
    """The query's exact terms, most specific first: quoted strings, identifier-like tokens, the query itself,
    then its plain words (longest first; stop words and words under MIN_WORD_CHARS left out)."""
    from gsd_research.researcher.gateways.lexical_gateway import STOPWORDS

    terms: list[str] = []
    for match in _QUOTED.finditer(query):
        terms.append(next(g for g in match.groups() if g))
    terms += [t.rstrip(".:/") if t.startswith("-") else t.strip(".:-/") for t in _TOKEN.findall(query)
              if identifier_like(t)]
    if len(_WORD.findall(query)) >= VERBATIM_MIN_WORDS:
        terms.append(query)
    words = [w for w in _WORD.findall(query) if len(w) >= MIN_WORD_CHARS and w.lower() not in STOPWORDS]
    terms += sorted(words, key=len, reverse=True)
    seen: dict[str, str] = {}
    for term in terms:
        key = " ".join(_WORD.findall(term.lower()))
        if key and key not in seen:
            seen[key] = term
    return list(seen.values())[:MAX_EXACT_TERMS]


@dataclass
class Evidence:
    """One repository's candidates for one query."""

    repository: str
    vector: list[SearchResult] = field(default_factory=list)
    lexical: list[SearchResult] = field(default_factory=list)
    exact: dict[str, list[SearchResult]] = field(default_factory=dict)  # rare-candidate term -> its fragments
    term_documents: dict[str, int] = field(default_factory=dict)  # exact term -> documents holding it here


def _rare(evidence: list[Evidence]) -> set[str]:
    """The exact terms rare over all repositories: 1..rare_limit documents hold them."""
    totals: dict[str, int] = {}
    for ev in evidence:
        for term, n in ev.term_documents.items():
            totals[term] = totals.get(term, 0) + n
    return {t for t, n in totals.items() if 0 < n <= rare_limit(t)}


def admit(evidence: list[Evidence]) -> list[Evidence]:
    """The evidence of repositories far below the best one by meaning (REPOSITORY_GATE) cut down to the
    fragments holding the query's rare identifiers and phrases; rarity still counts every repository."""
    best = {id(ev): max((1.0 - (r.distance or 0.0) for r in ev.vector), default=0.0) for ev in evidence}
    top = max(best.values(), default=0.0)
    if len(evidence) < 2 or top <= 0:
        return evidence
    rare = _rare(evidence)
    out = []
    for ev in evidence:
        if best[id(ev)] >= REPOSITORY_GATE * top:
            out.append(ev)
            continue
        exact = {t: hits for t, hits in ev.exact.items() if is_marked(t) and t in rare}
        held = {r.fragment_id for hits in exact.values() for r in hits}
        out.append(Evidence(ev.repository, vector=[r for r in ev.vector if r.fragment_id in held],
                            lexical=[r for r in ev.lexical if r.fragment_id in held], exact=exact,
                            term_documents=ev.term_documents))
    return out


@dataclass
class Ranking:
    documents: list[DocumentSearchResult]
    fragments: list[SearchResult]
    total_documents: int = 0
    total_fragments: int = 0


Key = tuple[str, str]  # (repository, fragment id): the same path can exist in two repositories


class _Pool:
    """Every candidate fragment of every repository with its raw evidence."""

    def __init__(self, evidence: list[Evidence], mode: str) -> None:
        self.fragments: dict[Key, SearchResult] = {}
        self.similarity: dict[Key, float] = {}
        self.bm25: dict[Key, float] = {}
        self.terms: dict[Key, set[str]] = {}
        self.rare = _rare(evidence)
        for ev in evidence:
            for r in ev.vector if mode != "lexical" else []:
                self.similarity[self._add(ev.repository, r, "vector")] = 1.0 - (r.distance or 0.0)
            for r in ev.lexical if mode != "vector" else []:
                self.bm25[self._add(ev.repository, r, "lexical")] = max(0.0, r.score)
            for term, hits in ev.exact.items() if mode == "hybrid" else []:
                for r in hits if term in self.rare else []:
                    self.terms.setdefault(self._add(ev.repository, r, "lexical"), set()).add(term)

    def _add(self, repository: str, r: SearchResult, kind: str) -> Key:
        key = (repository, r.fragment_id)
        known = self.fragments.get(key)
        if known is None:
            self.fragments[key] = r.model_copy(update={"repository": repository, "match": kind})
            return key
        if kind == "vector":
            known.distance = r.distance
        if known.match != kind:
            known.match = "both"
        if not known.breadcrumb and r.breadcrumb:
            known.breadcrumb = r.breadcrumb
        return key


def _minmax(values: dict[Key, float]) -> dict[Key, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    if hi - lo < 1e-12:
        return {k: 1.0 for k in values}
    return {k: (v - lo) / (hi - lo) for k, v in values.items()}


def _standard(values: dict[Key, float]) -> dict[Key, float]:
    """Standard scores: 0.5 at the mean, +1 per Z_SPAN standard deviations, clipped at 0, not capped above."""
    if not values:
        return {}
    mean = sum(values.values()) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values.values()) / len(values))
    if sd < 1e-12:  # one candidate, or all alike: each keeps the full score
        return {k: 1.0 for k in values}
    return {k: max(0.0, 0.5 + (v - mean) / (sd * Z_SPAN)) for k, v in values.items()}


def _by_max(values: dict[Key, float]) -> dict[Key, float]:
    hi = max(values.values(), default=0.0)
    return {k: (v / hi if hi > 0 else 0.0) for k, v in values.items()}


def _rrf(values: dict[Key, float]) -> dict[Key, float]:
    order = sorted(values, key=lambda k: -values[k])
    return {k: 1.0 / (RRF_K + rank) for rank, k in enumerate(order, start=1)}


def _signals(pool: _Pool, fusion: str) -> tuple[dict[Key, float], dict[Key, float]]:
    vector, lexical = {"rrf": (_rrf, _rrf), "standard": (_standard, _standard)}.get(fusion,
                                                                                     (_minmax, _by_max))
    return vector(pool.similarity), lexical(pool.bm25)


def rank(evidence: list[Evidence], n_fragments: int, n_documents: int, mode: str = "hybrid",
         fusion: str = "score") -> Ranking:
    """Documents and fragments ranked best first over all repositories' evidence."""
    pool = _Pool(evidence, mode)
    vector, lexical = _signals(pool, fusion)
    marked = {t for t in pool.rare if is_marked(t)}
    words = pool.rare - marked
    wv, wl, we, ww = {"vector": (1.0, 0.0, 0.0, 0.0), "lexical": (0.0, 1.0, 0.0, 0.0)}.get(
        mode, (VECTOR_WEIGHT, LEXICAL_WEIGHT, EXACT_WEIGHT, RARE_WORD_WEIGHT))

    def exact(terms: set[str], unit: float) -> float:
        """The exact-term evidence: shares of the rare marked terms and of the rare plain words held, in units of
        the best fused score (so that it outweighs any candidate's vector and BM25 evidence together)."""
        share = we * len(terms & marked) / len(marked) if marked else 0.0
        return unit * (share + (ww * len(terms & words) / len(words) if words else 0.0))

    frag_fused: dict[Key, float] = {}
    doc_parts: dict[tuple[str, str], list] = {}  # (repository, path) -> [best vector, best lexical, terms]
    for key, frag in pool.fragments.items():
        v, lx = vector.get(key, 0.0), lexical.get(key, 0.0)
        frag_fused[key] = wv * v + wl * lx
        parts = doc_parts.setdefault((frag.repository, frag.document_path), [0.0, 0.0, set()])
        parts[0], parts[1] = max(parts[0], v), max(parts[1], lx)
        parts[2] |= pool.terms.get(key, set())
    doc_fused = {doc: wv * v + wl * lx for doc, (v, lx, _) in doc_parts.items()}
    unit = max([1.0, *doc_fused.values()])  # a document's fused score is at least its fragments'
    frag_score = {k: f + exact(pool.terms.get(k, set()), unit) for k, f in frag_fused.items()}
    doc_score = {doc: f + exact(doc_parts[doc][2], unit) for doc, f in doc_fused.items()}
    ordered = sorted(pool.fragments, key=lambda k: (-frag_score[k], k))
    fragments = [pool.fragments[k].model_copy(update={"score": round(frag_score[k], 6)}) for k in ordered]
    per_doc: dict[tuple[str, str], list[SearchResult]] = {}
    for f in fragments:
        per_doc.setdefault((f.repository, f.document_path), []).append(f)
    documents = []
    for doc in sorted(doc_score, key=lambda d: (-doc_score[d], d))[:n_documents]:
        tops = per_doc[doc][:TOP_FRAGMENTS_PER_DOCUMENT]
        distances = [f.distance for f in per_doc[doc] if f.distance is not None]
        documents.append(DocumentSearchResult(document_path=doc[1], repository=doc[0], top_fragments=tops,
                                              score=round(doc_score[doc], 6),
                                              best_distance=min(distances) if distances else None))
    return Ranking(documents, fragments[:n_fragments], len(doc_score), len(fragments))
