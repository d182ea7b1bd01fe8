"""The launchers' side when the plugin's environment is not ready: start the build if none runs, wait for it
a while (the first call after an install or update usually just takes longer), then run the command, or
answer one JSON envelope: ENVIRONMENT_PREPARING (progress, seconds left) or ENVIRONMENT_BUILD_FAILED (why,
the log, the fix)."""

from __future__ import annotations

import json
import os
import sys
import time

from gsd_research_hooks.env_build import log_tail, start_build
from gsd_research_hooks.plugin_env import DEFAULT_WAIT, Status, fix_command, plugin_status

PREPARING_EXIT, FAILED_EXIT = 6, 3


def wait_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("GSD_RESEARCH_ENV_WAIT", DEFAULT_WAIT)))
    except ValueError:
        return DEFAULT_WAIT


def command_of(args: list[str]) -> str | None:
    return next((a for a in args if not a.startswith("-")), None)


def preparing(prog: str, args: list[str], status: Status, waited: float) -> dict:
    pct, left = int(round(100 * status.info.get("progress", 0))), status.info.get("eta", 60)
    why = "a plugin update changed its locked dependencies" if status.info.get("outdated") else \
        "first use after installing the plugin"
    return {"success": False, "command": command_of(args), "error": {
        "code": "ENVIRONMENT_PREPARING",
        "message": (f"{prog}'s Python environment is being built ({why}): {pct}% done, about {left} s left "
                    f"({status.info.get('step') or 'starting'}). The command did not run; nothing is wrong."),
        "suggestions": [f"Run the same command again in about {left} s",
                        "Meanwhile continue with your other tools"]},
        "metadata": {"progress_percent": pct, "eta_seconds": left, "waited_seconds": round(waited)}}


def failed(prog: str, args: list[str], status: Status, root: str, data: str) -> dict:
    return {"success": False, "command": command_of(args), "error": {
        "code": "ENVIRONMENT_BUILD_FAILED",
        "message": (f"Building {prog}'s Python environment failed: "
                    f"{status.info.get('error') or status.info.get('reason') or 'unknown error'}. "
                    f"Log: {status.info.get('log') or os.path.join(data, 'build.log')}"),
        "suggestions": [f"Fix the cause, then rebuild in a terminal: {fix_command(root, data)}",
                        f'Or install it without the plugin\'s environment: bash "{root}/install.sh"',
                        "Until then continue with your other tools"]}}


def run_launcher(prog: str, root: str, data: str, args: list[str]) -> None:
    """The environment is ready: run the command through the launcher again (it now finds it)."""
    os.environ["GSD_RESEARCH_PLUGIN_DATA"] = data
    os.environ["GSD_RESEARCH_ENV_WAITED"] = "1"  # the launcher will not come back here a second time
    launcher = os.path.join(root, "bin", prog)
    os.execv(launcher, [launcher, *args])


def settled(status: Status, started_at: float | None) -> bool:
    """A failure to report now: a broken plugin, a failure not due for a retry, or the build we started failed."""
    if status.state == "broken":
        return True
    if status.state != "failed":
        return False
    if "finished_at" not in status.info:
        return True  # decided here, not a recorded build
    if started_at is None:
        return not status.info["retry_due"]
    return status.info["finished_at"] >= started_at


def wait(prog: str, root: str, data: str, args: list[str]) -> int:
    """Run `prog args` once the environment is ready, or print why not (exit 6 preparing, 3 failed)."""
    start = time.monotonic()
    deadline = start + wait_seconds()
    started_at, said = None, False
    while True:
        status = plugin_status(root, data)
        if status.state == "ready":
            run_launcher(prog, root, data, args)
        if status.state == "missing" and started_at is not None and time.time() - started_at > 10:
            status = Status("failed", error="the build stopped before it finished" + log_tail(data))
        if settled(status, started_at):
            print(json.dumps(failed(prog, args, status, root, data)))
            return FAILED_EXIT
        if status.state in ("missing", "failed") and started_at is None:
            started_at = time.time()
            if not start_build(root, data):
                status = Status("failed", error=f"could not start the build in {data}")
                print(json.dumps(failed(prog, args, status, root, data)))
                return FAILED_EXIT
        elif status.state == "building" and not said:
            print(f"[{prog}] waiting for its Python environment to be built (about {status.info['eta']} s)",
                  file=sys.stderr)
            said = True
        now = time.monotonic()
        if now >= deadline:
            if status.state != "building":
                status = Status("building", progress=0.0, eta=60, step="starting")
            print(json.dumps(preparing(prog, args, status, now - start)))
            return PREPARING_EXIT
        time.sleep(min(0.5, deadline - now))
