"""A search answer within --max-tokens: ranked documents carrying their best passages, then ranked passages.

Printed in order of priority: document 1 with its best passage, passage 1, document 2 with its best passage,
passage 2, ..., then the documents' further passages. A fragment whose passage is printed under its document
says where (`"see": "documents[0].top_fragments[0]"`) instead of repeating it. What does not fit is left out
(the last passage that fits in part is cut around what the query matched, `"truncated": true`); `metadata`
says how much there was (`total_available`, `returned`, `truncated`, `tokens_used`: cl100k, estimated from
above, of the answer as printed, and `max_tokens`).

With a research session (core.session) a passage it returned before is named by its reference instead of
repeated (`repeat`, expandable), and an answer cut by its budget carries `metadata.next`: the cursor of the
units it left out, as fragments, continued by `gsd-research expand` like any other cut answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gsd_research.core import session
from gsd_research.core.budget import PLACEHOLDER_NEXT, current_command, source_of
from gsd_research.core.config import MEMORY_REPOSITORY
from gsd_research.core.errors import UsageError
from gsd_research.core.tokens import count_tokens, cut_to_tokens
from gsd_research.researcher.excerpt import excerpt
from gsd_research.researcher.models import SearchResult
from gsd_research.researcher.ranking import Ranking

DEFAULT_MAX_TOKENS = 2000
ECHO_SHARE, ECHO_MIN_TOKENS = 8, 16  # an echoed query gets at most max_tokens/8 tokens (16 at least)
SKIPPED_SHARE = 3  # an envelope over max_tokens/3 with left-out repositories' messages: the messages go
MIN_CUT_TOKENS = 40  # a passage cut shorter than this is left out (unless it would be the only one)
Measure = Callable[[dict], int]
_DOCUMENT_SAYS = ("document_path", "repository", "distance", "match")  # not repeated under the document


@dataclass(frozen=True, eq=False)
class _Unit:
    kind: str  # "doc" (document `index`, its passage f) or "frag" (fragment `index`, f)
    index: int
    f: SearchResult

    @property
    def key(self) -> tuple[str, str]:
        return _key(self.f)


def compact_tokens(doc: dict) -> int:
    """Tokens of `doc` printed as one compact JSON line."""
    return count_tokens(json.dumps(doc, ensure_ascii=False, separators=(",", ":"), default=str) + "\n")


def _key(f: SearchResult) -> tuple[str, str]:
    return f.repository, f.fragment_id


def fragment_json(f: SearchResult) -> dict:
    out = {"fragment_id": f.fragment_id, "document_path": f.document_path, "repository": f.repository,
           "fragment_index": f.fragment_index, "score": f.score,
           "distance": None if f.distance is None else round(f.distance, 4), "match": f.match}
    if f.breadcrumb:
        out["breadcrumb"] = f.breadcrumb
    out["text"] = f.text
    return out


def _passage_json(f: SearchResult) -> dict:
    """A passage under its document: the fragment's entry without what the document says."""
    return {k: v for k, v in fragment_json(f).items() if k not in _DOCUMENT_SAYS}


class AnswerBuilder:
    """Chooses what of a ranking fits the budget and renders it."""

    def __init__(self, ranking: Ranking, roots: dict[str, str], max_tokens: int, measure: Measure,
                 option: str = "--max-tokens", led: session.Ledger | None = None) -> None:
        self.ranking, self.roots, self.max_tokens, self.measure = ranking, roots, max_tokens, measure
        self.option = option  # how the caller names the budget (the CLI option, the MCP parameter)
        self.led = led  # the session's ledger: references and a cursor (None: neither, as the MCP tools)
        self.refs: dict[tuple[str, str], dict] = {}  # passage -> its reference, when the session returned it
        docs, frags = ranking.documents, ranking.fragments
        self.units: list[_Unit] = []  # in order of priority (see the module)
        for i in range(max(len(docs), len(frags))):
            if i < len(docs) and docs[i].top_fragments:
                self.units.append(_Unit("doc", i, docs[i].top_fragments[0]))
            if i < len(frags):
                self.units.append(_Unit("frag", i, frags[i]))
        self.units += [_Unit("doc", i, f) for i, d in enumerate(docs) for f in d.top_fragments[1:]]
        if led is not None and led.dedupes:
            for unit in self.units:
                f = unit.f
                entry = led.seen(_pid(f))
                if entry is not None and int(entry.get("chars", 0)) >= len(f.text):
                    self.refs[_key(f)] = led.reference(_pid(f), entry)

    def _document(self, index: int) -> dict:
        d = self.ranking.documents[index]
        return {"document_path": d.document_path, "repository": d.repository,
                "absolute_path": str(Path(self.roots.get(d.repository, "")) / d.document_path), "score": d.score,
                "best_distance": None if d.best_distance is None else round(d.best_distance, 4),
                "top_fragments": []}

    def render(self, shell: dict, chosen: list[tuple[_Unit, str | None]]) -> dict:
        """The answer with the chosen units (a unit's text: its passage, possibly cut). A document carries its
        passages; a fragment also printed under a document points there instead of repeating it."""
        slot: dict[int, dict] = {}  # document index -> its entry, in the order printed
        where: dict[tuple[str, str], str] = {}
        for unit, _ in chosen:
            if unit.kind == "doc":
                tops = slot.setdefault(unit.index, self._document(unit.index))["top_fragments"]
                position = list(slot).index(unit.index)
                where[unit.key] = f"documents[{position}].top_fragments[{len(tops)}]"
                tops.append(None)
        documents = list(slot.values())
        fragments: list[dict] = []
        for unit, text in chosen:
            f, entry = unit.f, self._entry(unit)
            if unit.kind == "doc":
                tops = slot[unit.index]["top_fragments"]
                tops[tops.index(None)] = entry
            else:
                fragments.append(entry)
                if _key(f) in where and "text" in entry:
                    del entry["text"]
                    entry["see"] = where[_key(f)]
                    continue
            if "text" in entry and text != f.text:
                entry["text"], entry["truncated"] = text, True
        out = dict(shell)
        out["documents"], out["fragments"] = documents, fragments
        meta = dict(shell.get("metadata", {}))
        out.pop("metadata", None)
        if MEMORY_REPOSITORY in self.roots:  # web text: fenced on every surface, since every one answers here
            out, meta = _web_sourced(out, meta)
        requested = sum(len(d.top_fragments) for d in self.ranking.documents) + len(self.ranking.fragments)
        meta.update({
            "total_available": {"documents": self.ranking.total_documents, "fragments": self.ranking.total_fragments},
            "returned": {"documents": len(documents), "fragments": len(fragments)},
            "truncated": len(chosen) < requested or any(e.get("truncated") for e in fragments) or any(
                e.get("truncated") for d in documents for e in d["top_fragments"]),
            "tokens_used": 0, "max_tokens": self.max_tokens})
        out["metadata"] = meta
        meta["tokens_used"] = self.measure(out)
        return out

    def _cost(self, unit: _Unit, opened: set[int], printed: dict) -> tuple[int, int]:
        """(cost of the unit, cost of its text) in tokens. A passage printed as a fragment before moves into its
        document (the fragment then points there), so it costs the difference."""
        f, key = unit.f, unit.key
        doc = unit.kind == "doc"
        opening = compact_tokens(self._document(unit.index)) if doc and unit.index not in opened else 0
        if key in self.refs:  # named, not repeated: no text to cut
            return compact_tokens(self._entry(unit)) + 2 + opening, 0
        pointer = compact_tokens({**{k: v for k, v in fragment_json(f).items() if k != "text"},
                                  "see": "documents[00].top_fragments[0]"})
        if not doc:
            return (pointer if key in printed else compact_tokens(fragment_json(f))) + 2, count_tokens(f.text)
        moved = printed[key] - pointer if key in printed else 0
        return compact_tokens(_passage_json(f)) + 2 + opening - moved, count_tokens(f.text)

    def _entry(self, unit: _Unit) -> dict:
        """A unit's entry: its passage (under its document) or fragment; a reference if the session has it."""
        f = unit.f
        entry = (_passage_json if unit.kind == "doc" else fragment_json)(f)
        if _key(f) not in self.refs:
            return entry
        return {**{k: v for k, v in entry.items() if k != "text"}, **self.refs[_key(f)]}

    def build(self, shell: dict) -> dict:
        self.query = str(shell.get("query") or "")
        shell = self._echo(shell)
        if self.led is not None and self.led.active:  # the session's spend, counted at this answer's whole budget
            shell = _with(shell, session=self.led.spent(self.max_tokens))
        if self.refs:
            shell = _with(shell, expand=f"{session.EXPAND} REF")
        out, chosen = self._choose(shell)
        if self.units and not chosen:  # an empty list would read as "nothing found"
            raise UsageError(f"{self.option} {self.max_tokens} is too small for this answer (nothing found fits)",
                             suggestions=[f"Use {self.option} {max(self.max_tokens + 300, 500)} or more"])
        if self.led is None or not out["metadata"]["truncated"]:
            return self._returned(out, chosen)
        try:
            cut, fewer = self._choose(_with(shell, next=PLACEHOLDER_NEXT))
        except UsageError:  # a budget too small for the cursor too: the answer as it was, without one
            return self._returned(out, chosen)
        if not fewer:  # the cursor would take the only passage's room (or nothing fits): no cursor to follow
            return self._returned(out, chosen)
        out, chosen = cut, fewer
        rest = self._rest(chosen)
        if rest:  # the token has the placeholder's length: the answer's size holds
            out["metadata"]["next"] = self.led.mint_cursor({
                "command": current_command(), "kind": "results", "key": "fragments", "text_key": "text",
                "frame": session.shell({k: v for k, v in out.items() if k != "documents"}, "fragments"),
                "items": rest})
        else:
            del out["metadata"]["next"]
            out["metadata"]["tokens_used"] = self.measure(out)
        return self._returned(out, chosen)

    def _returned(self, out: dict, chosen: list[tuple[_Unit, str | None]]) -> dict:
        """The session records the passages this answer printed whole (a cut one is printed again later)."""
        if self.led is not None and self.led.active:
            for unit, text in chosen:
                f = unit.f
                if _key(f) not in self.refs and text == f.text:
                    self.led.returned(_pid(f), f.text, _source(f))
        return out

    def _rest(self, chosen: list[tuple[_Unit, str | None]]) -> list[dict]:
        """What the answer left out, as fragments in the order it would have printed them: a cut passage whole,
        then every later unit's passage not printed already."""
        rest, seen = [], {u.key for u, text in chosen
                          if text == u.f.text or u.key in self.refs}
        for unit in self.units:
            f = unit.f
            if _key(f) in seen:
                continue
            seen.add(_key(f))
            entry = fragment_json(f)
            if MEMORY_REPOSITORY in self.roots:  # web text: neutralized as the first answer's was
                from gsd_research.core.untrusted import guard_text

                entry["text"] = guard_text(entry["text"], "fragments")[0]
            rest.append(entry)
        return rest

    def _choose(self, shell: dict) -> tuple[dict, list[tuple[_Unit, str | None]]]:
        empty = self.render(shell, [])
        skipped = shell.get("metadata", {}).get("skipped_repositories") or []
        said = any("message" in s for s in skipped)
        if said and empty["metadata"]["tokens_used"] > self.max_tokens // SKIPPED_SHARE:
            # many damaged repositories: their names and fixes, not their messages (alone, each prints it)
            brief = [{k: v for k, v in s.items() if k != "message"} for s in skipped]
            shell = _with(shell, skipped_repositories=brief)
            empty = self.render(shell, [])
        if empty["metadata"]["tokens_used"] > self.max_tokens:
            need = empty["metadata"]["tokens_used"]
            raise UsageError(f"{self.option} {self.max_tokens} is too small for this answer (its envelope alone "
                             f"needs {need})", suggestions=[f"Use {self.option} {max(need + 300, 500)} or more"])
        chosen: list[tuple[_Unit, str | None]] = []
        remaining = self.max_tokens - empty["metadata"]["tokens_used"]
        printed: dict[tuple[str, str], int] = {}  # passage -> what its fragment entry costs with the text
        opened: set[int] = set()
        for unit in self.units:
            f = unit.f
            cost, text_cost = self._cost(unit, opened, printed)
            if cost > remaining:
                cut = self._cut(f.text, remaining - (cost - text_cost))
                if cut is not None and _key(f) not in printed and (count_tokens(cut) >= MIN_CUT_TOKENS or not chosen):
                    chosen.append((unit, cut))
                break
            chosen.append((unit, f.text))
            remaining -= cost
            if unit.kind == "doc":
                opened.add(unit.index)
                printed[_key(f)] = 0
            elif _key(f) not in printed:
                printed[_key(f)] = compact_tokens(fragment_json(f)) + 2
        return self._settle(shell, chosen), chosen

    def _echo(self, shell: dict) -> dict:
        """The shell with its echoed query cut to a share of the budget (a pasted log as the query), marked."""
        room = max(ECHO_MIN_TOKENS, self.max_tokens // ECHO_SHARE)
        if not self.query or count_tokens(self.query) <= room:
            return shell
        cut, _ = cut_to_tokens(self.query, room)
        return _with({**shell, "query": cut + "…"}, query_truncated=True)

    def _cut(self, text: str, room: int) -> str | None:
        """The passage within `room` tokens around what the query matched, omissions marked (see excerpt)."""
        if room <= 4:
            return None
        return excerpt(text, self.query, room - 4, lambda s: compact_tokens({"t": s})) or None

    def _settle(self, shell: dict, chosen: list[tuple[_Unit, str | None]]) -> dict:
        """Render; while the real count is over the budget, cut or drop the last unit."""
        out = self.render(shell, chosen)
        while out["metadata"]["tokens_used"] > self.max_tokens and chosen:
            over = out["metadata"]["tokens_used"] - self.max_tokens
            unit, text = chosen[-1]
            if unit.key in self.refs:
                chosen.pop()
                out = self.render(shell, chosen)
                continue
            target = count_tokens(text or "") - over - 8
            cut = self._cut(unit.f.text, target) if target >= (MIN_CUT_TOKENS if len(chosen) > 1 else 1) else None
            chosen[-1:] = [(unit, cut)] if cut else []
            out = self.render(shell, chosen)
        return out


def _with(shell: dict, **meta) -> dict:
    return {**shell, "metadata": {**shell.get("metadata", {}), **meta}}


def _pid(f: SearchResult) -> str:
    return session.passage_id(f.text, _source(f))


def _source(f: SearchResult) -> str:
    """The passage's source as every continuation names it (one rule, in core.budget)."""
    return source_of({"repository": f.repository, "document_path": f.document_path})


def _web_sourced(out: dict, meta: dict) -> tuple[dict, dict]:
    """An answer from the research memory: its passages neutralized and scanned, inside the answer's one fence,
    labelled as web text (`metadata.web_sourced`), flagged as every other command flags external text."""
    from gsd_research.core.untrusted import guard_text, seal, shown_warnings

    warnings: list[dict] = []
    places = [(f"documents[{i}].top_fragments[{j}]", e) for i, d in enumerate(out["documents"])
              for j, e in enumerate(d["top_fragments"])] + [(f"fragments[{i}]", e) for i, e in enumerate(out["fragments"])]
    for where, entry in places:
        if "text" in entry:
            entry["text"], found = guard_text(entry["text"], where)
            if found:
                entry["injection_flagged"] = True
                warnings += found
    seal(out, ("documents", "fragments"))
    out.update(shown_warnings(warnings))
    return out, {**meta, "web_sourced": True}


def answer(ranking: Ranking, shell: dict, roots: dict[str, str], max_tokens: int,
           measure: Measure = compact_tokens, option: str = "--max-tokens", led: session.Ledger | None = None) -> dict:
    """`shell` (query, metadata, ...) with the ranking's documents and fragments, within `max_tokens` by `measure`;
    `option` names the budget in errors; with `led` the session's references and a cursor (see the module)."""
    return AnswerBuilder(ranking, roots, max_tokens, measure, option, led).build(shell)
