"""What the hooks tell the model about gsd-research's environment, truthfully: ready, being prepared (with the
time left), or not available (with the fix). SessionStart also starts the plugin's build and exports its
data directory to the Bash tool (CLAUDE_ENV_FILE), where the launchers look for it."""

from __future__ import annotations

import os
import shlex
import stat
import time

from bootstrap.locate import first_venv, register
from bootstrap.verdict import DEFAULT_WAIT, PREPARING, Status, private_problem, resolve, verdict

from gsd_research_hooks.common import load_state, save_state

MAX_PENDING = 20
# Claude Code (2.1.197) drops a plugin's bin/ from the Bash tool's PATH when its path holds any of :"'$\` or a
# newline ("Dropping plugin bin path with shell metacharacters"): said as a fact. The other shell
# metacharacters are not known to be dropped: for them the full path is offered in case the bare name fails.
SHELL_META = frozenset(':"\'$\\`\n')
MAYBE_META = frozenset(';&|<>()')


def plugin_paths() -> tuple[str, str | None]:
    """The plugin's root (CLAUDE_PLUGIN_ROOT, else where these hooks live) and its data dir (plugin route only)."""
    from bootstrap.locate import plugin_root

    return os.environ.get("CLAUDE_PLUGIN_ROOT") or plugin_root(), os.environ.get("CLAUDE_PLUGIN_DATA") or None


def status() -> Status:
    """The environment a launcher would use now, decided as the launcher decides: on the plugin route a missing
    environment (or a failed one due for a retry) gets its build started, as the next call would."""
    root, data = plugin_paths()
    if data and first_venv(root) is None and not private_problem(data):
        register(data, root)  # the plugin's route, and the client gave both: this directory serves this root
    found = resolve(root, data)
    if not data or found.state not in ("missing", "failed"):
        return found
    from bootstrap.build import start_if_due  # only here: subprocess & co. cost start-up time

    return start_if_due(root, data, found)


def export_data_dir(data: str) -> None:
    """Later Bash tool commands of this session get GSD_RESEARCH_PLUGIN_DATA (the launchers read it). Only into
    a regular file: a FIFO or a device there must not hang or break the session start."""
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if not env_file:
        return
    try:
        fd = os.open(env_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                     0o600)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.write(fd, f"export GSD_RESEARCH_PLUGIN_DATA={shlex.quote(data)}\n".encode())
    except OSError:
        pass
    finally:
        os.close(fd)


def _full_paths(root: str) -> list[str]:
    return [shlex.quote(os.path.join(root, "bin", name)) for name in ("gsd-research", "researcher")]


def off_path() -> str:
    """'' on PATH, else how to call the tools: the plugin's root (CLAUDE_PLUGIN_ROOT) holds a shell
    metacharacter the client refuses, so it leaves bin/ off PATH and `gsd-research` is 'command not found'."""
    root = os.environ.get("CLAUDE_PLUGIN_ROOT") or ""
    if not SHELL_META.intersection(root):
        return ""
    tools = _full_paths(root)
    return ("Claude Code leaves this plugin's bin/ off PATH (its path holds shell metacharacters), so the bare "
            f"commands are not found: call them by full path, {tools[0]} for gsd-research and {tools[1]} for "
            "researcher")


def maybe_off_path() -> str:
    """'' unless the plugin's root holds a shell metacharacter other clients may refuse: then the full paths."""
    root = os.environ.get("CLAUDE_PLUGIN_ROOT") or ""
    if off_path() or not MAYBE_META.intersection(root):
        return ""
    tools = _full_paths(root)
    return (f"If `gsd-research` is not found (this plugin's path holds shell metacharacters), call it by full "
            f"path: {tools[0]}, and {tools[1]} for researcher")


def describe(found: Status) -> str:
    """One or two sentences for the model; never 'available' unless a launcher would run now."""
    root, data = plugin_paths()
    v = verdict(found, root, data)
    if v.code is None and off_path():
        return f"gsd-research is available through Bash by its full path only. {off_path()}"
    if v.code is None:
        hint = f". {maybe_off_path()}" if maybe_off_path() else ""
        return ("gsd-research is available through Bash (gsd-research docs|search|fetch|deep|jobs, "
                f"researcher search){hint}")
    if v.code == PREPARING:
        return (f"gsd-research is being prepared: {v.cause}. Its commands wait for it (up to {DEFAULT_WAIT} s) and "
                "then run, or answer ENVIRONMENT_PREPARING with the time left: retry then, and meanwhile use your "
                "other tools")
    return (f"gsd-research is NOT available: {v.cause[:400]}. Its commands answer {v.code}. Tell the user the fix: "
            f"{'; '.join(v.fixes)}. Use your other tools meanwhile")


def remember_pending(session_id: str) -> None:
    """This session was told 'being prepared': tell it once more when that changes."""
    if not session_id:
        return
    state = load_state()
    pending = [p for p in state.get("env_pending", []) if isinstance(p, list) and len(p) == 2]
    pending = [p for p in pending if p[0] != session_id][-(MAX_PENDING - 1):] + [[session_id, time.time()]]
    state["env_pending"] = pending
    save_state(state)


def is_pending(state: dict, session_id: str) -> bool:
    pending = state.get("env_pending")
    return bool(session_id) and isinstance(pending, list) and any(
        isinstance(p, list) and p[:1] == [session_id] for p in pending)


def pending_notice(session_id: str) -> str:
    """'' unless this session was told 'being prepared' and the build has finished or failed since."""
    state = load_state()
    if not is_pending(state, session_id):
        return ""
    pending = state["env_pending"]
    found = status()
    if found.state == "building":
        return ""
    state["env_pending"] = [p for p in pending if not (isinstance(p, list) and p[:1] == [session_id])]
    save_state(state)
    if found.state == "ready":
        return "gsd-research is ready now: its Python environment finished building."
    return describe(found) + "."
