"""Is an environment safe and ready to run: one decision for the launchers, the hooks and the CLI, and its two
wordings (the launcher's JSON envelope here, the hooks' sentence in hooks/gsd_research_hooks/env_context.py).

Safe: the data directories, the environment, its bin/ and interpreter, pyvenv.cfg, lib/ and site-packages are
this user's (or root's, for a system interpreter) and no one else can write them: a planted bin/python or a .pth
would run in every call. Ready: its marker names this lock's sha256 and the interpreter it still has."""

from __future__ import annotations

import math
import os
import stat
import time

from bootstrap.locate import (
    READY_MARKER,
    STATE_FILE,
    current_link,
    first_venv,
    fix_command,
    install_command,
    is_python,
    lib_dirs,
    lock_digest,
    python_of,
    read_json,
    site_packages,
)

RETRY_AFTER = 120  # seconds before a failed build is tried again by itself
DEFAULT_WAIT = 90  # seconds a launcher waits for a running build: under the Bash tool's default 2-minute timeout
PACKAGE_PREFIXES = ("gsd_research", "__editable__.gsd_research", "__editable___gsd_research", "_gsd_research")
PREPARING, FAILED, MISSING = "ENVIRONMENT_PREPARING", "ENVIRONMENT_BUILD_FAILED", "ENVIRONMENT_MISSING"
EXIT = {PREPARING: 6, FAILED: 3, MISSING: 3}
WHY = {"first": "first use after installing the plugin",
       "update": "a plugin update changed its locked dependencies",
       "interpreter": "the Python it was built with changed (an upgrade)",
       "broken": "the environment was damaged"}


# -- safety ---------------------------------------------------------------------------------------------------

def owner_problem(path: str, owners: tuple[int, ...]) -> str:
    """'' when `path` (followed through links) is missing, or owned by one of `owners` and not writable by
    group or others; else why not."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if st.st_uid not in owners:
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        import shlex

        return f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):o}; chmod go-w {shlex.quote(path)})"
    return ""


def private_problem(data: str) -> str:
    """'' when `data` (and its envs/ and current/) is a directory of this user no one else can write, or does not
    exist yet."""
    for path in (data, os.path.join(data, "envs"), os.path.join(data, "current")):
        if os.path.exists(path) and not os.path.isdir(path):
            return f"{path} is not a directory"
        problem = owner_problem(path, (os.geteuid(),))
        if problem or path == data and not os.path.isdir(data):
            return problem
    return ""


def unsafe_env(venv: str) -> str:
    """'' unless a file the environment runs from (its interpreter, bin/, pyvenv.cfg, lib/, site-packages) could
    have been planted: another user's, or writable by others. A system interpreter may be root's."""
    real, me = os.path.realpath(venv), os.geteuid()
    interpreter = os.path.realpath(python_of(real))
    own = [real, os.path.join(real, "bin"), os.path.join(real, "pyvenv.cfg"), os.path.join(real, "lib"),
           *lib_dirs(real), *site_packages(real)]
    system = []
    if interpreter.startswith(real + os.sep):
        own.append(interpreter)  # a copied interpreter is the environment's own
    else:
        system = [interpreter, os.path.dirname(interpreter)]
    checks = [(path, (me, 0)) for path in system] + [(path, (me,)) for path in own]
    for path, owners in checks:
        problem = owner_problem(path, owners)
        if problem:
            return problem
    return ""


# -- records --------------------------------------------------------------------------------------------------
# checked without re (its import costs start-up time on every call)

def _chars(text: str, allowed: str) -> bool:
    return all(c in allowed for c in text)


def is_sha256(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and _chars(value, "0123456789abcdef")


def is_env_name(name) -> bool:
    """<digest16> or <digest16>-<stamp>: the names of envs/ and current/ entries."""
    if not isinstance(name, str) or len(name) < 16 or not _chars(name[:16], "0123456789abcdef"):
        return False
    stamp = name[16:]
    return not stamp or (stamp[0] == "-" and 1 <= len(stamp) - 1 <= 24
                         and _chars(stamp[1:], "0123456789abcdefghijklmnopqrstuvwxyz"))


def is_version(value) -> bool:
    parts = value.split(".") if isinstance(value, str) else []
    return 2 <= len(parts) <= 3 and parts[0] == "3" and all(p.isdigit() and p.isascii() for p in parts)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _text(value) -> bool:
    return isinstance(value, str)


STATE_FIELDS = {
    "state": lambda v: v in ("building", "ready", "failed"),
    "lock_sha256": is_sha256,
    "env": is_env_name,
    "started_at": _number, "finished_at": _number, "seconds": _number,
    "pid": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
    "tool": lambda v: v is None or v in ("uv", "pip"),
    "step": _text, "error": _text, "plugin_root": _text,
    "timings": lambda v: isinstance(v, dict) and all(_text(k) and _number(x) for k, x in v.items()),
    "history": lambda v: isinstance(v, dict) and all(k in ("uv", "pip") and _number(x) and x > 0
                                                     for k, x in v.items()),
}
MARKER_FIELDS = {"lock_sha256": STATE_FIELDS["lock_sha256"], "tool": STATE_FIELDS["tool"], "python": _text,
                 "python_version": is_version,
                 "built_at": _number, "plugin_root": _text}


def valid_fields(raw: dict, fields: dict) -> dict:
    """The fields of `raw` that have their expected type; anything else is as if it were not there."""
    return {k: v for k, v in raw.items() if k in fields and fields[k](v)}


def read_state(data: str) -> dict:
    """The last build's record, each field checked (a hand-edited or foreign file cannot crash a launcher)."""
    return valid_fields(read_json(os.path.join(data, STATE_FILE)), STATE_FIELDS)


def read_marker(venv: str) -> dict:
    return valid_fields(read_json(os.path.join(venv, READY_MARKER)), MARKER_FIELDS)


# -- readiness ------------------------------------------------------------------------------------------------

def marker_problem(venv: str, digest: str) -> str:
    """'' when `venv` is complete for this lock and still has the interpreter it was built with."""
    marker = read_marker(venv)
    if marker.get("lock_sha256") != digest:
        return "outdated" if marker.get("lock_sha256") else "incomplete"
    if not is_python(venv) or "python_version" not in marker:
        return "interpreter"
    if marker.get("python") != os.path.realpath(python_of(venv)):
        return "interpreter"
    return ""


def has_package(venv: str) -> bool:
    """Whether the environment can import gsd_research (installed, editable, or linked by the plugin's .pth)."""
    for sp in site_packages(venv):
        try:
            if any(name.startswith(PACKAGE_PREFIXES) for name in os.listdir(sp)):
                return True
        except OSError:
            continue
    return False


def other_locks(data: str, digest: str) -> bool:
    """Whether an environment of another lock was made here (a version of the plugin used before this one)."""
    try:
        return any(name != digest[:16] for name in os.listdir(os.path.join(data, "current")))
    except OSError:
        return False


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


class Status:
    """One answer to 'can gsd-research run now?': ready | building | failed | missing | broken."""

    def __init__(self, state: str, venv: str = "", **info):
        self.state, self.venv, self.info = state, venv, info

    def __repr__(self) -> str:
        return f"Status({self.state!r}, {self.venv!r}, {self.info!r})"


def building(root: str, data: str, digest: str, state: dict, why: str) -> Status:
    """A build runs: ours (its progress), or one for another lock, after which ours starts (both ETAs)."""
    from bootstrap.progress import expected_seconds, progress

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
        return Status("failed", error=f"the plugin has no requirements.lock ({root})", decided=True)
    unsafe = private_problem(data)
    if unsafe:
        return Status("failed", error=f"its data directory is not safe to use: {unsafe}", decided=True)
    venv = current_link(data, digest)
    unsafe = unsafe_env(venv) if os.path.isdir(venv) else ""
    if unsafe:  # never run from it, nor rebuild over it: someone else may be writing there
        return Status("failed", venv, error=f"its environment is not safe to use: {unsafe}", decided=True)
    problem = marker_problem(venv, digest)
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


def venv_status(venv: str) -> Status:
    """One of the launcher environments (not the plugin's own): safe, and holding the package."""
    unsafe = unsafe_env(venv)
    if unsafe:
        return Status("failed", venv, error=f"the Python environment {venv} is not safe to use: {unsafe}",
                      decided=True)
    if has_package(venv):
        return Status("ready", venv)
    return Status("broken", venv, reason=f"the Python environment {venv} lacks the gsd-research package")


def resolve(root: str | None, data: str | None) -> Status:
    """What a launcher of the plugin at `root` would run on: the first environment found decides."""
    venv = first_venv(root)
    if venv:
        return venv_status(venv)
    if root and data:
        return plugin_status(root, data)
    return Status("missing", reason="no Python environment for gsd-research")


# -- the launcher's wording -----------------------------------------------------------------------------------

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
    if found.state == "failed":  # a launcher environment refused as unsafe
        import shlex

        return Verdict(FAILED, info.get("error") or "unknown error",
                       [f"make it private (chmod -R go-w {shlex.quote(found.venv)}) or remove it",
                        f"or install it again: {install_command(root or '')}"])
    reason = info.get("reason") or info.get("error") or "no Python environment"
    fixes = ["install the plugin from its marketplace (it builds its own environment) and start a new session"]
    if root:
        fixes.append(f"or run the install.sh of a gsd-research checkout: {install_command(root)}")
    return Verdict(MISSING, reason, fixes)


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
    if v.code == FAILED and data:
        message = f"Building {prog}'s Python environment failed: {found.info.get('error') or 'unknown error'}."
        if found.info.get("log"):
            message += f" Log: {found.info['log']}"
    elif v.code == FAILED:
        message = f"{prog} cannot run: {v.cause}"
    else:
        message = f"No Python environment for {prog}: {v.cause}"
    return {"success": False, "command": command, "error": {
        "code": v.code, "message": message,
        "suggestions": [f[0].upper() + f[1:] for f in v.fixes] + ["Until then continue with your other tools"]}}
