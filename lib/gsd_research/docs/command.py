"""`gsd-research docs LIB QUERY`: library documentation from Context7, token-budgeted."""

from __future__ import annotations

import click

from gsd_research.core.budget import check_echo, fit_results
from gsd_research.core.errors import UsageError
from gsd_research.core.output import document_tokens
from gsd_research.core.runtime import agent_command
from gsd_research.docs.context7 import Context7, snippets_to_results


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
    body, served_id = client.context(library_id, text)
    results = snippets_to_results(body)
    doc = {
        "query": text,
        "library": library,
        "metadata": {
            "library_id": served_id,
            "library_title": match.title if match else None,
            "confidence": "HIGH",
            "backend": "context7",
            "cache_hit": rt.http.upstream_requests == 0,
            "authenticated": bool(cfg.api_key("context7")),
        },
    }
    if served_id != library_id:
        doc["metadata"]["redirected_from"] = library_id
    if not results:
        doc["metadata"]["note"] = "Context7 returned no snippets for this query; rephrase it with API names"
    doc = fit_results(doc, results, rt.max_tokens)
    if results and not doc["results"]:
        meta = doc["metadata"]
        meta["note"] = "No snippet fits: raise --max-tokens"
        meta["tokens_used"] = document_tokens(doc)
        if meta["tokens_used"] > rt.max_tokens:
            del meta["note"]
            meta["tokens_used"] = document_tokens(doc)
    return doc
