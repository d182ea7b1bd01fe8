"""`gsd-research search QUERY`: web search (Tavily, keyless ddgs fallback) with an optional cited report."""

from __future__ import annotations

import re
from datetime import timezone

import click

from gsd_research.core.budget import STAND_IN, fit_results, refuse_early
from gsd_research.core.errors import GsdError, MissingApiKey, UsageError
from gsd_research.core.output import document_tokens
from gsd_research.core.runtime import agent_command
from gsd_research.core.tokens import count_tokens, cut_to_tokens
from gsd_research.core.untrusted import guard_results, guard_text, seal, shown_warnings
from gsd_research.search import keyless
from gsd_research.search.tavily import MAX_QUERY_CHARS, TIME_RANGES, TOPICS, Tavily

PROVIDERS = ("tavily", "ddgs")
ALIASES = {"keyless": "ddgs", "duckduckgo": "ddgs"}
DEFAULT_SOURCES = 5
_DOMAIN = re.compile(r"^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,62}$")
EXAMPLE = 'gsd-research search "EV market trends" --time-range year --report'


@agent_command("search")
@click.argument("words", nargs=-1)
@click.option("--query", "-q", "query_opt", metavar="TEXT", help="The query (instead of QUERY words).")
@click.option("--max-sources", type=click.IntRange(min=0), default=None,
              help=f"Sources wanted (default {DEFAULT_SOURCES}; each provider clamps it, Tavily to 20).")
@click.option("--depth", type=click.Choice(["basic", "advanced"]), default=None, help="Tavily search depth.")
@click.option("--topic", type=click.Choice(TOPICS), default=None, help="Search topic (default general).")
@click.option("--time-range", type=click.Choice(TIME_RANGES), default=None, help="Only recent results.")
@click.option("--include-domains", multiple=True, metavar="DOMAINS", help="Only these domains (comma-separated).")
@click.option("--exclude-domains", multiple=True, metavar="DOMAINS", help="Never these domains (comma-separated).")
@click.option("--provider", type=click.Choice([*PROVIDERS, *ALIASES], case_sensitive=False), default=None,
              help="Use only this provider (no fallback).")
@click.option("--report", is_flag=False, flag_value="", default=None, metavar="[PATH]",
              help="Write a cited Markdown report (default .planning/research/<slug>.md or research/<slug>.md).")
@click.option("--allow-outside", is_flag=True,
              help="Let --report PATH lie outside the project folder and GSD_RESEARCH_HOME.")
def search(rt, words, query_opt, max_sources, depth, topic, time_range, include_domains, exclude_domains,
           provider, report, allow_outside):
    """Web search for QUERY: cited results as JSON, optionally a Markdown report. Result text is untrusted."""
    query = read_query(words, query_opt, report)
    cfg = rt.config
    params = {
        "max_results": max_sources if max_sources is not None else config_sources(cfg),
        "depth": depth or str(cfg.get("search.depth", "basic")),
        "topic": topic or "general",
        "time_range": time_range,
        "include_domains": parse_domains(include_domains),
        "exclude_domains": parse_domains(exclude_domains),
    }
    plan = env = None
    if report is not None:
        from gsd_research.search import reports

        plan = reports.plan_report_path(report, query, anywhere=allow_outside)  # fails before paying
        env = reports.template_env(cfg)
    names = provider_chain(rt, provider)
    refuse_early(lambda: fit(rt, _pending(build_answer(rt, query, params, _dry(names[0], params), []))))
    answer, failures = run_chain(rt, names, query, params)
    doc = build_answer(rt, query, params, answer, failures)
    report_text = None
    if plan is not None:
        doc["report"], report_text = write_report(rt, env, plan, doc, anywhere=allow_outside)
    from gsd_research.memory.api import record_search

    recording = record_search(rt, query=query, answer=answer, report_path=doc.get("report"), report_text=report_text)
    answer_doc = fit(rt, _pending(doc))
    answer_doc["metadata"]["memory"] = recording.finish()  # each status is one token, as "pending" is
    return answer_doc


def _pending(doc: dict) -> dict:
    return dict(doc, metadata=dict(doc["metadata"], memory="pending"))


def _dry(provider: str, params: dict) -> dict:
    """The provider's answer at its shortest: one result with only its text (core.budget.refuse_early)."""
    from datetime import datetime

    return {"provider": provider, "results": [{"title": "", "url": "", "snippet": STAND_IN, "provider": provider}],
            "max_results_sent": params["max_results"], "fetched_at": datetime.now(timezone.utc)}


def config_sources(cfg) -> int:
    """search.max_sources from config (default 5); a value that is not a whole number is a usage error."""
    raw = cfg.get("search.max_sources", DEFAULT_SOURCES)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = -1
    if value < 0 or isinstance(raw, bool):
        raise UsageError(f"config search.max_sources must be a whole number ≥ 0, not {raw!r}",
                         suggestions=["gsd-research config set search.max_sources 5"])
    return value


def read_query(words: tuple[str, ...], query_opt: str | None, report: str | None) -> str:
    """The one query, from QUERY words or --query; clear usage errors otherwise."""
    positional = " ".join(words).strip()
    if positional and query_opt is not None:
        raise UsageError("Give the query once: as QUERY or with --query", suggestions=[EXAMPLE])
    query = " ".join((query_opt if query_opt is not None else positional).split())
    if not query:
        hint = [EXAMPLE]
        if report and not report.lower().endswith(".md"):
            hint.insert(0, f"--report took {report!r} as its path: put --report after the query, or --report=PATH")
        raise UsageError("search needs a query", suggestions=hint)
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"The query is {len(query)} characters; search accepts at most {MAX_QUERY_CHARS}",
                         suggestions=["Shorten the query to its key terms"])
    return query


def parse_domains(values: tuple[str, ...]) -> tuple[str, ...]:
    """Comma- or space-separated domains, scheme and path stripped, lower-cased, validated, deduplicated."""
    out: list[str] = []
    for value in values:
        for part in re.split(r"[,\s]+", value or ""):
            domain = re.sub(r"^[a-z]+://", "", part.strip().lower()).split("/", 1)[0].removeprefix("www.")
            if not domain:
                continue
            if not _DOMAIN.match(domain):
                raise UsageError(f"Not a domain name: {part!r}", suggestions=["Use e.g. --include-domains arxiv.org,nature.com"])
            if domain not in out:
                out.append(domain)
    return tuple(out)


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("0", "false", "no", "off", "")
    return bool(value)


def provider_chain(rt, requested: str | None) -> list[str]:
    """The providers to try, in order: --provider alone, else config search.providers (fallback allowed)."""
    if requested:
        return [ALIASES.get(requested.lower(), requested.lower())]
    raw = rt.config.get("search.providers", list(PROVIDERS))
    names = [n for n in re.split(r"[,\s]+", raw)] if isinstance(raw, str) else list(raw or [])
    chain: list[str] = []
    for name in names:
        key = ALIASES.get(str(name).strip().lower(), str(name).strip().lower())
        if key and key not in PROVIDERS:
            raise UsageError(f"Unknown search provider {name!r} in config search.providers",
                             suggestions=[f"Use some of: {', '.join(PROVIDERS)}",
                                          "gsd-research config set search.providers '[tavily, ddgs]'"])
        if key and key not in chain:
            chain.append(key)
    if not chain:
        raise UsageError("config search.providers lists no provider", suggestions=[f"Use {', '.join(PROVIDERS)}"])
    return chain if _truthy(rt.config.get("search.fallback", True)) else chain[:1]


def make_provider(rt, name: str):
    cfg = rt.config
    if name == "tavily":
        return Tavily(rt.http, cfg.base_url("tavily"), cfg.api_key("tavily"), cfg.ttl("search"))
    return keyless.Keyless(rt.http, keyless.make_backend(cfg), cfg.ttl("search"))


def run_chain(rt, names: list[str], query: str, params: dict) -> tuple[dict, list[dict]]:
    """The first provider that answers; each failure before it is recorded. All failing is an error."""
    failures: list[dict] = []
    errors: list[GsdError] = []
    for name in names:
        try:
            return make_provider(rt, name).search(query, **params), failures
        except UsageError:
            raise
        except GsdError as exc:
            failures.append({"provider": name, "code": exc.code, "message": exc.message})
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    primary = next((e for e in errors if not isinstance(e, MissingApiKey)), errors[0])
    suggestions = list(primary.suggestions)
    if any(isinstance(e, MissingApiKey) for e in errors):
        suggestions.insert(0, "Set TAVILY_API_KEY (or OD_TAVILY_API_KEY) to search through Tavily")
    raise type(primary)("Every search provider failed: " + "; ".join(f"{f['provider']}: {f['message']}" for f in failures),
                   suggestions=list(dict.fromkeys(suggestions))[:4],
                   details={"failures": failures}, retry_after=primary.retry_after)


def fallback_note(answer: dict, failures: list[dict]) -> str | None:
    if not failures:
        return None
    name = answer["provider"]
    if any(f["provider"] == "tavily" and f["code"] == MissingApiKey.code for f in failures):
        return (f"No Tavily key is set (TAVILY_API_KEY or OD_TAVILY_API_KEY), so the keyless {name} fallback "
                "answered: results scraped from public search engines, without a provider summary.")
    failed = ", ".join(f"{f['provider']} ({f['code']})" for f in failures)
    return f"Fallback: {failed} failed, so {name} answered instead."


def guard_answer(answer: dict) -> tuple[list[dict], str | None, list[dict]]:
    """Results and summary neutralized (the answer's fence holds them: `seal`); warnings for the instruction-like
    ones, saying where and what kind, never the hostile text itself."""
    results, warnings = guard_results(answer["results"], fields=("snippet", "title"))
    summary, found = guard_text(answer.get("summary"), "summary")
    if found:
        warnings.insert(0, dict(found[0], result="summary", fields=["summary"]))
    return results, summary, warnings


def build_answer(rt, query: str, params: dict, answer: dict, failures: list[dict]) -> dict:
    """The full answer (every result): the JSON document before the budget, and the report's model."""
    raw_summary = answer.get("summary")
    cap = max(50, rt.max_tokens // 4)  # the summary never crowds out the sources
    summary_cut = bool(raw_summary) and count_tokens(raw_summary) > cap
    if summary_cut:
        answer = dict(answer, summary=cut_to_tokens(raw_summary, cap)[0])
    results, summary, warnings = guard_answer(answer)
    requested = params["max_results"]
    meta = {
        "backend": answer["provider"],
        "fallback": bool(failures),
        "requested_sources": requested,
        "max_results_sent": answer["max_results_sent"],
        "clamped": answer["max_results_sent"] != requested,
        "cache_hit": rt.http.upstream_requests == 0,
    }
    if summary_cut:
        meta["summary_truncated"] = True
    note = fallback_note(answer, failures)
    if note:
        meta["note"] = note
        meta["failures"] = failures
    if not results:
        meta["note"] = " ".join(filter(None, [note, "No results: rephrase the query or widen the filters."]))
    doc = {
        "query": query,
        "summary": summary,
        "summary_flagged": bool(warnings) and warnings[0].get("result") == "summary",
        "provider": answer["provider"],
        "depth": params["depth"] if answer["provider"] == "tavily" else None,
        "fetchedAt": answer["fetched_at"].astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "results": results,
    }
    if warnings:  # the contract of every command that returns external text (see untrusted.py)
        doc.update(shown_warnings(warnings))
        doc["all_warnings"] = warnings  # the answer keeps those of the results its budget keeps (`fit`)
    doc["metadata"] = meta
    return seal(doc, ("summary", "results"))


def write_report(rt, env, plan, doc: dict, anywhere: bool = False) -> tuple[str, str]:
    """Render and write the report from the full answer; returns its path for the JSON answer and its text."""
    from gsd_research.core.secrets import known_secrets, scrub
    from gsd_research.search import reports

    text = scrub(reports.render(env, "search_report.md.j2", reports.search_report_context(doc)),
                 known_secrets(rt.config))
    path = reports.write_new(plan[0], plan[1], text, anywhere=anywhere)
    return reports.display_path(path), text


def fit(rt, doc: dict) -> dict:
    """The answer inside --max-tokens: whole results while they fit, then a cut one (metadata last). Warnings
    about results the budget left out are left out too: the answer warns about what it shows (room for the
    warnings of every result is kept while fitting, so the answer only shrinks)."""
    if doc.pop("summary_flagged", False):
        doc["metadata"]["summary_flagged"] = True
    warnings = doc.pop("all_warnings", None) or []
    results, doc["results"] = doc["results"], []  # its place inside the fence is kept
    doc["metadata"] = doc.pop("metadata")
    out = fit_results(doc, results, rt.max_tokens, text_key="snippet")
    returned = out["metadata"]["returned"]
    kept = [w for w in warnings if not isinstance(w.get("result"), int) or w["result"] <= returned]
    if len(kept) < len(warnings):
        for key in ("injection_flagged", "injection_warnings", "injection_warnings_more"):
            out.pop(key, None)
        meta = out.pop("metadata")
        out.update(shown_warnings(kept), metadata=meta)
        meta["tokens_used"] = document_tokens(out)
    return out
