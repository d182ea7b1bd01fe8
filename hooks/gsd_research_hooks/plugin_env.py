"""Where gsd-research's Python environment is and what state it is in (stdlib only, shared by the hooks, the
builder and the launchers' wait).

Lookup, the launchers' order: $GSD_RESEARCH_VENV, <plugin root>/.venv, ${XDG_DATA_HOME:-~/.local/share}/
gsd-research/venv (install.sh), then the plugin's own environment under ${CLAUDE_PLUGIN_DATA}:

    <data>/current/<digest16>   per lock digest: symlink to envs/<name>, swapped atomically once a build is
                                complete; each version of the plugin runs on the one of its own lock (env_store)
    <data>/envs/<name>/         one virtual environment per build attempt (<lock digest>-<stamp>); complete
                                only when it holds READY_MARKER (the lock and the interpreter it was built for)
    <data>/gsd-research-env.json  the last build: state, lock digest, env, step, timings (for the ETA), error
    <data>/plugin-roots.json    the plugin roots this data directory serves (data_dir.py)
    <data>/build.lock           flock held by the one running build
    <data>/build.log            the installer's output of the last build

The plugin's environment holds the locked dependencies only; the package itself is the calling plugin's `lib/`,
which its launcher puts first on sys.path and PYTHONPATH (detached workers inherit it): each version runs its own
code, and a code-only update needs no rebuild."""

from __future__ import annotations

import glob
import json
import math
import os
import re
import shlex
import time

LOCK_FILE = "requirements.lock"
STATE_FILE = "gsd-research-env.json"
READY_MARKER = ".gsd-research-ready"
USED_FILE = ".gsd-research-used"  # touched by the launchers (at most hourly): when the environment was last used
RETRY_AFTER = 120  # seconds before a failed build is tried again by itself
DEFAULT_WAIT = 90  # seconds a launcher waits for a running build: under the Bash tool's default 2-minute timeout
TYPICAL_SECONDS = {"uv": 30, "pip": 90}  # first build, before this machine has a timing of its own
PACKAGE_PREFIXES = ("gsd_research", "__editable__.gsd_research", "__editable___gsd_research", "_gsd_research")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
ENV_NAME = re.compile(r"^[0-9a-f]{16}(-[0-9a-z]{1,24})?$")
# the free space a build needs: the venv with pip, plus a share per locked package. Measured: the real lock's
# environment (152 packages pinned, 142 installed on CPython 3.11, pip --no-compile) takes 594 MB (`du -sm`),
# 3.75 MB a package; 4 MB a package keeps a modest margin (632 MB)
BASE_BYTES, PER_PACKAGE_BYTES = 24 << 20, 4 << 20


def cli_script() -> str:
    """hooks/plugin_env_cli.py: the build, the launchers' wait and a status, from a terminal too."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "plugin_env_cli.py")


def fix_command(root: str, data: str) -> str:
    """What a user runs in a terminal to build the plugin's environment now (after fixing a failure's cause);
    every path quoted for the shell, whatever it holds."""
    return " ".join(shlex.quote(part) for part in ("python3", cli_script(), "build", root, data))


def install_command(root: str) -> str:
    return "bash " + shlex.quote(os.path.join(root, "install.sh"))


def lock_digest(root: str) -> str | None:
    import hashlib

    try:
        with open(os.path.join(root, LOCK_FILE), "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


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
    except (OSError, ValueError, RecursionError):
        return {}


def write_json(path: str, data: dict) -> None:
    """Atomically; the temporary file never stays behind (a full disk fails here first)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _text(value) -> bool:
    return isinstance(value, str)


STATE_FIELDS = {
    "state": lambda v: v in ("building", "ready", "failed"),
    "lock_sha256": lambda v: isinstance(v, str) and bool(SHA256.match(v)),
    "env": lambda v: isinstance(v, str) and bool(ENV_NAME.match(v)),
    "started_at": _number, "finished_at": _number, "seconds": _number,
    "pid": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    "tool": lambda v: v is None or v in ("uv", "pip"),
    "step": _text, "error": _text, "plugin_root": _text,
    "timings": lambda v: isinstance(v, dict) and all(_text(k) and _number(x) for k, x in v.items()),
    "history": lambda v: isinstance(v, dict) and all(k in ("uv", "pip") and _number(x) and x > 0
                                                     for k, x in v.items()),
}
MARKER_FIELDS = {"lock_sha256": STATE_FIELDS["lock_sha256"], "tool": STATE_FIELDS["tool"], "python": _text,
                 "python_version": lambda v: isinstance(v, str) and bool(re.match(r"^3\.\d+(\.\d+)?$", v)),
                 "built_at": _number, "plugin_root": _text}


def valid_fields(raw: dict, fields: dict) -> dict:
    """The fields of `raw` that have their expected type; anything else is as if it were not there."""
    return {k: v for k, v in raw.items() if k in fields and fields[k](v)}


def read_state(data: str) -> dict:
    """The last build's record, each field checked (a hand-edited or foreign file cannot crash a launcher)."""
    return valid_fields(read_json(os.path.join(data, STATE_FILE)), STATE_FIELDS)


def read_marker(venv: str) -> dict:
    return valid_fields(read_json(os.path.join(venv, READY_MARKER)), MARKER_FIELDS)


def other_locks(data: str, digest: str) -> bool:
    """Whether an environment of another lock was made here (a version of the plugin used before this one)."""
    try:
        return any(name != digest[:16] for name in os.listdir(os.path.join(data, "current")))
    except OSError:
        return False


def current_link(data: str, digest: str) -> str:
    """<data>/current/<digest16>: the ready environment of one lock."""
    return os.path.join(data, "current", digest[:16])


def unsafe_dirs(venv: str) -> str:
    """'' unless the environment's directory, lib/ or site-packages is another user's or others can write it (a
    .pth dropped there would run in every call)."""
    import stat

    real = os.path.realpath(venv)
    for path in [real, os.path.join(real, "lib"), *glob.glob(os.path.join(glob.escape(real), "lib", "python3*")),
                 *site_packages(real)]:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_uid != os.geteuid():
            return f"{path} belongs to another user (uid {st.st_uid})"
        if st.st_mode & 0o022:
            return (f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):o}; "
                    f"chmod go-w {shlex.quote(path)})")
    return ""


def marker_problem(venv: str, digest: str) -> str:
    """'' when `venv` is complete for this lock and still has the interpreter it was built with."""
    marker = read_marker(venv)
    if marker.get("lock_sha256") != digest:
        return "outdated" if marker.get("lock_sha256") else "incomplete"
    if not is_python(venv):
        return "interpreter"
    if marker.get("python") != os.path.realpath(python_of(venv)) or "python_version" not in marker:
        return "interpreter"
    return ""


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


def needed_bytes(root: str) -> int:
    return BASE_BYTES + PER_PACKAGE_BYTES * locked_count(root)


def free_bytes(data: str) -> int | None:
    """Free space for this user where <data> is (or would be created); None when it cannot be told."""
    path = os.path.abspath(data)
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def collected_count(data: str) -> int:
    """Packages pip has resolved and fetched so far in this build (its 'Collecting' lines)."""
    try:
        with open(os.path.join(data, "build.log"), encoding="utf-8", errors="replace") as fh:
            return sum(1 for line in fh if line.startswith("Collecting "))
    except OSError:
        return 0


def expected_seconds(state: dict, tool: str | None = None) -> int:
    """How long a whole build takes here: this machine's last timing of the tool, else the typical one."""
    history = state.get("history") or {}
    if tool:
        return int(history.get(tool) or TYPICAL_SECONDS.get(tool, 90))
    return int(min(history.values()) if history else TYPICAL_SECONDS["pip"])


def progress(root: str, data: str, state: dict) -> tuple[float, int]:
    """(fraction done, seconds left) of the running build, from what is on disk and the last timings."""
    total = max(locked_count(root), 1)
    installed = installed_count(os.path.join(data, "envs", state["env"])) if "env" in state else 0
    fetched = collected_count(data) if state.get("tool") == "pip" else 0
    done = min(0.99, 0.05 + 0.45 * min(fetched, total) / total + 0.5 * min(installed, total) / total)
    elapsed = max(0.0, time.time() - state.get("started_at", time.time()))
    expected = expected_seconds(state, state.get("tool") or "pip")
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


def building(root: str, data: str, digest: str, state: dict, why: str) -> Status:
    """A build runs: ours (its progress), or one for another lock, after which ours starts (both ETAs)."""
    done, left = progress(root, data, state)
    if state.get("lock_sha256") == digest:
        return Status("building", current_link(data, digest), progress=done, eta=left,
                      step=state.get("step", ""), why=why)
    return Status("building", current_link(data, digest), progress=0.0, eta=left + expected_seconds(state),
                  step="waiting for the build of another version of the plugin to finish", why=why)


def plugin_status(root: str, data: str) -> Status:
    """State of the plugin's own environment under `data` for the lock of the plugin at `root`."""
    digest = lock_digest(root)
    if digest is None:  # nothing to build from: a failure no retry fixes
        return Status("failed", error=f"the plugin has no {LOCK_FILE} ({root})", decided=True)
    venv = current_link(data, digest)
    problem = marker_problem(venv, digest)
    unsafe = unsafe_dirs(venv) if not problem else ""
    if unsafe:  # as the launcher decides: never run from it
        return Status("failed", venv, error=f"its environment is not safe to use: {unsafe}", decided=True)
    if not problem:
        return Status("ready", venv)
    why = {"outdated": "update", "interpreter": "interpreter"}.get(problem, "first")
    if why == "first" and other_locks(data, digest):  # another version's environment: this is an update
        why = "update"
    state = read_state(data)
    if build_running(data):
        return building(root, data, digest, state, why)
    if state.get("state") == "failed" and state.get("lock_sha256") == digest:
        finished = state.get("finished_at", 0.0)
        return Status("failed", venv, error=state.get("error", ""), retry_due=time.time() - finished >= RETRY_AFTER,
                      finished_at=finished, log=os.path.join(data, "build.log"))
    return Status("missing", venv, why=why)


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
