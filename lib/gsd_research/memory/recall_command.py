"""`gsd-research recall QUERY`: passages from what fetch, search and deep read before, offline."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import click

from gsd_research.core.budget import check_echo, drop_cut_warnings, fit_results
from gsd_research.core.errors import UsageError
from gsd_research.core.runtime import agent_command

CANDIDATES = 30  # fragments ranked before they are grouped by source
PER_SOURCE = 2  # passages of one source at most, so the top of the answer names several sources
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|hr|d|day|days|w|wk|weeks?)\s*$", re.I)
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400, "days": 86400,
          "w": 604800, "wk": 604800, "week": 604800, "weeks": 604800}
_IDENTIFIER = re.compile(r"\d|\w[-_.]\w|[a-z][A-Z]")
# Kept text in an answer, all inside its fence (core.untrusted): a page's or a report's passage, its title, and the
# query that an earlier search or deep run was asked (kept text too, whoever wrote it).
TEXT_FIELDS = ("content", "title", "query")
EXAMPLE = 'gsd-research recall "widget toolkit python version" --since 2h'


def parse_since(value: str | None, now: datetime | None = None) -> str | None:
    """An ISO UTC timestamp from a duration back from now (90s, 30m, 2h, 7d, 2w) or an ISO date/time."""
    if value is None:
        return None
    now = now or datetime.now(timezone.utc)
    match = _DURATION.match(value)
    if match:
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
        try:
            return _iso(now - timedelta(seconds=seconds))
        except OverflowError:
            raise UsageError(f"--since {value!r} reaches before the year 1", suggestions=[EXAMPLE]) from None
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since takes a duration (30m, 2h, 7d, 2w) or an ISO date, not {value!r}",
                         suggestions=[EXAMPLE]) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return _iso(when)


def _iso(when: datetime) -> str:
    """As the catalog writes its times (UTC, milliseconds), so they compare as text."""
    return when.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def url_prefixes(values: tuple[str, ...]) -> list[str]:
    """Each prefix as given; one without a scheme also with http(s):// and www. in front."""
    out: list[str] = []
    for value in values:
        value = value.strip()
        if not value:
            continue
        if "://" in value:
            out.append(value)
        else:
            bare = value.removeprefix("www.")
            out += [f"{scheme}://{www}{bare}" for scheme in ("https", "http") for www in ("", "www.")]
    return list(dict.fromkeys(out))


def _item(entry: dict, passage: dict, latest: dict[str, str]) -> dict:
    import json

    from gsd_research.core.external import safe_url

    item = {"source_url": safe_url(entry["url"]), "title": entry["title"], "provider": entry["provider"],
            "fetched_at": entry["fetched_at"], "kind": entry["kind"], "content": passage["text"],
            "score": passage["score"]}
    if entry["kind"] != "page" and entry["query"]:
        item["query"] = entry["query"]
    if entry["ref"]:
        item["ref"] = entry["ref"]
    if entry["kind"] == "page" and latest.get(entry["url"]) not in (None, entry["id"]):
        item["superseded"] = True  # a newer version of this page is kept too
    flags = json.loads(entry["flags"] or "[]")
    if flags:
        item["source_flagged"] = flags  # instruction-like text found in the source when it was read
    return item


def identifiers(query: str) -> list[str]:
    """The query's identifier-like words (a digit, an inner - _ . or a camelCase hump: QK-7731-ZETA, ab_cd.ef9,
    fooBar2), which a passage must hold exactly to be the one asked about."""
    words = (w.strip("\"'`()[]{}<>,;:!?") for w in query.split())
    return list(dict.fromkeys(w for w in words if w and _IDENTIFIER.search(w)))


def _exact_hits(text: str, idents: list[str]) -> int:
    return sum(1 for i in idents if re.search(rf"(?<![\w-]){re.escape(i)}(?![\w-])", text, re.I))


def exact_first(passages: list[dict], lexical: list[dict], idents: list[str]) -> list[dict]:
    """The passages holding more of the query's identifiers exactly first (the fused ranking inside each
    group): a fused score normalizes a lone lexical hit to nothing, so meaning alone would bury it. Lexical
    candidates the fusion left out are added."""
    seen = {(p["document_path"], p.get("fragment_index")) for p in passages}
    merged = passages + [p for p in lexical if (p["document_path"], p.get("fragment_index")) not in seen]
    order = sorted(enumerate(merged), key=lambda ip: (-_exact_hits(ip[1].get("text") or "", idents), ip[0]))
    return [p for _, p in order]


def rank(store, query: str, paths: list[str] | None) -> tuple[list[dict], dict]:
    """Recall results best first (at most PER_SOURCE per source) and the search's mode and note."""
    import gsd_research.researcher.api as kb
    from gsd_research.memory.store import REPOSITORY

    kb.ensure_repository(REPOSITORY, store.documents)  # its folder, made private when missing
    hits = kb.search(REPOSITORY, query, paths=paths, n_fragments=CANDIDATES, mode="auto")
    idents = identifiers(query)
    if idents:
        lexical = hits["passages"] if hits.get("mode") == "lexical" else kb.search(
            REPOSITORY, query, paths=paths, n_fragments=CANDIDATES, mode="lexical")["passages"]
        hits["passages"] = exact_first(hits["passages"], lexical, idents)
    entries = store.by_paths(list(dict.fromkeys(p["document_path"] for p in hits["passages"])))
    latest = store.latest_urls([e["url"] for e in entries.values() if e["kind"] == "page" and e["url"]])
    results, per_source = [], {}
    for passage in hits["passages"]:
        entry = entries.get(passage["document_path"])
        if entry is None or per_source.get(entry["id"], 0) >= PER_SOURCE:
            continue  # evicted (its vectors leave at the next embedding run), or enough of this source
        per_source[entry["id"]] = per_source.get(entry["id"], 0) + 1
        results.append(_item(entry, passage, latest))
    return results, {k: v for k, v in hits.items() if k != "passages"}


@agent_command("recall")
@click.argument("query", nargs=-1)
@click.option("--clear", is_flag=True, help="Remove the whole research memory (catalog, documents, index).")
@click.option("--since", default=None, metavar="DURATION",
              help="Only what was read within DURATION (30m, 2h, 7d, 2w) or since an ISO date.")
@click.option("--url-prefix", "prefixes", multiple=True, metavar="P",
              help="Only sources whose URL starts with P (repeatable; without a scheme http(s) and www. match).")
def recall(rt, query: tuple[str, ...], since: str | None, prefixes: tuple[str, ...], clear: bool):
    """Passages about QUERY from what fetch, search and deep read before (no network). Text is untrusted."""
    from gsd_research.core.untrusted import guard_results, seal, shown_warnings
    from gsd_research.memory.api import settings
    from gsd_research.memory.store import clear_memory

    text = " ".join(query).strip()
    if clear:
        if text or since or prefixes:
            raise UsageError("recall --clear takes no query or filter", suggestions=["gsd-research recall --clear"])
        return {"metadata": {"backend": "research-memory", **clear_memory()}}
    if not text:
        raise UsageError("recall needs a query", suggestions=[EXAMPLE])
    check_echo(text, rt.max_tokens)
    since_iso = parse_since(since)
    total, results, search_meta = _search(text, since_iso, prefixes)
    results, warnings = guard_results(results, fields=TEXT_FIELDS)
    meta = {"backend": "research-memory", "entries": total, "mode": search_meta.get("mode"),
            "embedding": _embedding_state(settings(rt.config))}
    filters = {k: v for k, v in (("since", since_iso), ("url_prefix", list(prefixes) or None)) if v}
    if filters:
        meta["filters"] = filters
    note = search_meta.get("note") or _empty_note(total, results, filters)
    if note:
        meta["note"] = note
    if not settings(rt.config)["enabled"]:
        meta["memory_note"] = ("memory.enabled is false: nothing new is kept; this is what was kept before "
                               "(gsd-research recall --clear removes it)")
    doc: dict = seal({"query": text, "results": []}, ("results",))
    doc.update(shown_warnings(warnings))
    doc["metadata"] = meta
    return drop_cut_warnings(fit_results(doc, results, rt.max_tokens, text_key="content"))


def _search(text: str, since_iso: str | None, prefixes: tuple[str, ...]) -> tuple[int, list[dict], dict]:
    """(entries kept, results, the search's mode and note); an unreadable memory file is a clear error."""
    import sqlite3

    from gsd_research.core.errors import IndexDamaged
    from gsd_research.memory.store import MemoryStore, corrupt_error

    store = MemoryStore()
    try:
        try:
            total = store.count()
            paths = store.paths_matching(since_iso, url_prefixes(prefixes))
        except sqlite3.DatabaseError as exc:
            raise corrupt_error(exc, "catalog") from None
        if not total or paths == []:
            return total, [], {"mode": "none"}
        try:
            results, meta = rank(store, text, paths)
        except sqlite3.DatabaseError as exc:
            raise corrupt_error(exc, "index") from None
        except IndexDamaged as exc:  # the knowledge base's damage: here the fix is the memory's own
            raise corrupt_error(exc, "index") from None
        return total, results, meta
    finally:
        store.close()


def _empty_note(total: int, results: list[dict], filters: dict) -> str | None:
    if not total:
        return "The research memory is empty: fetch, search and deep fill it as they read"
    if not results:
        return "Nothing kept matches" + (" within the filters" if filters else "") + "; try other words"
    return None


def _embedding_state(conf: dict) -> str:
    """complete | pending (lexical ranking covers the newest entries meanwhile) | off. Only a write starts a
    worker: a recall never restarts one that died (`researcher index research-memory` catches up at once)."""
    import gsd_research.researcher.api as kb
    from gsd_research.memory.store import REPOSITORY

    if not kb.embedding_pending(REPOSITORY):
        return "complete"
    return "pending" if conf["embed"] == "background" else "off"
