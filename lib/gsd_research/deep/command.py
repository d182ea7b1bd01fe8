"""`gsd-research deep QUERY`: exhaustive research through Perplexity, blocking or as a background job."""

from __future__ import annotations

import click

from gsd_research.core.budget import check_echo
from gsd_research.core.errors import MissingApiKey, UsageError
from gsd_research.core.runtime import agent_command
from gsd_research.deep import result_cache
from gsd_research.deep.cost import price_table
from gsd_research.deep.guard import check_budget, cost_warnings
from gsd_research.deep.settings import EFFORTS, load

POLL_HINT = "gsd-research jobs wait {id} --timeout 100"


@agent_command("deep")
@click.argument("query", nargs=-1, required=True)
@click.option("--effort", type=click.Choice(EFFORTS), default="medium", show_default=True,
              help="Reasoning effort: deeper research costs more.")
@click.option("--async/--blocking", "run_async", default=None,
              help="Queue a background job and return its id at once (default: PERPLEXITY_ENABLE_ASYNC_DEEP_RESEARCH).")
@click.option("--priority", type=int, default=0, show_default=True, help="Queue priority: higher runs first.")
@click.option("--timeout", type=click.FloatRange(min=1), default=None,
              help="Seconds to wait for the research (default PERPLEXITY_POLLING_TIMEOUT_MS, 600 s).")
def deep(rt, query: tuple[str, ...], effort: str, run_async: bool | None, priority: int, timeout: float | None):
    """Research QUERY across many sources; a report with numbered citations, usage and cost."""
    text = " ".join(query).strip()
    if not text:
        raise UsageError("deep needs a query", suggestions=['gsd-research deep "WebGPU browser support 2026"'])
    settings = load(rt.config)
    if not rt.config.api_key("perplexity"):
        raise MissingApiKey("Deep research needs a Perplexity API key",
                            suggestions=["export PERPLEXITY_API_KEY=pplx-...",
                                         "or gsd-research config set providers.perplexity.api_key pplx-..."])
    check_budget(settings)
    expected, warnings = cost_warnings(settings, price_table(rt.config), effort)
    ctx = {"text": text, "effort": effort, "settings": settings, "expected": expected, "warnings": warnings,
           "timeout": timeout or settings.timeout}
    cached = None if rt.no_cache else result_cache.get(text, effort, settings.model, rt.config.ttl("deep"))
    if cached is not None:
        return _finished(rt, ctx, dict(cached, cache_hit=True))
    if settings.async_default if run_async is None else run_async:
        check_echo(text, rt.max_tokens, share=0.7)  # the job id answer repeats the query too
        return _enqueue(rt, ctx, priority)
    check_echo(text, rt.max_tokens)
    return _blocking(rt, ctx)


def _enqueue(rt, ctx: dict, priority: int) -> dict:
    from gsd_research.deep.queue import enqueue

    s = ctx["settings"]
    params = {"effort": ctx["effort"], "model": s.model, "timeout": ctx["timeout"], "no_cache": rt.no_cache}
    job_id, status, worker = enqueue(ctx["text"], params, priority, autostart=s.autostart)
    doc = {
        "query": ctx["text"], "conversation_id": job_id, "status": status["status"], "priority": priority,
        "effort": ctx["effort"],
        "estimated_cost": {"usd": ctx["expected"], "source": "price table"},
        "worker": worker,
        "next": {"wait": POLL_HINT.format(id=job_id), "status": f"gsd-research jobs status {job_id}",
                 "result": f"gsd-research jobs result {job_id}"},
        "note": "Queued. Deep research takes minutes: run the wait command (it returns the report when done, "
                "or status 'running' after --timeout; then run it again).",
    }
    if ctx["warnings"]:
        doc["warnings"] = ctx["warnings"]
    if not worker["running"]:
        doc["warnings"] = [*doc.get("warnings", []), "No worker is running (deep.autostart is off): "
                           "run gsd-research jobs worker"]
    doc["metadata"] = {"backend": "perplexity", "mode": "async", "timeout_s": ctx["timeout"]}
    return doc


def _blocking(rt, ctx: dict) -> dict:
    from gsd_research.deep.research import DeepResearch

    research = DeepResearch(rt, ctx["settings"])
    result = research.priced(research.blocking(ctx["text"], ctx["effort"], ctx["timeout"]))
    return _finished(rt, ctx, result, research)


def _finished(rt, ctx: dict, result: dict, research=None) -> dict:
    """Store a finished answer as a completed conversation and render it (nothing is stored on errors)."""
    from gsd_research.deep.render import answer_payload, message_from
    from gsd_research.deep.store import JobStore

    params = {"effort": ctx["effort"], "model": result.get("model") or ctx["settings"].model}
    message = message_from(result)
    job_id, _ = JobStore().create(ctx["text"], params, answer=message)
    if research is not None:
        research.record(result, "deep", ref=job_id)
        result_cache.put(ctx["text"], ctx["effort"], ctx["settings"].model, result)
    return answer_payload(ctx["text"], job_id, message, rt.max_tokens, warnings=ctx["warnings"],
                          extra_meta={"mode": "cache" if result.get("cache_hit") else "blocking",
                                      "effort": ctx["effort"]})
