"""The agent's view of a deep research answer: report, numbered citations, usage and cost, in budget."""

from __future__ import annotations

from gsd_research.core.budget import fit_text, json_tokens

CITATION_SHARE = 0.35  # at most this part of --max-tokens goes to the citation list
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens", "citation_tokens", "num_search_queries",
              "total_tokens")


def compact_usage(usage: dict) -> dict:
    return {k: int(usage[k]) for k in USAGE_KEYS if isinstance(usage.get(k), (int, float))}


def _fit_citations(citations: list[dict], max_tokens: int) -> list[dict]:
    room = int(max_tokens * CITATION_SHARE)
    kept, used = [], 0
    for cite in citations:
        item = {k: v for k, v in cite.items() if v not in ("", None)}
        cost = json_tokens(item) + 1
        if used + cost > room:
            break
        kept.append(item)
        used += cost
    return kept


def answer_payload(query: str, job_id: str, message: dict, max_tokens: int, *, extra_meta: dict | None = None,
                   warnings: list[str] | None = None) -> dict:
    """The envelope body for a finished job or blocking call, with the report cut to the budget."""
    from gsd_research.core.external import safe_url
    from gsd_research.core.untrusted import guard_text, neutralize, seal

    citations = [dict(c, title=neutralize(str(c.get("title") or "")), url=safe_url(c.get("url")))  # http(s), sanitized
                 for c in message.get("citations") or []]
    shown = _fit_citations(citations, max_tokens)
    notes = list(dict.fromkeys([*(warnings or []), *(message.get("warnings") or [])]))
    report, found = guard_text(str(message.get("content") or ""), "report")  # in the fence, flagged or not
    doc = {
        "query": query,
        "conversation_id": job_id,
        "status": "completed",
        "report": report or "",
        "citations": shown,
        "usage": compact_usage(message.get("usage") or {}),
        "cost": message.get("cost") or {"usd": 0.0, "source": "unknown"},
    }
    if notes:
        doc["warnings"] = notes
    seal(doc, ("report", "citations"))
    if found:
        doc["injection_flagged"] = True
        doc["injection_warnings"] = found
    meta = {"backend": "perplexity", "api": message.get("api"), "model": message.get("model"),
            "confidence": "MEDIUM-HIGH", "cache_hit": bool(message.get("cacheHit")),
            "fallback": bool(message.get("fallback")), "citations_total": len(citations),
            "citations_returned": len(shown)}
    meta.update(extra_meta or {})
    doc["metadata"] = meta
    doc = fit_text(doc, ("report",), max_tokens)  # cuts inside the fence, never through it
    if meta.get("truncated"):
        meta["more"] = f"gsd-research jobs result {job_id} --max-tokens {max(4000, 2 * max_tokens)}"
        doc = fit_text(doc, ("report",), max_tokens)
    meta["citations_returned"] = len(doc.get("citations") or [])  # none beside a repeat's reference
    return doc


def message_from(result: dict) -> dict:
    """The assistant message stored in conversation.json for a finished call."""
    from gsd_research.deep.store import now_iso

    cached = bool(result.get("cache_hit"))
    return {"role": "assistant", "content": result.get("report") or "", "timestamp": now_iso(),
            "citations": result.get("citations") or [], "usage": result.get("usage") or {},
            "cost": {"usd": 0.0, "source": "cache"} if cached else result.get("cost"),
            "model": result.get("model"), "api": result.get("api"), "cacheHit": cached,
            "fallback": bool(result.get("fallback")), "warnings": result.get("warnings") or []}


def quoted(status: dict) -> str:
    import shlex

    return shlex.quote(str(status.get("query") or "QUERY"))


def terminal_error(store, job_id: str, status: dict):
    """The error of a job that ended without a report: JOB_FAILED (exit 5) with its cause, or JOB_CANCELLED."""
    from gsd_research.core.errors import JobCancelled, JobFailed, JobNotFound, ProviderError
    from gsd_research.deep.questions import resume_hint, revivable

    if status.get("status") == "cancelled":
        again = resume_hint(status) if revivable(status) else "Enqueue it again"
        return JobCancelled(f"Job {job_id} was cancelled", details={"conversation_id": job_id},
                            suggestions=[f"{again}: gsd-research deep {quoted(status)} --async"])
    if status.get("status") == "completed":  # completed, but the report in conversation.json is gone or damaged
        return JobNotFound(f"The report of job {job_id} is unreadable (its conversation.json is missing or damaged)",
                           details={"conversation_id": job_id},
                           suggestions=[f"Run the research again: gsd-research deep {quoted(status)} --async"])
    err = status.get("error") if isinstance(status.get("error"), dict) else {"message": str(status.get("error") or "")}
    remote_id = err.get("remote_id") or status.get("remoteId")
    cause = str(err.get("code") or ProviderError.code)  # the recorded attempt's code, as its error said it
    details = {"conversation_id": job_id, "cause": cause,
               "attempts": status.get("attempts"), "errors": status.get("errors") or []}
    if remote_id:
        details["remote_id"] = remote_id
    ask = f"{resume_hint(status)}: gsd-research deep {quoted(status)} --async"
    if err.get("retryAfter") and revivable(status):
        ask = f"After {err['retryAfter']}, a" + ask[1:]
    return JobFailed(f"Job {job_id} failed after {status.get('attempts', 0)} attempt(s): "
                     f"{cause}: {err.get('message', '')}"
                     + (f" (Perplexity request {remote_id})" if remote_id else ""),
                     details=details, suggestions=[f"gsd-research jobs status {job_id}", ask])
