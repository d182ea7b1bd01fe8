"""`gsd-research docs LIB QUERY`: library documentation from Context7, token-budgeted."""

from __future__ import annotations

import click

from gsd_research.core import session
from gsd_research.core.budget import MIN_CUT_TOKENS, check_echo, fit_results, json_tokens, too_small
from gsd_research.core.errors import UsageError
from gsd_research.core.output import document_tokens
from gsd_research.core.runtime import agent_command
from gsd_research.core.untrusted import MAX_WARNINGS, guard_results, neutralize, seal
from gsd_research.docs.context7 import Context7, snippets_to_results, split_version


@agent_command("docs")
@click.argument("library")
@click.argument("query", nargs=-1, required=True)
def docs(rt, library: str, query: tuple[str, ...]):
    """Documentation for LIBRARY (a name, name@version or a Context7 id such as /vercel/next.js)."""
    text = " ".join(query).strip()
    if not library.strip() or not text:
        raise UsageError("docs needs a library and a query", suggestions=['gsd-research docs react "useEffect cleanup"'])
    check_echo(library + " " + text, rt.max_tokens)
    cfg = rt.config
    client = Context7(rt.http, cfg.base_url("context7"), cfg.api_key("context7"), cfg.ttl("docs"))
    library_id, match = client.resolve(library.strip(), text)
    version_meta: dict = {}
    if match is not None and split_version(library.strip())[1] is None:
        library_id, version_meta = project_pin(library.strip(), match, library_id)
    body, served_id = client.context(library_id, text)
    memo_key = None
    if rt.http.upstream_requests == 0 and not rt.no_cache and not session.current().active:  # see answer_memo
        from gsd_research.docs import answer_memo

        memo_key = answer_memo.key(library=library, query=text, max_tokens=rt.max_tokens, pretty=rt.pretty,
                                   library_id=library_id, served_id=served_id,
                                   match=[match.id, match.title] if match else None, pin=version_meta,
                                   authenticated=bool(cfg.api_key("context7")), body=body)
        expires = answer_memo.earliest(rt.http.cached_expiries)
        kept = answer_memo.get(memo_key, expires)
        if kept is not None:
            return kept
    doc = answer(rt, text, library, body, served_id, library_id, match, version_meta)
    if memo_key is not None:
        answer_memo.put(memo_key, doc, expires)
    return doc


def answer(rt, text: str, library: str, body: dict, served_id: str, library_id: str, match, version_meta: dict,
           ) -> dict:
    """The docs answer for Context7's `body`: snippets fenced and scanned, within the budget."""
    cfg = rt.config
    results, warnings = guard_results(snippets_to_results(body), fields=("content", "title"))  # external text
    doc = {
        "query": text,
        "library": library,
        "library_title": neutralize(match.title) if match else None,
        "results": [],
        "metadata": {
            "library_id": served_id,
            "confidence": "HIGH",
            "backend": "context7",
            "cache_hit": rt.http.upstream_requests == 0,
            "authenticated": bool(cfg.api_key("context7")),
        },
    }
    seal(doc, ("library_title", "results"))
    doc["metadata"].update(version_meta)
    if served_id != library_id:
        doc["metadata"]["redirected_from"] = library_id
    if not results:
        doc["metadata"]["note"] = "Context7 returned no snippets for this query; rephrase it with API names"
    doc = _fit(doc, results, warnings[:MAX_WARNINGS], rt.max_tokens)
    if results and not doc["results"]:  # an empty list would read as "nothing documented"
        raise too_small(rt.max_tokens, doc["metadata"]["tokens_used"] + MIN_CUT_TOKENS,
                        "its envelope and shortest snippet need")
    return doc


def _fit(doc: dict, results: list[dict], warnings: list[dict], max_tokens: int) -> dict:
    """The answer within the budget, fences and warnings counted: room is kept for the warnings, and only
    those of the snippets that fit are given."""
    reserve = json_tokens({"injection_flagged": True, "injection_warnings": warnings}) if warnings else 0
    doc = fit_results(doc, results, max_tokens - reserve)
    kept = [w for w in warnings if w["result"] <= len(doc["results"])]
    if kept:
        meta = doc.pop("metadata")
        doc.update(injection_flagged=True, injection_warnings=kept, metadata=meta)
    doc["metadata"]["max_tokens"] = max_tokens
    doc["metadata"]["tokens_used"] = document_tokens(doc)
    return doc


def project_pin(spec: str, match, library_id: str) -> tuple[str, dict]:
    """The library id at the version the project's lockfiles pin, when Context7 lists that version; the
    metadata saying which version was served and whether it is the project's."""
    from gsd_research.docs.lockfiles import lookup, served

    parts = [p for p in match.id.split("/") if p]
    found = lookup([spec, match.title, *parts[-1:], "/".join(parts[-2:])])
    pinned = found.pinned
    notes = {"lockfile_notes": found.notes} if found.notes else {}
    if pinned is None:
        return library_id, notes
    version = served(pinned, match.versions)
    meta = {"project_version": pinned.version, "version_source": pinned.lockfile, "served_version": version,
            "version_match": version is not None, **notes}
    if version is None:
        meta["note_version"] = (f"Context7 has no documentation for {pinned.name} {pinned.version}; the default "
                                "(usually latest) version was served")
        if match.versions:
            meta["versions_available"] = match.versions[:8]
        return library_id, meta
    return f"{match.id}/{version}", meta
