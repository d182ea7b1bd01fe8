"""`gsd-research verify FILE`: each sourced claim of a Markdown research file checked against its sources."""

from __future__ import annotations

import time
from pathlib import Path

import click

from gsd_research.core.budget import drop_cut_warnings, fit_results
from gsd_research.core.errors import UsageError
from gsd_research.core.runtime import agent_command

MAX_FILE_BYTES = 5_000_000  # a research file of Markdown; larger is refused, never read whole
# Text of the research file or of its sources in an answer: every such field sits in its fence (core.untrusted).
TEXT_FIELDS = ("claim", "quote", "passage", "unresolved", "missing", "quote_only", "source_only")
VERDICTS = ("quote_found", "supported", "related", "not_found", "too_short", "unreachable", "no_source",
            "registry_confirmed", "package_not_found", "version_not_found", "unverified", "unchecked")
TAGS = ("CITED", "VERIFIED", "ASSUMED", "other")


def read_file(file: str) -> tuple[Path, str]:
    from gsd_research.core.input_files import read_file as read_input_file

    path = Path(file).expanduser()
    data = read_input_file(path, MAX_FILE_BYTES, what="research file", shown=file,
                           suggestions=["gsd-research verify .planning/research/RESEARCH.md"])
    if b"\0" in data[:8192]:
        raise UsageError(f"{file} looks binary, not Markdown", suggestions=["Pass a Markdown research file"])
    return path, data.decode("utf-8", "replace")


@agent_command("verify")
@click.argument("file")
@click.option("--llm/--no-llm", "use_llm", default=True, show_default=True,
              help="Let a configured model judge unquoted claims (labelled; skipped when none is configured).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=120.0, show_default=True,
              help="Seconds for the whole check, scoring included (keep it under the Bash tool's timeout); "
                   "sources not read by then are unreachable, claims not checked by then unchecked.")
def verify(rt, file: str, use_llm: bool, timeout: float):
    """Check FILE's citations: quotes located in their sources, unquoted claims against the best passage."""
    from gsd_research.core.untrusted import seal, shown_warnings
    from gsd_research.verify.claims import extract_claims
    from gsd_research.verify.deadline import Deadline
    from gsd_research.verify.verify import SEVERITY, Verifier

    started = time.perf_counter()
    deadline = Deadline(timeout)
    path, text = read_file(file)
    claims = extract_claims(text)
    verifier = Verifier(rt, use_llm=use_llm, deadline=deadline)
    results = verifier.check_all(claims)
    results.sort(key=lambda r: (SEVERITY[r["verdict"]], r["line"]))  # what needs attention first
    results, warnings = guard_claims(results)
    origins = [s.origin for s in verifier.sources.values()]
    meta = {"claims": len(results), "counts": tally(results), "tags": {t: tally(results, t) for t in TAGS
                                                                      if any(r["tag"] == t for r in results)},
            "sources": {o: origins.count(o) for o in ("memory", "cache", "fetched", "unreachable") if o in origins},
            "llm": verifier.llm_backend, "cache_hit": any(o in ("memory", "cache", "memory-snippet") for o in origins)
            and verifier.upstream_requests == 0 and "fetched" not in origins,
            "timeout_s": timeout, "elapsed_ms": round((time.perf_counter() - started) * 1000, 1)}
    if verifier.timings:
        meta["per_claim_ms"] = round(1000 * sum(verifier.timings) / len(verifier.timings), 1)
    if not results:
        meta["note"] = ("No sourced claim found: cite with [CITED: url], Markdown links or [n] references "
                        "with a Sources list")
    doc: dict = seal({"file": str(path), "claims": []}, ("claims",))
    doc.update(shown_warnings(warnings))
    doc["metadata"] = meta
    doc = fit_results(doc, results, rt.max_tokens, text_key="passage", results_key="claims", dedupe=False)
    return drop_cut_warnings(doc, results_key="claims", index_key="claim")


def tally(results: list[dict], tag: str | None = None) -> dict:
    """Claims per verdict (those with any), of one provenance tag or of all."""
    counts = {v: sum(r["verdict"] == v and tag in (None, r["tag"]) for r in results) for v in VERDICTS}
    return {v: n for v, n in counts.items() if n}


def guard_claims(results: list[dict]) -> tuple[list[dict], list[dict]]:
    """Each claim's text from the file or its sources neutralized and scanned, its URLs in their safe form; one
    warning per flagged claim ({"where": "claims[i]", "claim": i, "kinds", ...}: never the text or URL)."""
    from gsd_research.core.external import safe_url
    from gsd_research.core.untrusted import guard_results

    flat = []
    for item in results:
        item = dict(item)
        for key in ("missing",):
            if item.get(key):
                item[key] = ", ".join(item[key])
        item.update({k: ", ".join(v) or None for k, v in (item.pop("differences", None) or {}).items()})
        if "source_url" in item:
            item["source_url"] = safe_url(item["source_url"])
        if "sources" in item:
            item["sources"] = [safe_url(u) for u in item["sources"]]
        flat.append(item)
    guarded, warnings = guard_results(flat, fields=TEXT_FIELDS)
    for item, original in zip(guarded, results, strict=True):
        if "differences" in original:
            item["differences"] = {k: item.pop(k) for k in ("quote_only", "source_only")}
    for w in warnings:
        w["where"] = w["where"].replace("results[", "claims[")
        w["claim"] = w.pop("result")
    return guarded, warnings
