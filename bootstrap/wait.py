"""A launcher's wait while the plugin's environment is not ready: start the build if none runs, wait for it a
while (the first call after an install or update usually just takes longer), then run the command, or answer one
JSON envelope: ENVIRONMENT_PREPARING (progress, seconds left), ENVIRONMENT_BUILD_FAILED (why, the log, the fix)
or ENVIRONMENT_MISSING.

A ready environment that does not import (`broken`: a damaged environment) is checked here, set aside when
broken, and rebuilt."""

from __future__ import annotations

import os
import signal
import sys
import time

from bootstrap.build import damage, invalidate, log_tail, start_if_due
from bootstrap.launch import WAITED, answer, exec_env
from bootstrap.verdict import DEFAULT_WAIT, Status, plugin_status, read_state

POLL = 0.1  # seconds between looks at a running build: the call runs as soon as it is ready (a look is ~1 ms)


def wait_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("GSD_RESEARCH_ENV_WAIT", DEFAULT_WAIT)))
    except ValueError:
        return DEFAULT_WAIT


def settled(status: Status, started_at: float | None) -> bool:
    """A failure to report now: decided here, not due for a retry, or the build we started failed."""
    if status.state != "failed":
        return False
    if status.info.get("decided") or "finished_at" not in status.info:
        return True
    if started_at is None:
        return not status.info["retry_due"]
    return status.info["finished_at"] >= started_at


def ran_since(started_at: float, state: dict) -> bool:
    """Whether a build got the lock after we started ours (else ours never ran: another build held the lock)."""
    return state.get("started_at", 0.0) >= started_at - 1


class _Stopped(Exception):
    pass


def _stopped(_signum, _frame):
    raise _Stopped()


class Waiter:
    """One launcher call waiting for the plugin environment of `root` in `data`."""

    def __init__(self, prog: str, root: str, data: str, args: list[str], broken: str | None = None):
        self.prog, self.root, self.data, self.args, self.broken = prog, root, data, args, broken
        self.started_at: float | None = None

    def ready(self, venv: str) -> None:
        os.environ[WAITED] = "1"  # if it still does not import, it says so instead of coming back
        exec_env(self.prog, self.root, venv, self.data, self.args)

    def look(self) -> Status:
        """The status now, with what this call knows: the ready environment did not import, our build died."""
        status = plugin_status(self.root, self.data)
        if status.state == "ready" and self.broken is not None:
            problem = damage(status.venv, self.root)
            if not problem:  # every locked package is complete: the plugin's own code fails, as run says
                self.ready(status.venv)
            invalidate(status.venv)  # set aside: the build replaces it
            self.broken = None
            return Status("missing", status.venv, why="broken")
        if status.state == "missing" and self.started_at is not None and time.time() - self.started_at > 10:
            if ran_since(self.started_at, read_state(self.data)):
                return Status("failed", error="the build stopped before it finished" + log_tail(self.data),
                              decided=True)
            self.started_at = None  # another build held the lock when ours started: start ours now
        return status

    def run(self) -> int:
        """Run the command once the environment is ready, or print why not (exit 6 preparing, 3 otherwise).
        SIGTERM (the Bash tool's timeout) while waiting still gets its one answer: preparing, exit 143."""
        signal.signal(signal.SIGTERM, _stopped)
        try:
            return self._wait()
        except _Stopped:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the answer is printed whole
            answer(self.prog, self.args, Status("building", progress=0.0, eta=60, step="starting"), self.root,
                   self.data)
            return 128 + signal.SIGTERM

    def _wait(self) -> int:
        start = time.monotonic()
        deadline, said = start + wait_seconds(), False
        while True:
            status = self.look()
            if status.state == "ready":
                self.ready(status.venv)
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
            time.sleep(min(POLL, deadline - now))
