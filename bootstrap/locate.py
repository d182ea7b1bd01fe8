"""Where gsd-research's Python environment may be: one lookup order for the launchers, the hooks and the CLI.

The first that exists decides: $GSD_RESEARCH_VENV, <plugin root>/.venv, ${XDG_DATA_HOME:-~/.local/share}/
gsd-research/venv (install.sh), then the plugin's own environment under its data directory (${CLAUDE_PLUGIN_DATA},
exported to the Bash tool as $GSD_RESEARCH_PLUGIN_DATA, else found under the client's plugins/data/):

    <data>/current/<digest16>   per lock digest: symlink to envs/<name>, swapped atomically once a build is
                                complete; each version of the plugin runs on the one of its own lock (store)
    <data>/envs/<name>/         one virtual environment per build attempt (<lock digest>-<stamp>); complete
                                only when it holds READY_MARKER (the lock and the interpreter it was built for)
    <data>/gsd-research-env.json  the last build: state, lock digest, env, step, timings (for the ETA), error
    <data>/plugin-roots.json    the plugin roots this data directory serves
    <data>/build.lock           flock held by the one running build
    <data>/build.log            the installer's output of the last build

The plugin's environment holds the locked dependencies only; the package is the calling plugin's `lib/`, put
first on sys.path and PYTHONPATH by the launcher: each version runs its own code."""

from __future__ import annotations

import os

LOCK_FILE = "requirements.lock"
STATE_FILE = "gsd-research-env.json"
READY_MARKER = ".gsd-research-ready"
USED_FILE = ".gsd-research-used"  # touched by the launchers (at most hourly): when the environment was last used
ROOTS_FILE = "plugin-roots.json"
MAX_ROOTS = 8


def plugin_root() -> str:
    """The plugin's directory: the parent of this package (bin/, hooks/, lib/ and requirements.lock beside it)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def entry() -> str:
    """bootstrap/__main__.py, run as `python3 -I -S <entry> SUBCOMMAND ...` (a file: no runpy to import)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py")


def fix_command(root: str, data: str, action: str = "build") -> str:
    """What a user runs in a terminal to (re)build the plugin's environment; every path quoted for the shell."""
    import shlex  # imports re: only where a message needs it (start-up time)

    return " ".join(shlex.quote(part) for part in ("python3", os.path.join(root, "bootstrap"), action, root, data))


def install_command(root: str) -> str:
    import shlex

    return "bash " + shlex.quote(os.path.join(root, "install.sh"))


def lock_digest(root: str) -> str | None:
    import hashlib

    try:
        with open(os.path.join(root, LOCK_FILE), "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def current_link(data: str, digest: str) -> str:
    """<data>/current/<digest16>: the ready environment of one lock."""
    return os.path.join(data, "current", digest[:16])


def lib_dirs(venv: str) -> list[str]:
    """<venv>/lib/python3*: listed without glob (which imports re: start-up time on every call)."""
    lib = os.path.join(venv, "lib")
    try:
        return [os.path.join(lib, n) for n in sorted(os.listdir(lib)) if n.startswith("python3")]
    except OSError:
        return []


def site_packages(venv: str) -> list[str]:
    return [p for p in (os.path.join(d, "site-packages") for d in lib_dirs(venv)) if os.path.isdir(p)]


def python_of(venv: str) -> str:
    return os.path.join(venv, "bin", "python")


def is_python(venv: str) -> bool:
    return os.access(python_of(venv), os.X_OK)


def launcher_venvs(root: str | None) -> list[str]:
    """The environments tried before the plugin's own, in their order."""
    home = os.environ.get("HOME") or "/nonexistent"
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    found = [os.environ.get("GSD_RESEARCH_VENV") or ""]
    if root:
        found.append(os.path.join(root, ".venv"))
    found.append(os.path.join(xdg, "gsd-research", "venv"))
    return [v for v in found if v]


def first_venv(root: str | None) -> str | None:
    """The first of launcher_venvs with an interpreter: it decides, whatever state it is in."""
    return next((venv for venv in launcher_venvs(root) if is_python(venv)), None)


def read_json(path: str) -> dict:
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, RecursionError):
        return {}


def write_json(path: str, data: dict) -> None:
    """Atomically; the temporary file never stays behind (a full disk fails here first)."""
    import json

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


# -- which data directory is this plugin's --------------------------------------------------------------------
# It must be private (verdict.private_problem) and serve this plugin root: <data>/plugin-roots.json lists the
# roots it serves. Two installs side by side each keep their own directory.

def claimed_roots(data: str) -> list[str]:
    roots = read_json(os.path.join(data, ROOTS_FILE)).get("roots")
    return [r for r in roots if isinstance(r, str)][-MAX_ROOTS:] if isinstance(roots, list) else []


def cache_data_dir(root: str) -> str | None:
    """The client's layout: <config>/plugins/cache/<marketplace>/<plugin>/<version> keeps its data in
    <config>/plugins/data/<plugin>-<marketplace> (the same directory across updates)."""
    parts = os.path.realpath(root).split(os.sep)
    if len(parts) >= 6 and parts[-5:-3] == ["plugins", "cache"]:
        return os.sep.join(parts[:-5] + ["plugins", "data", f"{parts[-2]}-{parts[-3]}"])
    return None


def serves(data: str, root: str) -> bool:
    """`data` lists `root`, is root's data directory by the client's layout, or lists no plugin root that still
    exists (a new directory, or the versions it served were removed by an update)."""
    real = os.path.realpath(root)
    roots = claimed_roots(data)
    if real in roots:
        return True
    cached = cache_data_dir(real)
    if cached and os.path.realpath(data) == os.path.realpath(cached):
        return True
    return not any(os.path.exists(os.path.join(r, LOCK_FILE)) for r in roots if r != real)


def register(data: str, root: str) -> None:
    """`data` serves `root` (the most recent last); best effort: an unwritable directory is reported elsewhere."""
    real = os.path.realpath(root)
    roots = claimed_roots(data)
    if roots[-1:] == [real]:
        return
    try:
        write_json(os.path.join(data, ROOTS_FILE), {"roots": [r for r in roots if r != real][1 - MAX_ROOTS:] + [real]})
    except OSError:
        pass


def config_dir() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")


def find_data(root: str) -> str | None:
    """This plugin's data directory among the client's (private, and listing this root or laid out for it)."""
    import glob

    from bootstrap.verdict import private_problem

    real = os.path.realpath(root)
    cached = cache_data_dir(real)
    pattern = os.path.join(glob.escape(config_dir()), "plugins", "data", "research-*")
    for data in ([cached] if cached else []) + sorted(glob.glob(pattern)):
        if os.path.isdir(data) and not private_problem(data) and (data == cached or real in claimed_roots(data)):
            return data
    return None


def choose(root: str, data: str | None) -> tuple[str | None, str]:
    """(the data directory a launcher of `root` uses, '') or (None, why there is none): the one it was given
    when that one is private and serves it, else the one that lists it."""
    from bootstrap.verdict import private_problem

    if data and not private_problem(data) and serves(data, root):
        return data, ""
    found = find_data(root)
    if found:
        return found, ""
    if not data:
        return None, "this plugin has no data directory yet (a new Claude Code session creates it)"
    problem = private_problem(data)
    if problem:
        return None, f"its data directory is not safe to use: {problem}"
    return None, f"the data directory {data} belongs to another install of the plugin ({claimed_roots(data)[-1]})"
