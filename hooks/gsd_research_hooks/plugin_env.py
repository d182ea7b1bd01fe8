"""Where gsd-research's Python environment is and what state it is in (stdlib only, shared by the hooks, the
builder and the launchers' wait).

Lookup, the launchers' order: $GSD_RESEARCH_VENV, <plugin root>/.venv, ${XDG_DATA_HOME:-~/.local/share}/
gsd-research/venv (install.sh), then the plugin's own environment under ${CLAUDE_PLUGIN_DATA}:

    <data>/venv                 symlink to envs/<lock digest>, swapped atomically once a build is complete
    <data>/envs/<digest>/       one virtual environment per lock; complete only when it holds READY_MARKER
    <data>/gsd-research-env.json  the last build: state, lock digest, step, timings (for the ETA), error
    <data>/build.lock           flock held by the one running build
    <data>/build.log            the installer's output of the last build

The plugin's environment holds the locked dependencies only; the package itself is this plugin's `lib/`,
linked by a .pth file (rewritten when the plugin moves), so a code-only update needs no rebuild."""

from __future__ import annotations

import glob
import json
import os
import time

LOCK_FILE = "requirements.lock"
STATE_FILE = "gsd-research-env.json"
READY_MARKER = ".gsd-research-ready"
PTH_FILE = "_gsd_research_plugin.pth"
RETRY_AFTER = 120  # seconds before a failed build is tried again by itself
DEFAULT_WAIT = 90  # seconds a launcher waits for a running build: under the Bash tool's default 2-minute timeout
TYPICAL_SECONDS = {"uv": 30, "pip": 90}  # first build, before this machine has a timing of its own
PACKAGE_PREFIXES = ("gsd_research", "__editable__.gsd_research", "__editable___gsd_research", "_gsd_research")


def cli_script() -> str:
    """hooks/plugin_env_cli.py: the build, the launchers' wait and a status, from a terminal too."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugin_env_cli.py")


def fix_command(root: str, data: str) -> str:
    """What a user runs in a terminal to build the plugin's environment now (after fixing a failure's cause)."""
    return f'python3 "{cli_script()}" build "{root}" "{data}"'


def lock_digest(root: str) -> str | None:
    import hashlib

    try:
        with open(os.path.join(root, LOCK_FILE), "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def env_dir(data: str, digest: str) -> str:
    return os.path.join(data, "envs", digest[:16])


def site_packages(venv: str) -> list[str]:
    return glob.glob(os.path.join(glob.escape(venv), "lib", "python3*", "site-packages"))


def has_package(venv: str) -> bool:
    """Whether the environment can import gsd_research (installed, editable, or linked by the plugin's .pth)."""
    for sp in site_packages(venv):
        try:
            if any(name.startswith(PACKAGE_PREFIXES) for name in os.listdir(sp)):
                return True
        except OSError:
            continue
    return False


def python_of(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def is_python(venv: str) -> bool:
    return os.access(python_of(venv), os.X_OK)


def read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def write_json(path: str, data: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
    os.replace(tmp, path)


def read_state(data: str) -> dict:
    return read_json(os.path.join(data, STATE_FILE))


def build_running(data: str) -> bool:
    """True while a build holds <data>/build.lock (a build that died has released it)."""
    import fcntl

    try:
        fd = os.open(os.path.join(data, "build.lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def installed_count(venv: str) -> int:
    return sum(len(glob.glob(os.path.join(glob.escape(sp), "*.dist-info"))) for sp in site_packages(venv))


def locked_count(root: str) -> int:
    """Distinct packages the lock pins (an upper bound of what one interpreter installs)."""
    names = set()
    try:
        with open(os.path.join(root, LOCK_FILE), encoding="utf-8") as fh:
            for line in fh:
                if line[:1].isalnum() and "==" in line:
                    names.add(line.split("==", 1)[0].strip().lower())
    except OSError:
        return 0
    return len(names)


def collected_count(data: str) -> int:
    """Packages pip has resolved and fetched so far in this build (its 'Collecting' lines)."""
    try:
        with open(os.path.join(data, "build.log"), encoding="utf-8", errors="replace") as fh:
            return sum(1 for line in fh if line.startswith("Collecting "))
    except OSError:
        return 0


def progress(root: str, data: str, state: dict) -> tuple[float, int]:
    """(fraction done, seconds left) of the running build, from what is on disk and the last timings."""
    total = max(locked_count(root), 1)
    digest = state.get("lock_sha256") or ""
    installed = installed_count(env_dir(data, digest)) if digest else 0
    fetched = collected_count(data) if state.get("tool") == "pip" else 0
    done = min(0.99, 0.05 + 0.45 * min(fetched, total) / total + 0.5 * min(installed, total) / total)
    elapsed = max(0.0, time.time() - float(state.get("started_at") or time.time()))
    expected = float((state.get("history") or {}).get(state.get("tool") or "pip")
                     or TYPICAL_SECONDS.get(state.get("tool") or "pip", 90))
    if done < 0.15 or elapsed < 3:
        left = expected - elapsed
    else:
        left = elapsed * (1 - done) / done
    return done, int(max(3, round(left)))


class Status:
    """One answer to 'can gsd-research run now?': ready | building | failed | missing | broken."""

    def __init__(self, state: str, venv: str = "", **info):
        self.state, self.venv, self.info = state, venv, info

    def __repr__(self) -> str:
        return f"Status({self.state!r}, {self.venv!r}, {self.info!r})"


def launcher_venvs(root: str | None) -> list[str]:
    """The environments the launchers try before the plugin's own, in their order."""
    home = os.environ.get("HOME") or "/nonexistent"
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    found = [os.environ.get("GSD_RESEARCH_VENV") or ""]
    if root:
        found.append(os.path.join(root, ".venv"))
    found.append(os.path.join(xdg, "gsd-research", "venv"))
    return [v for v in found if v]


def plugin_status(root: str, data: str) -> Status:
    """State of the plugin's own environment under `data` for the lock of the plugin at `root`."""
    digest = lock_digest(root)
    if digest is None:
        return Status("broken", reason=f"the plugin has no {LOCK_FILE} ({root})")
    venv = os.path.join(data, "venv")
    marker = read_json(os.path.join(venv, READY_MARKER))
    if marker.get("lock_sha256") == digest and is_python(venv):
        return Status("ready", venv)
    state = read_state(data)
    if build_running(data):
        done, left = progress(root, data, state)
        return Status("building", venv, progress=done, eta=left, step=state.get("step", ""),
                      outdated=bool(marker))
    if state.get("state") == "failed" and state.get("lock_sha256") == digest:
        age = time.time() - float(state.get("finished_at") or 0)
        return Status("failed", venv, error=state.get("error", ""), retry_due=age >= RETRY_AFTER,
                      finished_at=float(state.get("finished_at") or 0), log=os.path.join(data, "build.log"))
    return Status("missing", venv, outdated=bool(marker))


def resolve(root: str | None, data: str | None) -> Status:
    """What a launcher of the plugin at `root` would run on: the first environment it finds decides."""
    for venv in launcher_venvs(root):
        if is_python(venv):
            if has_package(venv):
                return Status("ready", venv)
            return Status("broken", venv, reason=f"the Python environment {venv} lacks the gsd-research package")
    if root and data:
        return plugin_status(root, data)
    return Status("missing", reason="no Python environment for gsd-research")
