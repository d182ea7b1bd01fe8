"""What the hooks tell the model about gsd-research's environment, truthfully: ready, being prepared (with the
time left), or not available (with the fix). SessionStart also starts the plugin's build and exports its
data directory to the Bash tool (CLAUDE_ENV_FILE), where the launchers look for it."""

from __future__ import annotations

import os
import shlex
import stat
import time

from gsd_research_hooks.common import load_state, save_state
from gsd_research_hooks.plugin_env import Status, is_python, launcher_venvs, resolve

MAX_PENDING = 20


def plugin_paths() -> tuple[str, str | None]:
    """The plugin's root (CLAUDE_PLUGIN_ROOT, else where these hooks live) and its data dir (plugin route only)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.environ.get("CLAUDE_PLUGIN_ROOT") or here, os.environ.get("CLAUDE_PLUGIN_DATA") or None


def status() -> Status:
    """The environment a launcher would use now, decided as the launcher decides: on the plugin route a missing
    environment (or a failed one due for a retry) gets its build started, as the next call would."""
    root, data = plugin_paths()
    if data and not any(is_python(venv) for venv in launcher_venvs(root)):  # the launchers' plugin route
        from gsd_research_hooks.data_dir import private_problem, register

        problem = private_problem(data)
        if problem:
            return Status("failed", error=f"its data directory is not safe to use: {problem}", decided=True)
        register(data, root)  # the client gave both: this directory serves this root
    found = resolve(root, data)
    if not data or found.state not in ("missing", "failed"):
        return found
    from gsd_research_hooks.env_build import start_if_due  # only here: subprocess & co. cost start-up time

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


def describe(found: Status) -> str:
    """One or two sentences for the model; never 'available' unless a launcher would run now."""
    from gsd_research_hooks.env_verdict import describe as text

    root, data = plugin_paths()
    return text(found, root, data)


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
