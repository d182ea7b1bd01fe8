"""One decision, two wordings: from a Status, the error code a launcher answers and what the hooks tell the
model. SessionStart, UserPromptSubmit, SubagentStart and the launchers all go through `verdict`, so they never
disagree (a hook saying ENVIRONMENT_MISSING while a call answers ENVIRONMENT_BUILD_FAILED)."""

from __future__ import annotations

import os
import shlex

from gsd_research_hooks.plugin_env import DEFAULT_WAIT, Status, fix_command, install_command

# Claude Code (2.1.197) drops a plugin's bin/ from the Bash tool's PATH when its path holds any of :"'$\` or a
# newline ("Dropping plugin bin path with shell metacharacters"): said as a fact. The other shell
# metacharacters are not known to be dropped: for them the full path is offered in case the bare name fails.
SHELL_META = frozenset(':"\'$\\`\n')
MAYBE_META = frozenset(';&|<>()')

PREPARING, FAILED, MISSING = "ENVIRONMENT_PREPARING", "ENVIRONMENT_BUILD_FAILED", "ENVIRONMENT_MISSING"
WHY = {"first": "first use after installing the plugin",
       "update": "a plugin update changed its locked dependencies",
       "interpreter": "the Python it was built with changed (an upgrade)",
       "broken": "the environment was damaged"}


class Verdict:
    """code: None (ready) or one of the three; cause: one clause; fixes: what to do, most useful first."""

    def __init__(self, code: str | None, cause: str = "", fixes: list[str] | None = None):
        self.code, self.cause, self.fixes = code, cause, fixes or []


def verdict(found: Status, root: str | None, data: str | None) -> Verdict:
    info = found.info
    if found.state == "ready":
        return Verdict(None)
    if found.state == "building":
        return Verdict(PREPARING, f"its Python environment is being built ({WHY.get(info.get('why'), WHY['first'])}; "
                                  f"about {info.get('eta', 60)} s left)")
    if found.state == "missing" and root and data:
        return Verdict(PREPARING, "its Python environment will be built on its first call (that call waits for it)")
    if found.state == "failed" and data:
        cause = "building its Python environment failed: " + (info.get("error") or "unknown error")
        fixes = [f"fix the cause, then rebuild in a terminal: {fix_command(root or '', data)}"]
        if info.get("log"):
            cause += f" (log: {info['log']})"
        return Verdict(FAILED, cause, fixes + [f"or install it without the plugin's environment: "
                                               f"{install_command(root or '')}"])
    reason = info.get("reason") or info.get("error") or "no Python environment"
    fixes = ["install the plugin from its marketplace (it builds its own environment) and start a new session"]
    if root:
        fixes.append(f"or run the install.sh of a gsd-research checkout: {install_command(root)}")
    return Verdict(MISSING, reason, fixes)


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


def describe(found: Status, root: str | None, data: str | None) -> str:
    """One or two sentences for the model; never 'available' unless a launcher would run now."""
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


def envelope(prog: str, command: str | None, found: Status, root: str, data: str | None) -> dict:
    """The launcher's JSON answer for an environment that is not ready (never for a ready one)."""
    v = verdict(found, root, data)
    if v.code == PREPARING:
        info = found.info
        pct, left = int(round(100 * info.get("progress", 0))), info.get("eta", 60)
        return {"success": False, "command": command, "error": {
            "code": PREPARING,
            "message": (f"{prog}'s Python environment is being built ({WHY.get(info.get('why'), WHY['first'])}): "
                        f"{pct}% done, about {left} s left ({info.get('step') or 'starting'}). The command did not "
                        "run; nothing is wrong."),
            "suggestions": [f"Run the same command again in about {left} s",
                            "Meanwhile continue with your other tools"]},
            "metadata": {"progress_percent": pct, "eta_seconds": left,
                         "waited_seconds": round(info.get("waited", 0))}}
    if v.code == FAILED:
        message = f"Building {prog}'s Python environment failed: {found.info.get('error') or 'unknown error'}."
        if found.info.get("log"):
            message += f" Log: {found.info['log']}"
    else:
        message = f"No Python environment for {prog}: {v.cause}"
    return {"success": False, "command": command, "error": {
        "code": v.code, "message": message,
        "suggestions": [f[0].upper() + f[1:] for f in v.fixes] + ["Until then continue with your other tools"]}}
