"""PreToolUse on Bash inside a subagent: a research session of its own for each agent, not the client's.

Subagents inherit the main session's GSD_RESEARCH_SESSION, so parallel researchers would get references to
passages only a sibling saw. A subagent's single call of ours gets ` --session <session>.<agent_id>` appended.
Only `updatedInput` is returned, never a permission decision: the client judges the rewritten command by the
user's rules as before (an env prefix would not match `Bash(gsd-research:*)`, so the option goes last)."""

from __future__ import annotations

import re
import shlex

from gsd_research_hooks.common import plain_id, tool_input

AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
RESEARCHER_VALUED = ("--chroma-url",)  # researcher's group options that take a value (skipped to its command)


def _words(command: str) -> list[str] | None:
    """The words of one plain command line, None when the shell would do more than run it: lists, pipes,
    redirections, subshells, expansions, comments, line breaks, `--` (after which an option is an argument)."""
    if any(c in command for c in "\n\r`$"):
        return None
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    try:
        words = list(lexer)
    except ValueError:  # an open quote, a trailing backslash
        return None
    if any(w and (set(w) <= set(lexer.punctuation_chars) or w.startswith("#")) for w in words) or "--" in words:
        return None
    return words


def _takes_session(words: list[str]) -> bool:
    """Every gsd-research command takes --session; of researcher's, only `search`."""
    if words[0] == "gsd-research":
        return True
    rest = iter(words[1:])
    for word in rest:
        if word in RESEARCHER_VALUED:
            next(rest, None)
        elif not word.startswith("-"):
            return word == "search"
    return False


def handle(event: dict) -> dict | None:
    agent, session = event.get("agent_id"), plain_id(event.get("session_id"))
    if not isinstance(agent, str) or not AGENT_ID.fullmatch(agent) or not session:
        return None  # the main conversation (no agent) keeps its exported session
    args = tool_input(event)
    command = args.get("command")
    words = _words(command) if isinstance(command, str) else None
    if not words or words[0] not in ("gsd-research", "researcher") or not _takes_session(words):
        return None
    if any(w == "--session" or w.startswith("--session=") for w in words):
        return None  # the agent chose its session
    scoped = f"{command} --session {shlex.quote(f'{session}.{agent}')}"
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {**args, "command": scoped}}}
