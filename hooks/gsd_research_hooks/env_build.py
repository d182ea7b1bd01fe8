"""Build the plugin's Python environment from the pinned lock (uv when present, else venv + pip).

One build at a time (flock on <data>/build.lock). The environment is built in envs/<digest>/, which nothing
uses yet; only when it is complete (installed, package linked, imports checked) does it get its READY_MARKER,
and then <data>/venv is swapped to it with one atomic rename. A build that dies half-way leaves a directory
without the marker: the next build removes it and starts again. A failed build records why in
gsd-research-env.json; the launchers and SessionStart report it with the fix."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time

from gsd_research_hooks.plugin_env import (
    LOCK_FILE,
    PTH_FILE,
    READY_MARKER,
    cli_script,
    env_dir,
    is_python,
    lock_digest,
    locked_count,
    python_of,
    read_json,
    read_state,
    site_packages,
    write_json,
)

STEP_TIMEOUT = 1800  # seconds for one installer step (a stalled network must not hold the lock forever)
SMOKE = "import gsd_research.cli, gsd_research.researcher.cli"


def start_build(root: str, data: str) -> bool:
    """Start a build in the background (detached: it outlives the hook or launcher that starts it)."""
    try:
        os.umask(0o077)  # the plugin's data is private
        os.makedirs(data, mode=0o700, exist_ok=True)
        with open(os.path.join(data, "build.log"), "ab") as log:
            subprocess.Popen([sys.executable, "-I", "-S", "-B", cli_script(), "build", root, data],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                             start_new_session=True)
        return True
    except OSError:
        return False


def base_python() -> tuple[str | None, str]:
    """A Python >= 3.10 to build with: this interpreter's base, else a python3.1x on PATH."""
    if sys.version_info >= (3, 10):  # noqa: UP036 - hooks run on whatever python3 the system has
        return getattr(sys, "_base_executable", None) or sys.executable, ""
    for name in ("python3.13", "python3.12", "python3.11", "python3.10"):
        path = shutil.which(name)
        if path:
            return path, ""
    return None, f"gsd-research needs Python 3.10 or newer (found {sys.version.split()[0]} at {sys.executable})"


class Build:
    """One build of <data>'s environment for the lock of the plugin at <root>, holding the build lock."""

    def __init__(self, root: str, data: str, log):
        self.root, self.data, self.log = root, data, log
        self.lock = os.path.join(root, LOCK_FILE)
        self.digest = lock_digest(root) or ""
        self.target = env_dir(data, self.digest or "none")
        self.state = read_state(data)
        self.state.update(state="building", lock_sha256=self.digest, started_at=time.time(), pid=os.getpid(),
                          tool=None, step="starting", error="", timings={})
        self.state.pop("finished_at", None)

    def save(self, **changes) -> None:
        self.state.update(changes)
        write_json(os.path.join(self.data, "gsd-research-env.json"), self.state)

    def run(self, step: str, *cmd: str) -> bool:
        """Run one installer step into the log; its duration goes to the state (`timings`, seconds)."""
        self.log.write(f"$ {' '.join(cmd)}\n")
        self.log.flush()
        t0 = time.time()
        try:
            ok = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                timeout=STEP_TIMEOUT).returncode == 0
        except (OSError, subprocess.SubprocessError) as exc:
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
        self.save(tool="pip", step="creating the virtual environment")
        if not self.run("venv", base, "-m", "venv", self.target):
            return f"`{base} -m venv` failed (Debian/Ubuntu: apt install python3-venv; or install uv)"
        self.save(step=f"installing {locked_count(self.root)} locked packages with pip")
        if not self.run("install", python_of(self.target), "-m", "pip", "install", "--require-hashes", "--no-compile",
                        "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "-r", self.lock):
            return "pip could not install the locked packages (network, index or disk)"
        return ""

    def complete(self) -> str:
        """Link the package, check it imports, mark the environment ready ('' or what went wrong)."""
        self.save(step="checking the environment")
        link_package(self.target, self.root)
        if not self.run("check", python_of(self.target), "-I", "-c", SMOKE):
            return "the new environment cannot import gsd-research"
        write_json(os.path.join(self.target, READY_MARKER),
                   {"lock_sha256": self.digest, "tool": self.state.get("tool"), "built_at": time.time(),
                    "plugin_root": self.root})
        return ""

    def fail(self, why: str) -> int:
        shutil.rmtree(self.target, ignore_errors=True)
        self.log.flush()
        self.save(state="failed", finished_at=time.time(), step="", error=f"{why}{log_tail(self.data)}")
        return 1

    def execute(self) -> int:
        if not self.digest:
            return self.fail(f"the plugin has no {LOCK_FILE} ({self.root})")
        self.save()
        if read_json(os.path.join(self.target, READY_MARKER)).get("lock_sha256") != self.digest \
                or not is_python(self.target):
            shutil.rmtree(self.target, ignore_errors=True)  # a half-done build: start it again
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
        current = os.path.join(self.data, "venv")
        collect_garbage(self.data, keep={os.path.realpath(self.target), os.path.realpath(current)})
        seconds = round(time.time() - self.state["started_at"], 1)
        history = dict(self.state.get("history") or {}, **{self.state.get("tool") or "pip": seconds})
        self.save(state="ready", finished_at=time.time(), seconds=seconds, step="", history=history)
        swap(self.data, self.target)  # the last step: from here on the launchers use it
        return 0


def log_tail(data: str, lines: int = 4) -> str:
    try:
        with open(os.path.join(data, "build.log"), encoding="utf-8", errors="replace") as fh:
            tail = [line.strip() for line in fh.readlines()[-50:] if line.strip() and not line.startswith("$ ")]
    except OSError:
        return ""
    return (": " + " | ".join(tail[-lines:]))[:600] if tail else ""


def link_package(venv: str, root: str) -> None:
    """Point the environment at this plugin's lib/ (a .pth file, rewritten only when it changes)."""
    line = os.path.join(os.path.realpath(root), "lib") + "\n"
    for sp in site_packages(venv):
        path = os.path.join(sp, PTH_FILE)
        try:
            with open(path, encoding="utf-8") as fh:
                if fh.read() == line:
                    continue
        except OSError:
            pass
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(line)
        os.replace(tmp, path)


def swap(data: str, target: str) -> None:
    """Point <data>/venv at `target` with one atomic rename."""
    link = os.path.join(data, "venv")
    if os.path.isdir(link) and not os.path.islink(link):
        shutil.rmtree(link)  # not ours to keep: <data>/venv is always a link to a complete environment
    tmp = os.path.join(data, f".venv.{os.getpid()}.tmp")
    os.symlink(os.path.relpath(target, data), tmp)
    os.replace(tmp, link)


def collect_garbage(data: str, keep: set) -> None:
    """Remove environments of older locks, keeping the new one and the one it replaces (maybe in use)."""
    envs = os.path.join(data, "envs")
    for name in os.listdir(envs):
        path = os.path.join(envs, name)
        if os.path.realpath(path) not in keep:
            shutil.rmtree(path, ignore_errors=True)


def build(root: str, data: str) -> int:
    """Build unless another build runs (then return at once); 0 when the environment is ready."""
    os.umask(0o077)  # the plugin's data is private
    os.makedirs(data, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(data, "build.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another build runs; the callers watch its state
        venv = os.path.join(data, "venv")
        if read_json(os.path.join(venv, READY_MARKER)).get("lock_sha256") == lock_digest(root) and is_python(venv):
            link_package(venv, root)
            return 0
        with open(os.path.join(data, "build.log"), "w", encoding="utf-8") as log:
            return Build(root, data, log).execute()
    finally:
        os.close(fd)
