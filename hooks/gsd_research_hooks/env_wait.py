"""The launchers' side when the plugin's environment is not ready: start the build if none runs, wait for it
a while (the first call after an install or update usually just takes longer), then run the command, or
answer one JSON envelope (env_verdict): ENVIRONMENT_PREPARING (progress, seconds left),
ENVIRONMENT_BUILD_FAILED (why, the log, the fix) or ENVIRONMENT_MISSING (no data directory of this plugin).

A launcher also comes here when the ready environment does not import (GSD_RESEARCH_ENV_BROKEN: a damaged
environment): it is checked in a fresh process, set aside when broken, and rebuilt."""

from __future__ import annotations

import json
import os
import sys
import time

from gsd_research_hooks.data_dir import choose, private_problem, register
from gsd_research_hooks.env_build import damage, invalidate, log_tail, start_if_due
from gsd_research_hooks.env_verdict import FAILED, MISSING, envelope
from gsd_research_hooks.plugin_env import DEFAULT_WAIT, Status, lock_digest, plugin_status, read_state

PREPARING_EXIT, FAILED_EXIT = 6, 3
# top-level options that take a value (the launchers' `command` field is the first word that is neither)
VALUE_OPTIONS = ("--max-tokens", "--chroma-url")


def wait_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("GSD_RESEARCH_ENV_WAIT", DEFAULT_WAIT)))
    except ValueError:
        return DEFAULT_WAIT


def command_of(args: list[str]) -> str | None:
    """The command word of a launcher's arguments: the first that is neither an option nor an option's value."""
    words = iter(args)
    for arg in words:
        if arg == "--":
            return next(words, None)
        if arg in VALUE_OPTIONS:
            next(words, None)
        elif not arg.startswith("-"):
            return arg
    return None


def run_launcher(prog: str, root: str, data: str, args: list[str]) -> None:
    """The environment is ready: run the command through the launcher again (it now finds it)."""
    os.environ["GSD_RESEARCH_PLUGIN_DATA"] = data
    os.environ["GSD_RESEARCH_ENV_WAITED"] = "1"  # the launcher will not come back here a second time
    os.environ["GSD_RESEARCH_LOCK_SHA256"] = lock_digest(root) or ""  # for a shell without a sha256 tool
    os.environ.pop("GSD_RESEARCH_ENV_BROKEN", None)
    launcher = os.path.join(root, "bin", prog)
    os.execv(launcher, [launcher, *args])


def settled(status: Status, started_at: float | None) -> bool:
    """A failure to report now: decided here, not due for a retry, or the build we started failed."""
    if status.state != "failed":
        return False
    if status.info.get("decided") or "finished_at" not in status.info:
        return True
    if started_at is None:
        return not status.info["retry_due"]
    return status.info["finished_at"] >= started_at


def answer(prog: str, args: list[str], status: Status, root: str, data: str | None) -> int:
    doc = envelope(prog, command_of(args), status, root, data)
    print(json.dumps(doc))
    return FAILED_EXIT if doc["error"]["code"] in (FAILED, MISSING) else PREPARING_EXIT


def repair(root: str, venv: str) -> str:
    """The launcher could not import from the ready environment: '' when the environment is damaged (now set
    aside for a rebuild), else why it is not to blame (then the launcher reports the import error itself)."""
    problem = damage(venv, root)
    if problem:
        invalidate(venv)
        return ""
    return "every locked package is complete"


def ran_since(started_at: float, state: dict) -> bool:
    """Whether a build got the lock after we started ours (else ours never ran: another build held the lock)."""
    return state.get("started_at", 0.0) >= started_at - 1


class Waiter:
    """One launcher call waiting for the plugin environment of `root` in `data`."""

    def __init__(self, prog: str, root: str, data: str, args: list[str]):
        self.prog, self.root, self.data, self.args = prog, root, data, args
        self.broken = os.environ.get("GSD_RESEARCH_ENV_BROKEN")
        self.started_at: float | None = None

    def look(self) -> Status:
        """The status now, with what this call knows: the ready environment did not import, our build died."""
        status = plugin_status(self.root, self.data)
        if status.state == "ready" and self.broken is not None:
            if repair(self.root, status.venv):
                run_launcher(self.prog, self.root, self.data, self.args)  # fine: the launcher says what failed
            self.broken = None
            return Status("missing", status.venv, why="broken")
        if status.state == "missing" and self.started_at is not None and time.time() - self.started_at > 10:
            if ran_since(self.started_at, read_state(self.data)):
                return Status("failed", error="the build stopped before it finished" + log_tail(self.data),
                              decided=True)
            self.started_at = None  # another build held the lock when ours started: start ours now
        return status

    def run(self) -> int:
        start = time.monotonic()
        deadline, said = start + wait_seconds(), False
        while True:
            status = self.look()
            if status.state == "ready":
                run_launcher(self.prog, self.root, self.data, self.args)
            if settled(status, self.started_at):
                return answer(self.prog, self.args, status, self.root, self.data)
            if self.started_at is None and status.state in ("missing", "failed"):
                self.started_at = time.time()
                status = start_if_due(self.root, self.data, status)
                if status.state == "failed":
                    return answer(self.prog, self.args, status, self.root, self.data)
            elif status.state == "building" and not said:
                print(f"[{self.prog}] waiting for its Python environment to be built (about {status.info['eta']} s)",
                      file=sys.stderr)
                said = True
            now = time.monotonic()
            if now >= deadline:
                if status.state != "building":
                    status = Status("building", progress=0.0, eta=60, step="starting")
                status.info["waited"] = now - start
                return answer(self.prog, self.args, status, self.root, self.data)
            time.sleep(min(0.5, deadline - now))


def wait(prog: str, root: str, given: str, args: list[str]) -> int:
    """Run `prog args` once the environment is ready, or print why not (exit 6 preparing, 3 failed/missing)."""
    data, why = choose(root, given)
    if data is None and given and private_problem(given):  # as SessionStart says of it: not safe to build in
        return answer(prog, args, Status("failed", error=why, decided=True), root, given)
    if data is None:
        return answer(prog, args, Status("missing", reason=why), root, None)
    register(data, root)
    return Waiter(prog, root, data, args).run()
