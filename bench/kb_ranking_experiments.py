"""Ranking experiments for kb_retrieval.py: deep candidates gathered once per query, then many rankings over them.

Every variant ranks the same candidates: the vector list, BM25 lists (plain, title-weighted, pseudo-relevance
feedback, whole documents) and the product's exact-term evidence, cut at a candidate depth. The scorer reproduces the
product's ranking (`ranking.rank`) with its default parameters, and generalizes it: fusion weights, how each
list is normalized, how a document's fragments are aggregated, which BM25 list, how deep.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace

DEEP = 200  # candidates gathered per list; variants cut them at their own depth
TITLE_WEIGHTS = (2.0, 3.0)  # the breadcrumb (title) column's BM25 weight, besides 1.0 (the plain list)
PRF_DOCS, PRF_TERMS = 10, 10  # pseudo-relevance feedback: top BM25 fragments read, expansion terms kept
_WORD = re.compile(r"[a-z][a-z0-9\-]{2,}")


@dataclass
class Candidates:
    """One query's candidates: (fragment id, document path, raw score) lists, best first, and exact evidence."""

    vector: list[tuple[str, str, float]]
    lexical: dict[str, list[tuple[str, str, float]]]  # source -> list
    exact: dict[str, list[tuple[str, str]]]  # rare-candidate term -> fragments holding it
    term_documents: dict[str, int]


@dataclass(frozen=True)
class Params:
    wv: float = 0.5
    wl: float = 0.5
    depth: int = 100
    vnorm: str = "minmax"  # minmax | max | z | rrf
    lnorm: str = "max"  # max | minmax | z | rrf
    lexical: str = "plain"  # plain | title2 | title3 | prf | document (BM25 over whole documents)
    prf_weight: float = 0.0  # prf: BM25 = original / best + prf_weight * expansion / best
    agg: str = "max"  # max | sum2 (best + second * decay, per signal)
    decay: float = 0.0
    exact: bool = True
    zscale: float = 3.0  # z normalization: a standard score of zscale maps to 1 above the mean's 0.5
    exact_floor: bool = False  # the exact evidence weighs at least the best fused score of any candidate
    exact_floor_words: bool = True  # ... the rare plain words' too


def _bm25_rows(conn, expr: str, weights: tuple[float, float], n: int) -> list[tuple[str, str, float, str]]:
    rows = conn.execute(
        f"SELECT fragment_id, document_path, bm25(fragments, {weights[0]}, {weights[1]}) AS s, text "
        "FROM fragments WHERE fragments MATCH ? ORDER BY s LIMIT ?", (expr, n)).fetchall()
    return [(r[0], r[1], max(0.0, -float(r[2])), r[3]) for r in rows]


def _document_index(conn):
    """BM25 over whole documents instead of fragments: an in-memory FTS5 table of each document's fragments joined
    (fragments are slices of the document), tokenized like the product's."""
    import sqlite3

    from gsd_research.researcher.gateways.lexical_gateway import SCHEMA

    memory = sqlite3.connect(":memory:")
    memory.executescript(SCHEMA)
    rows = conn.execute("SELECT document_path, group_concat(text, ' ') FROM (SELECT document_path, text FROM fragments "
                        "ORDER BY document_path, CAST(fragment_index AS INTEGER)) GROUP BY document_path").fetchall()
    memory.executemany("INSERT INTO fragments (fragment_id, text, document_path, fragment_index, breadcrumb) "
                       "VALUES (?, ?, ?, 0, '')", [(d, t, d) for d, t in rows])
    return memory


def expansion_terms(query: str, feedback: list[tuple[str, str, float, str]], stopwords) -> list[str]:
    """RM3-style: terms of the top BM25 fragments weighted by frequency x the fragment's normalized score,
    the query's own words left out."""
    own = set(re.findall(r"\w+", query.lower()))
    best = max((s for _, _, s, _ in feedback), default=0.0) or 1.0
    weights: Counter = Counter()
    for _, _, score, text in feedback:
        words = [w for w in _WORD.findall(text.lower()) if w not in stopwords and w not in own]
        for w, c in Counter(words).items():
            weights[w] += (c / max(1, len(words))) * (score / best)
    return [w for w, _ in weights.most_common(PRF_TERMS)]


def gather(service, texts: list[str], embeddings: list[list[float]]) -> list[Candidates]:
    """Every query's deep candidates from the product's gateways (one pass, reused by all variants)."""
    from gsd_research.researcher.gateways.lexical_gateway import STOPWORDS, match_expression

    conn = service.lexical.conn
    documents = _document_index(conn)
    out = []
    for text, ev in zip(texts, service.evidence_many(texts, DEEP, "hybrid", embeddings), strict=True):
        vector = [(r.fragment_id, r.document_path, 1.0 - (r.distance or 0.0)) for r in ev.vector]
        lexical: dict[str, list] = {}
        expr = match_expression(text)
        plain = _bm25_rows(conn, expr, (1.0, 1.0), DEEP) if expr else []
        lexical["plain"] = [row[:3] for row in plain]
        for w in TITLE_WEIGHTS:
            lexical[f"title{w:g}"] = [row[:3] for row in _bm25_rows(conn, expr, (1.0, w), DEEP)] if expr else []
        terms = expansion_terms(text, plain[:PRF_DOCS], STOPWORDS)
        prf_expr = " OR ".join(f'"{t}"' for t in terms)
        lexical["expansion"] = [row[:3] for row in _bm25_rows(conn, prf_expr, (1.0, 1.0), DEEP)] if terms else []
        lexical["document"] = [(f"{d}#document", d, s) for _, d, s, _ in _bm25_rows(documents, expr, (1.0, 1.0), DEEP)
                               ] if expr else []
        exact = {t: [(r.fragment_id, r.document_path) for r in hits] for t, hits in ev.exact.items()}
        out.append(Candidates(vector, lexical, exact, dict(ev.term_documents)))
    return out


def _normalize(values: dict[str, float], how: str, zscale: float = 3.0) -> dict[str, float]:
    if not values:
        return {}
    vals = list(values.values())
    if how == "rrf":
        order = sorted(values, key=lambda k: -values[k])
        return {k: 60.0 / (60 + i) for i, k in enumerate(order, start=1)}
    if how == "max":
        hi = max(vals)
        return {k: (v / hi if hi > 0 else 0.0) for k, v in values.items()}
    if how == "meanmax":  # the mean of the list at 0, its best at 1, below the mean 0
        mean, hi = sum(vals) / len(vals), max(vals)
        return {k: (max(0.0, (v - mean) / (hi - mean)) if hi - mean > 1e-12 else 1.0) for k, v in values.items()}
    if how.startswith("z"):  # z, zcap: standard scores mapped to mean 0.5, 3 sd = 1 (zcap: clipped to [0, 1])
        mean = sum(vals) / len(vals)
        sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals)) or 1.0
        top = 1.0 if how == "zcap" else math.inf
        return {k: min(top, max(0.0, (v - mean) / sd / zscale + 0.5)) for k, v in values.items()}
    lo, hi = min(vals), max(vals)
    return {k: ((v - lo) / (hi - lo) if hi - lo > 1e-12 else 1.0) for k, v in values.items()}


def _lexical(c: Candidates, p: Params) -> tuple[dict[str, float], dict[str, str]]:
    source = "plain" if p.lexical == "prf" else p.lexical
    rows = c.lexical[source][:p.depth]
    docs = {f: d for f, d, _ in rows}
    scores = _normalize({f: s for f, _, s in rows}, p.lnorm, p.zscale)
    if p.lexical == "prf" and p.prf_weight:
        extra = c.lexical["expansion"][:p.depth]
        docs.update({f: d for f, d, _ in extra})
        for f, s in _normalize({f: s for f, _, s in extra}, p.lnorm, p.zscale).items():
            scores[f] = scores.get(f, 0.0) + p.prf_weight * s
    return scores, docs


def _aggregate(values: list[float], p: Params) -> float:
    if not values:
        return 0.0
    if p.agg == "max" or len(values) == 1:
        return max(values)
    top = sorted(values, reverse=True)
    return top[0] + p.decay * top[1]


@dataclass
class _Doc:
    v: list[float] = field(default_factory=list)
    lx: list[float] = field(default_factory=list)
    terms: set = field(default_factory=set)


def rank(c: Candidates, p: Params, n: int = 10) -> list[str]:
    """The top-n document paths for one query's candidates under the parameters `p`."""
    from gsd_research.researcher.ranking import EXACT_WEIGHT, RARE_WORD_WEIGHT, is_marked, rare_limit

    vec = c.vector[:p.depth]
    vector = _normalize({f: s for f, _, s in vec}, p.vnorm, p.zscale)
    lexical, docs = _lexical(c, p)
    docs.update({f: d for f, d, _ in vec})
    terms: dict[str, set] = {}
    rare = {t for t, k in c.term_documents.items() if 0 < k <= rare_limit(t)} if p.exact else set()
    for t, hits in c.exact.items():
        if t in rare:
            for f, d in hits:
                docs[f] = d
                terms.setdefault(f, set()).add(t)
    marked = {t for t in rare if is_marked(t)}
    words = rare - marked
    per_doc: dict[str, _Doc] = {}
    for f, d in docs.items():
        doc = per_doc.setdefault(d, _Doc())
        if f in vector:
            doc.v.append(vector[f])
        if f in lexical:
            doc.lx.append(lexical[f])
        doc.terms |= terms.get(f, set())

    fused = {d: p.wv * _aggregate(doc.v, p) + p.wl * _aggregate(doc.lx, p) for d, doc in per_doc.items()}
    unit = max(1.0, max(fused.values(), default=0.0)) if p.exact_floor else 1.0

    def score(d: str, doc: _Doc) -> float:
        s = fused[d]
        if marked:
            s += unit * EXACT_WEIGHT * len(doc.terms & marked) / len(marked)
        if words:
            s += (unit if p.exact_floor_words else 1.0) * RARE_WORD_WEIGHT * len(doc.terms & words) / len(words)
        return s

    scored = {d: score(d, doc) for d, doc in per_doc.items()}
    return sorted(scored, key=lambda d: (-scored[d], d))[:n]


def grid() -> dict[str, Params]:
    """The variants measured while tuning (on half A), by family; "shipped" is the product's ranking, "z/z floor" the
    fusion="standard" reference (chosen on half A, rejected on half B)."""
    base = Params()
    z = replace(base, vnorm="z", lnorm="z", exact_floor=True)
    out: dict[str, Params] = {"shipped (min-max / max)": base, "z/z floor (= fusion=\"standard\")": z,
                              "z/z without floor": replace(z, exact_floor=False)}
    for wv in (0.3, 0.4, 0.6, 0.7):
        out[f"shipped, weights {wv}/{1 - wv:.1f}"] = replace(base, wv=wv, wl=1 - wv)
    for wv in (0.45, 0.55):
        out[f"z/z floor, weights {wv}/{1 - wv:.2f}"] = replace(z, wv=wv, wl=1 - wv)
    for depth in (50, 150, 200):
        out[f"shipped, depth {depth}"] = replace(base, depth=depth)
        out[f"z/z floor, depth {depth}"] = replace(z, depth=depth)
    for vn, ln in (("max", "max"), ("minmax", "minmax"), ("minmax", "z"), ("z", "minmax"), ("rrf", "max"),
                   ("minmax", "rrf"), ("zcap", "zcap"), ("meanmax", "meanmax")):
        out[f"norm {vn}/{ln}"] = replace(base, vnorm=vn, lnorm=ln)
    for zs in (2.0, 4.0, 6.0):
        out[f"z/z floor, z span {zs:g}"] = replace(z, zscale=zs)
    for src in ("title2", "title3"):
        out[f"shipped, BM25 {src}"] = replace(base, lexical=src)
        out[f"z/z floor, BM25 {src}"] = replace(z, lexical=src)
    for w in (0.1, 0.2, 0.3):
        out[f"shipped, PRF {w}"] = replace(base, lexical="prf", prf_weight=w)
        out[f"z/z floor, PRF {w}"] = replace(z, lexical="prf", prf_weight=w)
    for decay in (0.1, 0.2, 0.5):
        out[f"shipped, doc = best + {decay} x second"] = replace(base, agg="sum2", decay=decay)
        out[f"z/z floor, doc = best + {decay} x second"] = replace(z, agg="sum2", decay=decay)
    out["shipped, BM25 over whole documents"] = replace(base, lexical="document")
    out["z/z floor, BM25 over whole documents"] = replace(z, lexical="document")
    for wv in (0.4, 0.6):
        out[f"shipped, BM25 over whole documents, weights {wv}/{1 - wv:.1f}"] = replace(base, lexical="document", wv=wv,
                                                                                     wl=1 - wv)
    out["shipped, no exact terms"] = replace(base, exact=False)
    out["z/z, no exact terms"] = replace(z, exact=False)
    return out
