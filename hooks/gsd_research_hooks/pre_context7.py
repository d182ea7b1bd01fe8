"""PreToolUse on Context7 MCP tools inside subagents: point at `gsd-research docs` (hooks.context7_mode).

The main conversation may use Context7 MCP as it likes: only calls carrying agent_id/agent_type are touched."""

from __future__ import annotations

import shlex

from gsd_research_hooks.common import clip, load_config, mode, tool_input, unsafe_home


def handle(event: dict) -> dict | None:
    if not event.get("agent_id") and not event.get("agent_type"):
        return None
    how = "off" if unsafe_home() else mode(load_config(), "context7_mode")  # never point at a refusing tool
    if how == "off":
        return None
    args = tool_input(event)
    lib = (args.get("libraryId") or args.get("context7CompatibleLibraryID") or args.get("libraryName")
           or "LIBRARY")
    query = args.get("query") or args.get("topic") or "QUESTION"
    command = f"gsd-research docs {shlex.quote(clip(lib, 200))} {shlex.quote(clip(query, 300))}"
    reason = (f"In subagents prefer `{command}` (Bash) over Context7 MCP tools: same Context7 data, "
              "resolved in one call, cut to --max-tokens, cached 24 h, and it works where MCP tools are missing.")
    out = {"hookEventName": "PreToolUse"}
    if how == "enforce":
        out.update(permissionDecision="deny", permissionDecisionReason=reason)
    else:
        out["additionalContext"] = "gsd-research: " + reason
    return {"hookSpecificOutput": out}
