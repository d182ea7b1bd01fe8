"""`verify`'s checks: each sourced claim of a research file against the text of its sources.

A source's text comes from the research memory first, else from the HTTP cache or a fetch under `fetch`'s
SSRF rules (read.api), and what was fetched is kept in the memory for the next check. Quotes are located
exactly, then fuzzily, in the source's Markdown and then in the page's whole visible text. Unquoted claims
get the best supporting passage among the source's fragments as the knowledge base ranks them, scored
without a model; a configured model's judgement is added and labelled. `[VERIFIED: npm registry]`-style claims
ask the registry (registries.py); `[ASSUMED]` ones are listed, never fetched. One Deadline bounds reading and
checking: each claim is checked as soon as its sources are settled, and what is left when it passes is unchecked.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from gsd_research.core.errors import GsdError, TimeoutError_
from gsd_research.verify import quotes, support
from gsd_research.verify.claims import MIN_QUOTE_WORDS
from gsd_research.verify.deadline import Deadline

SEVERITY = {"not_found": 0, "package_not_found": 0, "version_not_found": 0, "unreachable": 1, "unchecked": 1,
            "no_source": 2, "unverified": 3, "too_short": 3, "related": 4, "supported": 5, "registry_confirmed": 6,
            "quote_found": 6}
CONTEXT_CHARS = 160  # around a found quote
CLAIM_CHARS = 400
CANDIDATE_FRAGMENTS = 5
DEFAULT_TIMEOUT = 120.0  # seconds for the whole check (verify --timeout)
READING_SHARE = 0.75  # of the time, at most, for reading the sources: the rest is for checking the claims


@dataclass
class SourceText:
    url: str
    origin: str  # memory | cache | fetched | unreachable
    text: str = ""
    path: str | None = None  # the document in the research memory
    error: dict | None = None
    page_text: str | None = None
    flags: list[str] = field(default_factory=list)
    late: bool = False  # its page text could not be read before the deadline
    fetched_at: str | None = None  # when the copy checked against was read (ISO, UTC)


class Verifier:
    """Checks claims; sources are read once per run."""

    def __init__(self, rt, *, use_llm: bool = True, deadline: Deadline | None = None) -> None:
        from gsd_research.memory.api import settings
        from gsd_research.verify.registries import Registries

        self.rt = rt
        self.memory = settings(rt.config)["enabled"]
        self.use_llm = use_llm
        self.deadline = deadline or Deadline(DEFAULT_TIMEOUT)
        self.reading = self.deadline.part(READING_SHARE)
        self.registries = Registries(rt, self.deadline)
        self.sources: dict[str, SourceText] = {}
        self.llm_backend: str | None = None
        self.timings: list[float] = []
        self.readers: list = []  # their HTTP clients' counts of requests sent upstream

    @property
    def upstream_requests(self) -> int:
        """Requests sent to the network (not answered by the HTTP cache) by this check."""
        own = self.rt.http.upstream_requests if self.rt._http is not None else 0
        return own + sum(r.upstream_requests for r in self.readers) + self.registries.upstream_requests

    # -- sources -----------------------------------------------------------------------------------

    def check_all(self, claims) -> list[dict]:
        """Every claim checked, each as soon as its sources are settled while the others are still read, so
        that reading and checking share the deadline. Sources: the memory's copy of the page, else the page
        read (HTTP cache, then the network; a few at once), else, when it cannot be read, the snippet a search
        showed of it; what was not read in time is unreachable. Assumptions and registry claims read none."""
        needs = [set() if c.tag == "ASSUMED" or c.registry else set(c.sources) for c in claims]
        todo = self._from_memory_first(list(dict.fromkeys(u for c, n in zip(claims, needs, strict=True)
                                                           for u in c.sources if u in n)))
        pending = set(todo)
        self.registries.start([(c.registry, c.text) for c in claims if c.registry and c.tag != "ASSUMED"])
        results: dict[int, dict] = {}

        def check_ready() -> None:
            for i, claim in enumerate(claims):
                if i not in results and not needs[i] & pending:
                    results[i] = self.check(claim)

        check_ready()
        for url, outcome in self._read(todo):
            if self.deadline.expired():  # keeping a late page costs time no claim has left
                break
            self._settled(url, self._settle(url, outcome))
            pending.discard(url)
            check_ready()
        for url in pending:
            self._settled(url, SourceText(url, "unreachable", error=self._late()))
        pending.clear()
        check_ready()
        return [results[i] for i in range(len(claims))]

    def _from_memory_first(self, urls: list[str]) -> list[str]:
        """Sources the memory has, settled; the URLs left to read."""
        todo = []
        for url in urls:
            src = self._from_memory(url, snippets=False)
            if src is None:
                todo.append(url)
            else:
                self.sources[url] = src
        return todo

    def _read(self, urls: list[str]):
        from gsd_research.verify.reading import Reader

        reader = Reader(self.rt, self.reading)
        self.readers.append(reader)
        return reader.results(urls)

    def _settled(self, url: str, src: SourceText) -> None:
        """A source's outcome; an unreadable one falls back to what a search showed of it."""
        if src.origin == "unreachable" and not self.deadline.expired():
            snippet = self._from_memory(url, snippets=True)
            if snippet is not None:
                snippet.error, src = src.error, snippet  # why the page itself was not read
        self.sources[url] = src

    def read_urls(self, urls: list[str]) -> None:
        """Sources read on demand (all of a claim's are settled before it is checked: a safety net)."""
        todo = self._from_memory_first(urls)
        for url, outcome in self._read(todo):
            self._settled(url, self._settle(url, outcome))
        for url in todo:
            if url not in self.sources:
                self._settled(url, SourceText(url, "unreachable", error=self._late()))

    def source(self, url: str) -> SourceText:
        if url not in self.sources:
            self.read_urls([url])
        return self.sources[url]

    def _late(self) -> dict:
        seconds = self.deadline.seconds
        return TimeoutError_(f"Not read in time: verify's --timeout of {seconds:g} s was spent",
                             suggestions=[f"gsd-research verify FILE --timeout {max(2 * seconds, 120):g}",
                                          "gsd-research fetch URL first: verify reads what fetch kept"]).to_dict()

    def _from_memory(self, url: str, snippets: bool = True) -> SourceText | None:
        if not self.memory or self.rt.no_cache:  # --no-cache: every source read fresh
            return None
        from gsd_research.memory.api import MemoryStore

        store = MemoryStore()
        try:
            found, origin = store.page(url), "memory"
            if found is None and snippets:  # what a search showed of the page, when the page was never read
                found, origin = store.page(url, kind="search_result"), "memory-snippet"
        except Exception:  # noqa: BLE001 - an unreadable memory means reading the source again
            found = None
        finally:
            store.close()
        if found is None:
            return None
        entry, text = found
        return SourceText(url, origin, text, entry["path"], flags=json.loads(entry["flags"] or "[]"),
                          fetched_at=entry["fetched_at"])

    def _settle(self, url: str, page) -> SourceText:
        """A source read (or its error), kept in the memory for the next check."""
        from gsd_research.memory.api import record_fetch

        if isinstance(page, GsdError):
            if isinstance(page, TimeoutError_) and self.reading.left() < 0.5:
                return SourceText(url, "unreachable", error=self._late())
            return SourceText(url, "unreachable", error={"code": page.code, "message": _shown(page.message, url)})
        status = record_fetch(self.rt, url=url, final_url=page.final_url, title=page.title, markdown=page.markdown,
                              warnings=page.warnings, extraction=page.extraction).finish()
        kinds = sorted({k for w in page.warnings for k in w.get("kinds", [])})
        from gsd_research.memory.api import now_iso

        src = SourceText(url, "cache" if page.from_cache else "fetched", page.markdown, page_text=page.page_text,
                         flags=kinds, fetched_at=page.fetched_at or now_iso())
        if status in ("stored", "known"):
            remembered = self._remembered(page.final_url)
            src.path = remembered.path if remembered else None
            if remembered and status == "stored" and not page.from_cache:
                src.fetched_at = remembered.fetched_at  # the same instant the memory will show next time
        return src

    def _remembered(self, url: str) -> SourceText | None:
        """The memory's entry for a page just kept (also under --no-cache)."""
        fresh, self.rt.no_cache = self.rt.no_cache, False
        try:
            return self._from_memory(url, snippets=False)
        finally:
            self.rt.no_cache = fresh

    def page_text(self, src: SourceText) -> str:
        """The page's whole visible text (read again through the cache when the source came from memory)."""
        if src.page_text is None:
            from gsd_research.read.api import page_text

            try:
                src.page_text = page_text(self.rt, src.url, self.deadline.stop_at)
            except GsdError as exc:
                src.page_text = ""
                src.late = isinstance(exc, TimeoutError_)
        return src.page_text

    # -- claims ------------------------------------------------------------------------------------

    def check(self, claim) -> dict:
        started = time.perf_counter()
        result = self._check(claim)
        self.timings.append(time.perf_counter() - started)
        src = self.sources.get(result.get("source_url") or "")
        if src is not None and src.origin == "memory-snippet" and result["verdict"] == "not_found":
            result = _unread(src)
        if src is not None:  # which copy of the source the verdict rests on
            result.setdefault("origin", src.origin)
            if src.fetched_at and src.origin != "unreachable":
                result.setdefault("fetched_at", src.fetched_at)
        out = {"line": claim.line, "claim": _cut(claim.text, CLAIM_CHARS), "tag": claim.tag, **result}
        if len(claim.sources) > 1:
            out["sources"] = claim.sources
        return out

    def _check(self, claim) -> dict:
        if claim.tag == "ASSUMED":  # the author says it was not verified: counted, never fetched
            return {"verdict": "unverified", "method": "none", "note": "tagged [ASSUMED]: not checked"}
        if self.deadline.expired():
            return {"verdict": "unchecked", "method": "none", "note": "not checked: verify's --timeout was spent"}
        if claim.registry:
            return self.registries.check(claim.registry, claim.text)
        if not claim.sources:
            out = {"verdict": "no_source", "method": "none", "quote": claim.quotes[0] if claim.quotes else None,
                   "note": "its marker names no source that can be read" if claim.unresolved
                   else "quoted text without a source"}
            if claim.unresolved:
                out["unresolved"] = ", ".join(claim.unresolved)  # the file's markers (shown fenced)
            return out
        reachable = [s for s in (self.source(u) for u in claim.sources) if s.origin != "unreachable"]
        if not reachable:
            first = self.source(claim.sources[0])
            return {"verdict": "unreachable", "method": "none", "source_url": first.url, "error": first.error}
        if claim.quotes:
            return self._quotes(claim, reachable)
        if claim.short_quotes:  # a quote of a word or two is found almost anywhere: it proves nothing
            return {"verdict": "too_short", "method": "none", "source_url": reachable[0].url,
                    "origin": reachable[0].origin, "quote": claim.short_quotes[0],
                    "note": f"the quote is too short to check (fewer than {MIN_QUOTE_WORDS} words); quote a "
                    "longer passage of the source or drop the quotation marks"}
        if support.too_short(claim.text):
            return {"verdict": "too_short", "method": "none", "source_url": reachable[0].url,
                    "origin": reachable[0].origin, "note": "too few words to judge; quote the source or write "
                    "the claim as a sentence"}
        return self._support(claim, reachable)

    def _quotes(self, claim, reachable: list[SourceText]) -> dict:
        found = []
        for quote in claim.quotes:
            hit = self._locate(quote, reachable)
            if hit is None:
                return self._quote_missing(quote, reachable)
            found.append(hit)
        src, where, text, located = found[0]
        out = {"verdict": "quote_found", "method": located.method, "source_url": src.url, "origin": src.origin,
               "quote": claim.quotes[0], "position": {"start": located.start, "end": located.end, "in": where},
               "passage": _around(text, located.start, located.end)}
        if len(claim.quotes) > 1:
            out["quotes_found"] = len(found)
        return out

    def _locate(self, quote: str, reachable: list[SourceText]):
        for src in reachable:
            located = quotes.locate(quote, src.text)
            if located:
                return src, "markdown", src.text, located
        for src in reachable:
            text = self.page_text(src)
            located = quotes.locate(quote, text) if text else None
            if located:
                return src, "page_text", text, located
        return None

    def _quote_missing(self, quote: str, reachable: list[SourceText]) -> dict:
        late = next((src for src in reachable if src.late), None)
        if late is not None:  # the whole page could not be searched: no verdict on the quote
            return {"verdict": "unreachable", "method": "none", "source_url": late.url, "origin": late.origin,
                    "quote": quote, "error": dict(self._late(), message="The quote is not in the main content "
                                                  "and the page's whole text was not read in time")}
        best, best_src = None, reachable[0]
        for src in reachable:
            near = quotes.closest(quote, src.text)
            if near and (best is None or near["similarity"] > best["similarity"]):
                best, best_src = near, src
        out = {"verdict": "not_found", "method": "fuzzy", "source_url": best_src.url, "origin": best_src.origin,
               "quote": quote}
        if best:
            out.update(passage=_cut(best_src.text[best["start"]:best["end"]], 700), similarity=best["similarity"],
                       differences={"quote_only": best["quote_only"], "source_only": best["source_only"]})
        return out

    def _support(self, claim, reachable: list[SourceText]) -> dict:
        best = None
        for src in reachable:
            found = support.best_window(claim.text, self._candidates(src, claim.text))
            if found and (best is None or (found[1]["supported"], found[1]["coverage"]) >
                          (best[1][1]["supported"], best[1][1]["coverage"])):
                best = (src, found)
        if best is None:
            return {"verdict": "not_found", "method": "ranking", "source_url": reachable[0].url,
                    "origin": reachable[0].origin, "reasons": ["the source has no text"]}
        src, (passage, score) = best
        out = {"verdict": "related" if score["supported"] else "not_found", "method": "ranking",
               "source_url": src.url, "origin": src.origin, "passage": _cut(passage, 700),
               "coverage": score["coverage"]}
        if score["supported"]:
            out["caveat"] = support.CAVEAT
        if score["reasons"]:
            out["reasons"] = score["reasons"]
        if score.get("missing"):
            out["missing"] = score["missing"]
        return self._judged(claim, out, passage)

    def _judged(self, claim, out: dict, passage: str) -> dict:
        """The model's verdict replaces the ranking's when a model is configured (both are shown)."""
        if not self.use_llm:
            return out
        if self.deadline.expired():
            return dict(out, note="no model judgement: verify's --timeout was spent")
        judged = support.judge(self.rt, claim.text, passage)
        if judged is None:
            self.use_llm = False  # no model answered: do not ask again for every claim
            return out
        word, backend = judged
        self.llm_backend = backend
        judged = {k: v for k, v in out.items() if k != "caveat"}
        return dict(judged, verdict="supported" if word == "SUPPORTED" else "not_found", method=f"llm:{backend}",
                    llm_verdict=word.lower(), ranking_verdict=out["verdict"])

    def _candidates(self, src: SourceText, claim_text: str) -> list[str]:
        """The source's fragments best ranked for the claim (knowledge base), else its paragraphs."""
        if src.path and self.memory:
            import gsd_research.researcher.api as kb
            from gsd_research.memory.api import REPOSITORY

            try:
                hits = kb.search(REPOSITORY, claim_text, paths=[src.path], n_fragments=CANDIDATE_FRAGMENTS)
                if hits["passages"]:
                    return [p["text"] for p in hits["passages"]]
            except GsdError:
                pass
        import gsd_research.researcher.api as kb

        return kb.chunk(src.text)


def _unread(src: SourceText) -> dict:
    """A claim a search's snippet of an unreadable page does not hold: a snippet can confirm a claim, but
    not deny it, so the verdict is the page's."""
    return {"verdict": "unreachable", "method": "none", "source_url": src.url, "origin": src.origin,
            "error": src.error, "note": "the page could not be read and the search snippet kept of it does not "
            "hold the claim"}


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def _around(text: str, start: int, end: int) -> str:
    """The found quote with some context on both sides, cut at spaces."""
    lo, hi = max(0, start - CONTEXT_CHARS), min(len(text), end + CONTEXT_CHARS)
    if lo > 0:
        space = text.find(" ", lo, start)
        lo = space + 1 if space >= 0 else lo
    if hi < len(text):
        space = text.rfind(" ", end, hi)
        hi = space if space >= 0 else hi
    return ("…" if lo > 0 else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")


def _shown(message: str, url: str) -> str:
    """An error message in our words, the cited URL in it in its safe form (it comes from the file)."""
    from gsd_research.core.external import safe_url

    return message.replace(url, safe_url(url) or "the cited URL")[:300] if url else message[:300]
