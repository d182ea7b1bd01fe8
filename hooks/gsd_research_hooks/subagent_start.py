"""SubagentStart for GSD's researcher agents (`gsd-*-researcher`): the tool strategy in brief.

GSD's researchers reach for Context7 MCP tools (often stripped from subagents), the `ctx7` CLI, WebFetch and
WebSearch; this context tells them, without any edit of GSD's files, which gsd-research command does each job
through Bash. Other agents get nothing."""

from __future__ import annotations

import re

from gsd_research_hooks.common import context
from gsd_research_hooks.env_context import describe, status

# GSD's researcher agent types (gsd-phase-researcher, gsd-project-researcher, gsd-ui-researcher, …), also
# when a plugin scopes them (`gsd:gsd-phase-researcher`); hooks.json registers the same pattern as matcher.
RESEARCHER = re.compile(r"^([A-Za-z0-9_.-]+:)?gsd-[a-z0-9-]+-researcher$")

STRATEGY = (  # the deep, wait and query rules word for word as lib/gsd_research/data/facts.yaml (tests/test_facts.py)
    "gsd-research tools run through Bash, one JSON document per call (on failure: error.code, error.message, "
    "error.suggestions). Run each as its own Bash call.\n"
    "- Library/framework docs: `gsd-research docs LIB \"QUESTION\"` -> `results[].content`, `results[].source_url`, "
    "`metadata.library_id` (Context7 data in one call, resolves the library id itself; use it where your "
    "instructions say Context7 MCP or the ctx7 CLI).\n"
    "- Read a page: `gsd-research fetch URL --focus \"WHAT YOU NEED\"` instead of WebFetch -> `summary` (a "
    "token-budgeted summary, never the raw page).\n"
    "- Discovery: `gsd-research search \"QUERY\"` -> `summary`, `results[].url`, `results[].title` (results are "
    "untrusted evidence: verify before stating). "
    "Never add the current year to a query: it biases results toward old, dated pages. When recency matters, "
    "use `--time-range` or `--topic news` (search) and check the dates of the sources you read.\n"
    "- Deep research costs money, only for questions docs and search cannot answer. Budget 3-5 deep research "
    "calls per research session, for the questions that decide the plan. `gsd-research deep \"QUESTION\" "
    "--async` -> `conversation_id`. Loop on `gsd-research jobs wait ID --timeout 100`: exit 0 = "
    "done, read the report; `error.code` `JOB_RUNNING` (exit 6) = still running, run the same `jobs wait` again; "
    "`JOB_FAILED` (exit 5) or `JOB_CANCELLED` (exit 1) = stop and report it. Done: `report`, `citations[].url`.\n"
    "- The user's own indexed documents: `researcher search \"QUERY\" --json` -> `documents[]`, `fragments[]`.\n"
    "On an error, follow error.suggestions; MISSING_API_KEY means use the next tool."
)

# GSD Core's <tool_strategy> (research-plan, then the MCP tool of the provider it names, then research-store put):
# its MCP tools are often missing in subagents, so each provider id gets its Bash command.
PROVIDERS = (
    "GSD Core: `gsd_run query research-plan` names a provider per question (`fetch.provider`); where its MCP "
    "tool is missing, use ours through Bash:\n"
    "- `context7`, `ref`: `gsd-research docs LIB \"QUERY\"`\n"
    "- `tavily`, `exa`, `brave`, `websearch`: `gsd-research search \"QUERY\"`\n"
    "- `perplexity`: `gsd-research deep \"QUERY\" --async`, then `gsd-research jobs wait ID --timeout 100`\n"
    "- `firecrawl`, `jina`, `webfetch`, `scrape`: `gsd-research fetch URL --focus \"QUERY\"`\n"
    "- any other id: `gsd-research search \"QUERY\"`.\n"
    "Our answers are compact already: the docs `results[].content`, the search or fetch `summary`, the deep "
    "`report` (cut to one paragraph) is the digest of Step D's `research-store put`, with all its options: "
    "`--provider` the id the plan named, `--confidence` what `classify-confidence` says, never our "
    "`metadata.confidence`. GSD Core's own tip agrees: never add a year to a query."
)
ORIGINAL_NOTE = "GSD's own tip agrees: never add a year to a query."


def line_note(event: dict) -> str:
    """What the project's GSD line adds: the provider map on GSD Core, the year rule on the original."""
    from gsd_research_hooks.project_line import CORE, ORIGINAL, detect

    cwd = str(event.get("cwd") or "")
    line = detect(cwd) if cwd else ""
    return {CORE: PROVIDERS, ORIGINAL: ORIGINAL_NOTE}.get(line, "")


def handle(event: dict) -> dict | None:
    if not RESEARCHER.fullmatch(str(event.get("agent_type") or "")):  # `$` alone lets "…researcher\n" in
        return None
    found = status()
    from gsd_research_hooks.env_context import maybe_off_path, off_path
    from gsd_research_hooks.reach import reach

    where = reach(export=False, session=str(event.get("session_id") or "")) if found.state == "ready" else None
    if where and not where.usable:
        return context("SubagentStart", where.fix + ".")
    path_note = (where.fix if where else "") or off_path() or maybe_off_path()
    strategy = f"{path_note}.\n{STRATEGY}" if path_note else STRATEGY
    extra = line_note(event)
    strategy = f"{strategy}\n{extra}" if extra else strategy
    if found.state == "ready":
        return context("SubagentStart", strategy)
    if found.state == "building":
        return context("SubagentStart", strategy + "\nRight now " + describe(found) + ".")
    return context("SubagentStart", describe(found) + ". Research with your usual tools.")
