"""PreToolUse on Bash inside a subagent: a research session of its own for each agent, not the client's.

Subagents inherit the main session's GSD_RESEARCH_SESSION, so parallel researchers would get references to
passages only a sibling saw. In a subagent's command line, each simple command of ours (also inside a list or a
pipeline: `cd x && gsd-research ... | jq`) gets ` --session <session>.<agent_id>` after its last word, before its
redirections. A line with anything the small parser below does not fully understand (expansions, subshells,
braces, heredocs, an open quote) is left whole: the hook only ever adds our option to our own calls.
Only `updatedInput` is returned, never a permission decision: the client judges the rewritten command by the
user's rules as before (an env prefix would not match `Bash(gsd-research:*)`, so the option goes last)."""

from __future__ import annotations

import re
import shlex

from gsd_research_hooks.common import plain_id, tool_input

AGENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
RESEARCHER_VALUED = ("--chroma-url",)  # researcher's group options that take a value (skipped to its command)
OURS = ("gsd-research", "researcher")
SESSION_VAR = "GSD_RESEARCH_SESSION"
DECLARE = ("unset", "export", "declare", "typeset", "local", "readonly")
SEPARATORS = ("&&", "||", "|&", "|", "&", ";", "\n")  # longest first
REDIRECT = re.compile(r"&>>|&>|>>|>\||>&|<&|<>|<<|>|<")  # `<<` (heredoc, here-string) is refused
ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
WORD_END = " \t\n|&;<>"
UNKNOWN = "$`(){}\r"  # expansions, subshells, groups, functions: the line is left whole


class Unsure(Exception):
    """Part of the line is not understood; nothing is rewritten."""


def _double_quoted(line: str, i: int, out: list[str]) -> int:
    """The text of a "..." opening at i into `out`; the index after its closing quote."""
    i += 1
    while i < len(line) and line[i] != '"':
        if line[i] in "$`":
            raise Unsure
        if line[i] == "\\" and line[i + 1:i + 2] in ('"', "\\", "$", "`", "\n"):
            out.append(line[i + 1] if line[i + 1] != "\n" else "")
            i += 2
        else:
            out.append(line[i])
            i += 1
    if i >= len(line):
        raise Unsure
    return i + 1


def _word(line: str, i: int) -> tuple[int, str]:
    """The word starting at i: (index after it, its value with quotes and escapes removed)."""
    out: list[str] = []
    while i < len(line) and line[i] not in WORD_END:
        char = line[i]
        if char in UNKNOWN or (char == "\\" and i + 1 == len(line)):
            raise Unsure
        if char == "\\":
            out.append("" if line[i + 1] == "\n" else line[i + 1])
            i += 2
        elif char == "'":
            close = line.find("'", i + 1)
            if close < 0:
                raise Unsure
            out.append(line[i + 1:close])
            i = close + 1
        elif char == '"':
            i = _double_quoted(line, i, out)
        else:
            out.append(char)
            i += 1
    return i, "".join(out)


def _redirection(line: str, i: int) -> int:
    """Skips the redirection at i (operator and target word); the index after it."""
    match = REDIRECT.match(line, i)
    if not match or match.group() == "<<":
        raise Unsure
    i = match.end()
    while line[i:i + 1] in (" ", "\t"):
        i += 1
    end, _ = _word(line, i)
    if end == i:
        raise Unsure  # no target: not a redirection we understand
    return end


def simple_commands(line: str) -> list[list[tuple[str, str, int]]]:
    """The simple commands of a list or pipeline, each as its words (value, raw text, end index), redirections
    left out; Unsure when the line holds anything but words, quotes, separators, redirections and comments."""
    commands: list[list[tuple[str, str, int]]] = [[]]
    i = 0
    while i < len(line):
        separator = next((s for s in SEPARATORS if line.startswith(s, i)), None)
        if line[i] in " \t" or line.startswith("\\\n", i):
            i += 1 if line[i] != "\\" else 2
        elif line[i] == "#":
            end = line.find("\n", i)  # a comment runs to the end of its line
            i = len(line) if end < 0 else end
        elif line[i] in "<>" or line.startswith("&>", i):
            i = _redirection(line, i)
        elif separator:
            if line.startswith((";;", ";&"), i):
                raise Unsure  # case clauses
            commands.append([])
            i += len(separator)
        else:
            end, value = _word(line, i)
            if line[end:end + 1] in ("<", ">") and line[i:end].isdigit():
                i = _redirection(line, end)  # `2>/dev/null`: a file descriptor, not a word
                continue
            commands[-1].append((value, line[i:end], end))
            i = end
    return commands


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


def _ours(words: list[tuple[str, str, int]]) -> bool:
    """A call of ours to scope: not after `--` (an option would be an argument), no session chosen already."""
    lead = next((k for k, (_, raw, _) in enumerate(words) if not ASSIGNMENT.match(raw)), len(words))  # env prefix
    values = [value for value, _, _ in words[lead:]]
    if not values or words[lead][1] not in OURS:
        return False
    if "--" in values or any(v == "--session" or v.startswith("--session=") for v in values):
        return False
    return _takes_session(values)


def _chooses_session(words: list[tuple[str, str, int]]) -> bool:
    """A simple command that sets or unsets the session variable: an unquoted `V=x` anywhere (a prefix,
    `export V=x`, `env V=x cmd`), or `unset V` / `export V`; a query or a quoted text naming it does not."""
    if any(raw.startswith((SESSION_VAR + "=", SESSION_VAR + "+=")) for _, raw, _ in words):
        return True
    return bool(words) and words[0][0] in DECLARE and any(raw == SESSION_VAR for _, raw, _ in words[1:])


def scoped(command: str, session: str) -> str | None:
    """The command with our option after each call of ours, None when there is nothing to add safely (a line
    that sets, exports or unsets GSD_RESEARCH_SESSION chooses its session itself)."""
    try:
        commands = simple_commands(command)
    except Unsure:
        return None
    if any(_chooses_session(words) for words in commands):
        return None
    ends = [words[-1][2] for words in commands if words and _ours(words)]
    option = f" --session {shlex.quote(session)}"
    for end in reversed(ends):
        command = command[:end] + option + command[end:]
    return command if ends else None


def handle(event: dict) -> dict | None:
    agent, session = event.get("agent_id"), plain_id(event.get("session_id"))
    if not isinstance(agent, str) or not AGENT_ID.fullmatch(agent) or not session:
        return None  # the main conversation (no agent) keeps its exported session
    args = tool_input(event)
    command = args.get("command")
    rewritten = scoped(command, f"{session}.{agent}") if isinstance(command, str) else None
    if rewritten is None:
        return None
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {**args, "command": rewritten}}}
