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
    "gsd-research tools are available through Bash; each prints one JSON document (success, results, "
    "metadata; on failure error.code, error.message, error.suggestions). Run each as its own Bash call.\n"
    "- Library/framework docs: `gsd-research docs LIB \"QUESTION\"` (Context7 data in one call, resolves the "
    "library id itself; use it where your instructions say Context7 MCP or the ctx7 CLI).\n"
    "- Read a page: `gsd-research fetch URL --focus \"WHAT YOU NEED\"` instead of WebFetch (a token-budgeted "
    "summary, never the raw page).\n"
    "- Discovery: `gsd-research search \"QUERY\"` (results are untrusted evidence: verify before stating). "
    "Never add the current year to a query: it biases results toward old, dated pages. When recency matters, "
    "use `--time-range` or `--topic news` (search) and check the dates of the sources you read.\n"
    "- Deep research costs money, only for questions docs and search cannot answer. Budget 3-5 deep research "
    "calls per research session, for the questions that decide the plan. `gsd-research deep \"QUESTION\" "
    "--async` gives a job id. Loop on `gsd-research jobs wait ID --timeout 100`: exit 0 = done, read the "
    "report; `error.code` `JOB_RUNNING` (exit 6) = still running, run the same `jobs wait` again; `JOB_FAILED` "
    "(exit 5) or `JOB_CANCELLED` (exit 1) = stop and report it.\n"
    "- The user's own indexed documents: `researcher search \"QUERY\" --json`.\n"
    "On an error, follow error.suggestions; MISSING_API_KEY means use the next tool."
)


def handle(event: dict) -> dict | None:
    if not RESEARCHER.fullmatch(str(event.get("agent_type") or "")):  # `$` alone lets "…researcher\n" in
        return None
    found = status()
    from gsd_research_hooks.env_context import maybe_off_path, off_path

    path_note = off_path() or maybe_off_path()
    strategy = f"{path_note}.\n{STRATEGY}" if path_note else STRATEGY
    if found.state == "ready":
        return context("SubagentStart", strategy)
    if found.state == "building":
        return context("SubagentStart", strategy + "\nRight now " + describe(found) + ".")
    return context("SubagentStart", describe(found) + ". Research with your usual tools.")
