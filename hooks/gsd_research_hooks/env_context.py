"""What the hooks tell the model about gsd-research's environment, truthfully: ready, being prepared (with the
time left), or not available (with the fix). SessionStart also starts the plugin's build and exports its
data directory to the Bash tool (CLAUDE_ENV_FILE), where the launchers look for it."""

from __future__ import annotations

import os
import shlex
import time

from gsd_research_hooks.common import load_state, save_state
from gsd_research_hooks.plugin_env import (
    DEFAULT_WAIT,
    TYPICAL_SECONDS,
    Status,
    fix_command,
    read_state,
    resolve,
)

MAX_PENDING = 20


def plugin_paths() -> tuple[str, str | None]:
    """The plugin's root (CLAUDE_PLUGIN_ROOT, else where these hooks live) and its data dir (plugin route only)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.environ.get("CLAUDE_PLUGIN_ROOT") or here, os.environ.get("CLAUDE_PLUGIN_DATA") or None


def status(start: bool = False) -> Status:
    """The environment a launcher would use now; with start=True a missing or retry-due build is started."""
    root, data = plugin_paths()
    found = resolve(root, data)
    due = found.state == "missing" or (found.state == "failed" and found.info.get("retry_due"))
    if not (start and data and due):
        return found
    from gsd_research_hooks.env_build import start_build  # only here: subprocess & co. cost start-up time

    if start_build(root, data):
        history = read_state(data).get("history") or {}
        eta = int(min(history.values()) if history else TYPICAL_SECONDS["pip"])
        return Status("building", found.venv, progress=0.0, eta=eta, step="starting",
                      outdated=found.info.get("outdated", False))
    return found


def export_data_dir(data: str) -> None:
    """Later Bash tool commands of this session get GSD_RESEARCH_PLUGIN_DATA (the launchers read it)."""
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if not env_file:
        return
    try:
        with open(env_file, "a", encoding="utf-8") as fh:
            fh.write(f"export GSD_RESEARCH_PLUGIN_DATA={shlex.quote(data)}\n")
    except OSError:
        pass


def describe(found: Status) -> str:
    """One or two sentences for the model; never 'available' unless a launcher would run now."""
    root, data = plugin_paths()
    if found.state == "ready":
        return ("gsd-research is available through Bash (gsd-research docs|search|fetch|deep|jobs, "
                "researcher search)")
    if found.state == "building":
        why = "a plugin update changed its dependencies" if found.info.get("outdated") else "first session"
        return (f"gsd-research is being prepared: its Python environment is being built ({why}; about "
                f"{found.info.get('eta', 60)} s left). Its commands wait for it (up to {DEFAULT_WAIT} s) and then "
                "run, or answer ENVIRONMENT_PREPARING with the time left: retry then, and meanwhile use your "
                "other tools")
    if found.state == "failed":
        return ("gsd-research is NOT available: building its Python environment failed "
                f"({found.info.get('error', '')[:300]}). Its commands answer ENVIRONMENT_BUILD_FAILED. Tell the "
                f"user the fix: resolve the cause, then run `{fix_command(root, data or '')}`; use your other "
                "tools meanwhile")
    reason = found.info.get("reason") or "no Python environment"
    return (f"gsd-research is NOT available: {reason}. Its commands answer ENVIRONMENT_MISSING. Tell the user "
            "the fix: install the plugin from its marketplace (it builds its own environment), or run the "
            "install.sh of a gsd-research checkout; use your other tools meanwhile")


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
