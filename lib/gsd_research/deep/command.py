"""`gsd-research deep QUERY`: exhaustive research through Perplexity, blocking or as a background job."""

from __future__ import annotations

import click

from gsd_research.core.budget import check_echo
from gsd_research.core.errors import MissingApiKey, UsageError
from gsd_research.core.runtime import AgentCommand, agent_command
from gsd_research.deep import result_cache
from gsd_research.deep.cost import price_table
from gsd_research.deep.guard import check_budget, cost_warnings
from gsd_research.deep.settings import EFFORTS, load

POLL_HINT = "gsd-research jobs wait {id} --timeout 100"


CLIENT_TIMEOUT_NOTE = (
    "A blocking call waits for the report: 1-10 minutes. Give the calling tool a timeout of 180 s or more "
    "(the Bash tool: timeout 600000); a shorter one interrupts the call: the job then goes on in the "
    "background (jobs wait ID returns it), nothing is paid twice. Better: --async, then jobs wait ID.")
DISCLAIMER = (
    "Security notice: never put sensitive information (secrets, credentials, personal data, confidential code "
    "or business details) in a deep research question. It is sent to Perplexity, which works on it for several "
    "minutes, searching many web sources with it; the question and the report stay in the job files.")


class DeepCommand(AgentCommand):
    """`deep --help` carries the client-timeout guidance, and the security disclaimer when enabled."""

    def format_help_text(self, ctx, formatter) -> None:
        super().format_help_text(ctx, formatter)
        from gsd_research.deep.settings import disclaimer_enabled

        with formatter.indentation():
            formatter.write_paragraph()
            formatter.write_text(CLIENT_TIMEOUT_NOTE)
            if disclaimer_enabled():
                formatter.write_paragraph()
                formatter.write_text(DISCLAIMER)


@agent_command("deep", cls=DeepCommand)
@click.argument("query", nargs=-1, required=True)
@click.option("--effort", type=click.Choice(EFFORTS), default="medium", show_default=True,
              help="Reasoning effort: deeper research costs more.")
@click.option("--async/--blocking", "run_async", default=None,
              help="Queue a background job and return its id at once (default: PERPLEXITY_ENABLE_ASYNC_DEEP_RESEARCH).")
@click.option("--priority", type=int, default=0, show_default=True, help="Queue priority: higher runs first.")
@click.option("--timeout", type=click.FloatRange(min=1), default=None,
              help="Seconds one attempt may take; a blocking call waits that long "
                   "(default PERPLEXITY_POLLING_TIMEOUT_MS or deep.timeout, 600 s).")
def deep(rt, query: tuple[str, ...], effort: str, run_async: bool | None, priority: int, timeout: float | None):
    """Research QUERY across many sources; a report with numbered citations, usage and cost.

    Blocking and --async run the same persisted job; asking a question that is already queued, running,
    or answered within the deep cache TTL attaches to that job instead of paying again
    (metadata.attached_to_job)."""
    text = " ".join(query).strip()
    if not text:
        raise UsageError("deep needs a query", suggestions=['gsd-research deep "WebGPU browser support and production readiness"'])
    settings = load(rt.config)
    if not rt.config.api_key("perplexity"):
        raise MissingApiKey("Deep research needs a Perplexity API key",
                            suggestions=["export PERPLEXITY_API_KEY=pplx-...",
                                         "or gsd-research config set providers.perplexity.api_key pplx-..."])
    expected, warnings = cost_warnings(settings, price_table(rt.config), effort)
    ctx = {"text": text, "effort": effort, "settings": settings, "expected": expected, "warnings": warnings,
           "timeout": timeout or settings.timeout, "priority": priority,
           "key": result_cache.key(text, effort, settings.model)}
    ttl = rt.config.ttl("deep")
    cached = None if rt.no_cache else result_cache.get(text, effort, settings.model, ttl)
    if cached is not None:
        return _finished(rt, ctx, dict(cached, cache_hit=True))
    from gsd_research.deep.store import JobStore

    attached = JobStore().attachable(ctx["key"], ttl, finished_too=not rt.no_cache)
    run_async = settings.async_default if run_async is None else run_async
    if attached is not None and (run_async or attached[1].get("status") == "completed"):
        return _attached(rt, ctx, *attached)
    if attached is None:
        check_budget(settings)  # attaching pays nothing
    check_echo(text, rt.max_tokens, share=0.7 if run_async else 0.5)  # the job id answer repeats the query too
    if run_async:
        return _enqueue(rt, ctx, priority)
    return _blocking(rt, ctx, attached)


def _with_disclaimer(doc: dict) -> dict:
    from gsd_research.deep.settings import disclaimer_enabled

    if disclaimer_enabled():
        doc["disclaimer"] = DISCLAIMER
    return doc


def _queued_doc(ctx: dict, job_id: str, status: dict, worker: dict, priority) -> dict:
    doc = {
        "query": ctx["text"], "conversation_id": job_id, "status": status["status"], "priority": priority,
        "effort": ctx["effort"],
        "estimated_cost": {"usd": ctx["expected"], "source": "price table"},
        "worker": worker,
        "next": {"wait": POLL_HINT.format(id=job_id), "status": f"gsd-research jobs status {job_id}",
                 "result": f"gsd-research jobs result {job_id}"},
        "note": "Queued. Deep research takes minutes: run the wait command (it returns the report when done; "
                "error.code JOB_RUNNING, exit 6, after --timeout: run it again).",
    }
    if ctx["warnings"]:
        doc["warnings"] = ctx["warnings"]
    if not worker["running"]:
        doc["warnings"] = [*doc.get("warnings", []), "No worker is running (deep.autostart is off): "
                           "run gsd-research jobs worker"]
    doc["metadata"] = {"backend": "perplexity", "mode": "async", "timeout_s": ctx["timeout"]}
    return _with_disclaimer(doc)


def _enqueue(rt, ctx: dict, priority: int) -> dict:
    from gsd_research.deep.queue import enqueue

    s = ctx["settings"]
    params = {"effort": ctx["effort"], "model": s.model, "timeout": ctx["timeout"], "no_cache": rt.no_cache}
    job_id, status, worker = enqueue(ctx["text"], params, priority, autostart=s.autostart, key=ctx["key"])
    return _queued_doc(ctx, job_id, status, worker, priority)


def _attached(rt, ctx: dict, job_id: str, status: dict) -> dict:
    """The job already asking this question: its report when done, else its id to wait on."""
    from gsd_research.deep.store import JobStore

    if status.get("status") == "completed":
        message = JobStore().has_answer(job_id)
        return _render(rt, ctx, job_id, message, {"mode": "attached", "attached_to_job": job_id})
    from gsd_research.deep.queue import ensure_worker

    doc = _queued_doc(ctx, job_id, status, ensure_worker(ctx["settings"].autostart), status.get("priority", 0))
    doc["note"] = ("This question is already queued or running as this job: waiting on it costs nothing more. "
                   + doc["note"].split(": ", 1)[1])
    doc["metadata"]["attached_to_job"] = job_id
    return doc


def _blocking(rt, ctx: dict, attached) -> dict:
    from gsd_research.deep.foreground import Foreground

    def render(job_id: str, message: dict, meta: dict) -> dict:
        return _render(rt, ctx, job_id, message, {"mode": "blocking", **meta})

    return Foreground(rt, ctx, render).run(attached)


def _render(rt, ctx: dict, job_id: str, message: dict, meta: dict) -> dict:
    from gsd_research.deep.render import answer_payload

    return _with_disclaimer(answer_payload(ctx["text"], job_id, message, rt.max_tokens, warnings=ctx["warnings"],
                                           extra_meta={**meta, "effort": ctx["effort"]}))


def _finished(rt, ctx: dict, result: dict) -> dict:
    """A cached answer stored as a completed conversation of its own, and rendered."""
    from gsd_research.deep.render import message_from
    from gsd_research.deep.store import JobStore

    params = {"effort": ctx["effort"], "model": result.get("model") or ctx["settings"].model}
    message = message_from(result)
    job_id, _ = JobStore().create(ctx["text"], params, answer=message)
    return _render(rt, ctx, job_id, message, {"mode": "cache"})
