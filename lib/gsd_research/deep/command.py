"""`gsd-research deep QUERY`: exhaustive research through Perplexity, blocking or as a background job."""

from __future__ import annotations

import signal

import click

from gsd_research.core.budget import STAND_IN, check_echo, refuse_early
from gsd_research.core.errors import CallInterrupted, MissingApiKey, UsageError
from gsd_research.core.runtime import AgentCommand, agent_command
from gsd_research.deep import result_cache
from gsd_research.deep.cost import price_table
from gsd_research.deep.guard import admission, cost_warnings
from gsd_research.deep.settings import EFFORTS, load
from gsd_research.deep.signals import NOTHING_SENT, Interrupted, deferred_signals, sigterm_interrupts

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
              help="Seconds a blocking call waits for the report before answering TIMEOUT with the job's id "
                   "(the job goes on in the background). Each attempt of the job itself may take "
                   "deep.timeout / PERPLEXITY_POLLING_TIMEOUT_MS (600 s), whatever the wait.")
def deep(rt, query: tuple[str, ...], effort: str, run_async: bool | None, priority: int, timeout: float | None):
    """Research QUERY across many sources; a report with numbered citations, usage and cost.

    Blocking and --async run the same persisted job; asking a question that is already queued, running,
    or answered within the deep cache TTL attaches to that job instead of paying again
    (metadata.attached_to_job), as does asking again after a job ended before its paid request answered."""
    try:
        with sigterm_interrupts():
            return _deep(rt, " ".join(query).strip(), effort, run_async, priority, timeout)
    except Interrupted:  # the paths that create a job answer for themselves once it exists
        raise CallInterrupted(signal.SIGTERM, NOTHING_SENT) from None
    except KeyboardInterrupt:
        raise CallInterrupted(signal.SIGINT, NOTHING_SENT) from None


def _deep(rt, text: str, effort: str, run_async: bool | None, priority: int, timeout: float | None) -> dict:
    if not text:
        raise UsageError("deep needs a query", suggestions=['gsd-research deep "WebGPU browser support and production readiness"'])
    settings = load(rt.config)
    if not rt.config.api_key("perplexity"):
        raise MissingApiKey("Deep research needs a Perplexity API key",
                            suggestions=["export PERPLEXITY_API_KEY=pplx-...",
                                         "or gsd-research config set providers.perplexity.api_key pplx-..."])
    run_async = settings.async_default if run_async is None else run_async
    expected, warnings = cost_warnings(settings, price_table(rt.config), effort)
    if run_async and timeout is not None:
        warnings.append("--timeout bounds only how long a blocking call waits; a queued job's attempts take "
                        "deep.timeout / PERPLEXITY_POLLING_TIMEOUT_MS")
    ctx = {"text": text, "effort": effort, "settings": settings, "expected": expected, "warnings": warnings,
           "wait": timeout, "timeout": settings.timeout, "priority": priority, "ttl": rt.config.ttl("deep"),
           "key": result_cache.key(text, effort, settings.model)}
    cached = None if rt.no_cache else result_cache.get(text, effort, settings.model, ctx["ttl"])
    if cached is not None:
        return _finished(rt, ctx, dict(cached, cache_hit=True))
    check_echo(text, rt.max_tokens, share=0.7 if run_async else 0.5)  # the job id answer repeats the query too
    if run_async:
        return _enqueue(rt, ctx)
    from gsd_research.deep.files import new_id
    from gsd_research.deep.render import message_from

    refuse_early(lambda: _render(rt, ctx, new_id(), message_from({"report": STAND_IN, "model": settings.model}),
                                 {"mode": "blocking"}))
    return _blocking(rt, ctx)


def find_or_create(rt, ctx: dict, mode: str) -> tuple[bool, str, dict, object]:
    """(created, job id, status, run lock) of the job for this question, decided under the question's
    lock: the job already asking it (attached), or a new one (queued, or claimed by a blocking caller).
    Identical calls made at once get one job and pay once."""
    from gsd_research.deep.questions import find, question_lock
    from gsd_research.deep.store import JobStore

    s, store = ctx["settings"], JobStore()
    params = {"effort": ctx["effort"], "model": s.model, "timeout": ctx["timeout"], "no_cache": rt.no_cache}
    with question_lock(store, ctx["key"]):
        found = find(store, ctx["key"], ctx["ttl"], finished_too=not rt.no_cache, params=params, mode=mode)
        if found is not None:
            return False, found[0], found[1], None
        with admission(s, price_table(rt.config), ctx["effort"]):  # attaching pays nothing; a queued job holds its cost
            if mode == "async":
                job_id, status = store.create(ctx["text"], params, priority=ctx["priority"], key=ctx["key"])
                return True, job_id, status, None
            return True, *store.create_claimed(ctx["text"], params, priority=ctx["priority"], key=ctx["key"])


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


def _enqueue(rt, ctx: dict) -> dict:
    found = None
    try:
        with deferred_signals():  # the job and its index are written whole
            found = find_or_create(rt, ctx, "async")
        return _queued_answer(rt, ctx, *found)
    except (Interrupted, KeyboardInterrupt):
        if found is None:
            raise
        return _queued_answer(rt, ctx, *found)  # interrupted once the job exists: it is queued, say so


def _queued_answer(rt, ctx: dict, created: bool, job_id: str, status: dict, _lock) -> dict:
    from gsd_research.deep.queue import ensure_worker

    if not created:
        return _attached(rt, ctx, job_id, status)
    return _queued_doc(ctx, job_id, status, ensure_worker(ctx["settings"].autostart), ctx["priority"])


def _attached(rt, ctx: dict, job_id: str, status: dict) -> dict:
    """The job already asking this question: its report when done, else its id to wait on."""
    from gsd_research.deep.store import JobStore

    if status.get("status") == "completed":
        message = JobStore().has_answer(job_id)
        return _render(rt, ctx, job_id, message, {"mode": "attached", "attached_to_job": job_id})
    from gsd_research.deep.queue import ensure_worker

    doc = _queued_doc(ctx, job_id, status, ensure_worker(ctx["settings"].autostart), status.get("priority", 0))
    doc["note"] = f"{ATTACHED_NOTE if not status.get('revivedAt') else revived_note(status)} " \
                  + doc["note"].split(": ", 1)[1]
    doc["metadata"]["attached_to_job"] = job_id
    return doc


ATTACHED_NOTE = "This question is already queued or running as this job: waiting on it costs nothing more."


def revived_note(status: dict) -> str:
    from gsd_research.deep.perplexity import shown_id

    remote = shown_id(status.get("remoteId"))
    fetch = (f"fetch the report of the request it paid for (Perplexity request {remote})"
             if remote else "send its request again under the same idempotency key")
    return (f"This question's job ended before its report arrived: it is queued again to {fetch}; "
            "nothing is paid twice.")


def _blocking(rt, ctx: dict) -> dict:
    from gsd_research.deep.foreground import Foreground

    def render(job_id: str, message: dict, meta: dict) -> dict:
        try:
            return _render(rt, ctx, job_id, message, {"mode": "blocking", **meta})
        except UsageError as exc:  # paid for and kept: reading it at a larger budget costs nothing
            exc.suggestions = [f"gsd-research jobs result {job_id} --max-tokens {max(4000, 2 * rt.max_tokens)}"]
            raise

    return Foreground(rt, ctx, render).run(lambda: find_or_create(rt, ctx, "blocking"))


def _render(rt, ctx: dict, job_id: str, message: dict, meta: dict) -> dict:
    from gsd_research.deep.render import answer_payload

    return _with_disclaimer(answer_payload(ctx["text"], job_id, message, rt.max_tokens, warnings=ctx["warnings"],
                                           extra_meta={**meta, "effort": ctx["effort"]}))


def _finished(rt, ctx: dict, result: dict) -> dict:
    """A cached answer, rendered from the conversation that holds it (stored as one the first time only)."""
    from gsd_research.deep.questions import question_lock
    from gsd_research.deep.render import message_from
    from gsd_research.deep.store import ID_PATTERN, JobStore
    from gsd_research.memory.api import record_deep

    store = JobStore()
    message = message_from(result)
    job_id = str(result.get("conversation_id") or "")
    if not ID_PATTERN.match(job_id) or store.has_answer(job_id) is None:
        model = result.get("model") or ctx["settings"].model
        with question_lock(store, ctx["key"]):
            again = result_cache.get(ctx["text"], ctx["effort"], ctx["settings"].model, ctx["ttl"]) or {}
            job_id = str(again.get("conversation_id") or "")
            if not ID_PATTERN.match(job_id) or store.has_answer(job_id) is None:  # still none: store it once
                job_id, _ = store.create(ctx["text"], {"effort": ctx["effort"], "model": model}, answer=message)
                result_cache.link(ctx["text"], ctx["effort"], ctx["settings"].model, job_id)
    recording = record_deep(rt.config, query=ctx["text"], job_id=job_id, message=message)
    doc = _render(rt, ctx, job_id, message, {"mode": "cache"})
    recording.finish()
    return doc
