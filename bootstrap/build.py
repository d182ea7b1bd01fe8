"""Build the plugin's Python environment from the pinned lock (uv when present, else venv + pip).

One build at a time (flock on <data>/build.lock). Each attempt builds in a fresh envs/<digest>-<stamp>/, which
nothing uses yet; only when it is complete (installed, imports checked with the plugin's lib/) does it get its
READY_MARKER (the lock and the interpreter it was built with), and then <data>/current/<digest16> is swapped to
it with one atomic rename (store: one environment per lock, for every version of the plugin). A build that
dies half-way leaves a directory without the marker, and maybe its installer still running: the next build stops those processes and removes it. Environments a process still runs from are kept.
A failed build records why in gsd-research-env.json; the launchers and the hooks report it with the fix."""

from __future__ import annotations

import csv
import fcntl
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from bootstrap.locate import (
    LOCK_FILE,
    READY_MARKER,
    STATE_FILE,
    USED_FILE,
    current_link,
    entry,
    lock_digest,
    python_of,
    register,
    site_packages,
    write_json,
)
from bootstrap.progress import expected_seconds, free_bytes, locked_count, needed_bytes, progress
from bootstrap.store import adopt, collect_garbage, processes_using, swap
from bootstrap.verdict import Status, build_running, marker_problem, read_state

STEP_TIMEOUT = 1800  # seconds for one installer step (a stalled network must not hold the lock forever)
SMOKE = "import sys; sys.path.insert(0, sys.argv[1]); import gsd_research.cli, gsd_research.researcher.cli"
PROBE = "import os, sys; print(os.path.realpath(sys.executable)); print('%d.%d.%d' % sys.version_info[:3])"
PIP_PYTHON_OPTION = (22, 3)  # the first pip with `--python`
# Packages go into the environment being built, whatever a user's pip is set to (PIP_USER, pip.conf).
STEP_ENV = {**os.environ, "PIP_USER": "0"}
DISK_FULL = ("No space left on device", "[Errno 28]", "ENOSPC")


def space_problem(root: str, data: str) -> str:
    """'' unless the disk holding <data> has clearly too little room for the environment."""
    free, needed = free_bytes(data), needed_bytes(root)
    if free is None or free >= needed:
        return ""
    return (f"not enough disk space for it in {data}: {free >> 20} MB free, it needs about {needed >> 20} MB; "
            "free some space")


def start_build(root: str, data: str) -> str:
    """Start a build in the background (detached: it outlives the hook or launcher that starts it); '' when
    started, else why not."""
    problem = space_problem(root, data)
    if problem:
        return problem
    try:
        os.umask(0o077)  # the plugin's data is private
        os.makedirs(data, mode=0o700, exist_ok=True)
        with open(os.path.join(data, "build.log"), "ab") as log:
            subprocess.Popen([sys.executable, "-I", "-S", "-B", entry(), "build", root, data],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                             start_new_session=True)
        return ""
    except OSError as exc:
        return f"could not start the build in {data} ({exc.strerror or exc})"


def start_if_due(root: str, data: str, found: Status) -> Status:
    """What the launchers and the hooks do with the plugin's status: a missing environment (or a failed one
    due for a retry) starts its build; the answer is then 'building' with this build's own ETA, or the reason
    the build cannot start."""
    due = found.state == "missing" or (found.state == "failed" and found.info.get("retry_due"))
    if not due:
        return found
    why = start_build(root, data)
    if why:
        return Status("failed", found.venv, error=why, decided=True)
    state = read_state(data)
    eta = expected_seconds(state)
    if build_running(data) and state.get("lock_sha256") != lock_digest(root):
        eta += progress(root, data, state)[1]  # another version's build first, then ours
    return Status("building", found.venv, progress=0.0, eta=eta, step="starting",
                  why=found.info.get("why", "first"))


def base_python() -> tuple[str | None, str]:
    """A Python >= 3.10 to build with: this interpreter's base, else a python3.1x on PATH."""
    if sys.version_info >= (3, 10):  # noqa: UP036 - hooks run on whatever python3 the system has
        return getattr(sys, "_base_executable", None) or sys.executable, ""
    for name in ("python3.13", "python3.12", "python3.11", "python3.10"):
        path = shutil.which(name)
        if path:
            return path, ""
    return None, f"gsd-research needs Python 3.10 or newer (found {sys.version.split()[0]} at {sys.executable})"


def has_pip_python_option(base: str) -> bool:
    """Whether `base` has a pip that installs into another environment (`pip --python`, pip >= 22.3) and
    whose command line runs (a pip that imports but cannot run would fail the build, not fall back)."""
    try:
        proc = subprocess.run([base, "-m", "pip", "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    found = re.match(r"pip (\d+)\.(\d+)", proc.stdout.strip()) if proc.returncode == 0 else None
    return bool(found) and (int(found[1]), int(found[2])) >= PIP_PYTHON_OPTION


def stop_leftovers(data: str, state: dict) -> None:
    """A build that died (its lock is free: we hold it) may have left its installer running: stop it."""
    if state.get("state") != "building" or "env" not in state:
        return
    target = os.path.join(data, "envs", state["env"])
    if not marker_problem(target, state.get("lock_sha256", "")):
        return  # complete: processes using it are users, not leftovers
    for pid in processes_using(target):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(target, ignore_errors=True)


def disk_full(data: str) -> bool:
    try:
        with open(os.path.join(data, "build.log"), encoding="utf-8", errors="replace") as fh:
            tail = fh.read()[-20000:]
    except OSError:
        tail = ""
    free = free_bytes(data)
    return any(sign in tail for sign in DISK_FULL) or (free is not None and free < (1 << 20))


class Build:
    """One build of <data>'s environment for the lock of the plugin at <root>, holding the build lock."""

    def __init__(self, root: str, data: str, log):
        self.root, self.data, self.log = root, data, log
        self.lock = os.path.join(root, LOCK_FILE)
        self.digest = lock_digest(root) or ""
        name = f"{(self.digest or '0' * 16)[:16]}-{int(time.time() * 1000):x}"
        self.target = os.path.join(data, "envs", name)
        previous = read_state(data)
        stop_leftovers(data, previous)
        self.state = {k: previous[k] for k in ("history",) if k in previous}
        self.state.update(state="building", lock_sha256=self.digest, env=name, started_at=time.time(),
                          pid=os.getpid(), tool=None, step="starting", error="", timings={},
                          plugin_root=os.path.realpath(root))

    def save(self, **changes) -> None:
        self.state.update(changes)
        write_json(os.path.join(self.data, STATE_FILE), self.state)

    def run(self, step: str, *cmd: str) -> bool:
        """Run one installer step into the log; its duration goes to the state (`timings`, seconds)."""
        self.log.write(f"$ {' '.join(cmd)}\n")
        self.log.flush()
        t0 = time.time()
        try:  # a session of its own: a step that times out is stopped with every process it started
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=STEP_ENV)
        except OSError as exc:
            self.log.write(f"{exc}\n")
            proc = None
        try:
            ok = proc is not None and proc.wait(timeout=STEP_TIMEOUT) == 0
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            self.log.write(f"{exc}\n")
            ok = False
        self.state.setdefault("timings", {})[step] = round(time.time() - t0, 1)
        return ok

    def install_with_uv(self, base: str) -> bool:
        uv = shutil.which("uv")
        if not uv:
            return False
        self.save(tool="uv", step=f"installing {locked_count(self.root)} locked packages with uv")
        if self.run("venv", uv, "venv", "--python", base, self.target) and self.run(
                "install", uv, "pip", "install", "--python", python_of(self.target), "--require-hashes", "-r",
                self.lock):
            return True
        self.log.write("uv failed: building with venv + pip instead\n")
        shutil.rmtree(self.target, ignore_errors=True)
        return False

    def install_with_pip(self, base: str) -> str:
        """With the base's own pip into a venv without one when it can (ensurepip is most of a small build's
        time, and nothing runs pip in the environment later), else with the pip ensurepip puts in the venv."""
        self.save(tool="pip", step="creating the virtual environment")
        own = has_pip_python_option(base)
        if not self.run("venv", base, "-m", "venv", *(["--without-pip"] if own else []), self.target):
            return f"`{base} -m venv` failed (Debian/Ubuntu: apt install python3-venv; or install uv)"
        self.save(step=f"installing {locked_count(self.root)} locked packages with pip")
        pip = [base, "-m", "pip", "--python", python_of(self.target)] if own else [python_of(self.target), "-m", "pip"]
        if not self.run("install", *pip, "install", "--require-hashes", "--no-compile",
                        "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "-r", self.lock):
            return "pip could not install the locked packages (network, index or disk)"
        return ""

    def complete(self) -> str:
        """Check the package imports (the plugin's lib/ first on sys.path, as the launchers run it), mark the
        environment ready ('' or what went wrong)."""
        self.save(step="checking the environment")
        lib = os.path.join(os.path.realpath(self.root), "lib")
        if not self.run("check", python_of(self.target), "-I", "-c", SMOKE, lib):
            return "the new environment cannot import gsd-research"
        try:
            python, version = subprocess.run([python_of(self.target), "-I", "-c", PROBE], capture_output=True,
                                             text=True, timeout=60, check=True).stdout.split()
        except (OSError, ValueError, subprocess.SubprocessError):
            return "the new environment's Python does not run"
        write_json(os.path.join(self.target, READY_MARKER),
                   {"lock_sha256": self.digest, "tool": self.state.get("tool"), "built_at": time.time(),
                    "python": python, "python_version": version, "plugin_root": os.path.realpath(self.root)})
        return ""

    def fail(self, why: str) -> int:
        try:
            self.log.flush()
        except OSError:
            pass
        full = disk_full(self.data)  # before the half-built environment is removed (and space freed)
        shutil.rmtree(self.target, ignore_errors=True)  # then: on a full disk this makes room for the state
        if full:
            free = free_bytes(self.data)
            why = (f"the disk holding {self.data} is full ({(free or 0) >> 20} MB free, the environment needs about "
                   f"{needed_bytes(self.root) >> 20} MB): free some space. It stopped at: {why}")
        self.save(state="failed", finished_at=time.time(), step="", error=f"{why}{log_tail(self.data)}")
        return 1

    def execute(self) -> int:
        if not self.digest:
            return self.fail(f"the plugin has no {LOCK_FILE} ({self.root})")
        problem = space_problem(self.root, self.data)
        if problem:
            return self.fail(problem)
        self.save()
        os.makedirs(os.path.dirname(self.target), mode=0o700, exist_ok=True)
        base, why = base_python()
        if base is None:
            return self.fail(why)
        if not self.install_with_uv(base):
            why = self.install_with_pip(base)
            if why:
                return self.fail(why)
        why = self.complete()
        if why:
            return self.fail(why)
        replaced = os.path.realpath(current_link(self.data, self.digest))
        seconds = round(time.time() - self.state["started_at"], 1)
        history = dict(self.state.get("history") or {}, **{self.state.get("tool") or "pip": seconds})
        self.save(state="ready", finished_at=time.time(), seconds=seconds, step="", history=history)
        with open(os.path.join(self.target, USED_FILE), "w", encoding="utf-8"):
            pass
        swap(self.data, self.target, self.digest)  # from here on the launchers of this lock use it
        collect_garbage(self.data, keep={os.path.realpath(self.target), replaced})
        return 0


def log_tail(data: str, lines: int = 4) -> str:
    try:
        with open(os.path.join(data, "build.log"), encoding="utf-8", errors="replace") as fh:
            tail = [line.strip() for line in fh.readlines()[-50:] if line.strip() and not line.startswith("$ ")]
    except OSError:
        return ""
    return (": " + " | ".join(tail[-lines:]))[:600] if tail else ""


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def locked_names(root: str) -> set:
    """The lock's packages that every interpreter gets (lines without an environment marker)."""
    names = set()
    try:
        with open(os.path.join(root, LOCK_FILE), encoding="utf-8") as fh:
            for line in fh:
                if line[:1].isalnum() and "==" in line and ";" not in line:
                    names.add(normalized(line.split("==", 1)[0].split("[", 1)[0].strip()))
    except OSError:
        pass
    return names


def damage(venv: str, root: str) -> str:
    """'' when every locked package is installed in `venv` with every file its RECORD lists, else what is not
    (a damaged environment, as opposed to a plugin whose own code fails to import)."""
    installed = {}
    for sp in site_packages(venv):
        for info in glob.glob(os.path.join(glob.escape(sp), "*.dist-info")):
            installed[normalized(os.path.basename(info)[:-len(".dist-info")].rsplit("-", 1)[0])] = (sp, info)
    missing = sorted(locked_names(root) - set(installed))
    if missing or not installed:
        return f"locked packages missing: {', '.join(missing[:5]) or 'all'}"
    for name, (sp, info) in installed.items():
        try:
            with open(os.path.join(info, "RECORD"), encoding="utf-8", newline="") as fh:
                files = [row[0] for row in csv.reader(fh) if row]
        except (OSError, csv.Error, UnicodeDecodeError):
            return f"{name}: its RECORD cannot be read"
        for rel in files:
            if "__pycache__" not in rel and not os.path.lexists(os.path.join(sp, rel)):
                return f"{name}: {rel} is gone"
    return ""


def invalidate(venv: str) -> None:
    """A ready environment found broken: no longer ready (its marker set aside), so the next build replaces it."""
    marker = os.path.join(os.path.realpath(venv), READY_MARKER)
    try:
        os.replace(marker, marker + ".broken")
    except OSError:
        pass


def build(root: str, data: str) -> int:
    """Build unless another build runs (then return at once); 0 when the environment is ready."""
    os.umask(0o077)  # the plugin's data is private
    os.makedirs(data, mode=0o700, exist_ok=True)
    register(data, root)
    fd = os.open(os.path.join(data, "build.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another build runs; the callers watch its state
        return locked_build(root, data)
    finally:
        os.close(fd)


def locked_build(root: str, data: str) -> int:
    digest = lock_digest(root) or ""
    if not marker_problem(current_link(data, digest), digest) or digest and adopt(data, digest):
        return 0
    with open(os.path.join(data, "build.log"), "w", encoding="utf-8") as log:
        job = Build(root, data, log)
        try:
            return job.execute()
        except OSError as exc:  # the state or the log cannot be written (a full disk): say so if possible
            try:
                return job.fail(f"the build stopped: {exc}")
            except OSError:
                return 1
