"""Which data directory is this plugin's: it must be private (this user's, writable by no one else) and serve
this plugin root. <data>/plugin-roots.json lists the roots it serves; SessionStart (given both by the client)
and the builds add theirs. Two installs side by side each keep their own directory: the launchers on the
Bash tool's PATH of one never take (and rebuild) the other's."""

from __future__ import annotations

import glob
import os
import shlex
import stat

from gsd_research_hooks.plugin_env import LOCK_FILE, read_json, write_json

ROOTS_FILE = "plugin-roots.json"
MAX_ROOTS = 8


def private_problem(data: str) -> str:
    """'' when `data` (and its envs/ and current/, where the environments are) is a directory of this user that no
    other user can write, or does not exist yet."""
    for path in (data, os.path.join(data, "envs"), os.path.join(data, "current")):
        problem = _private(path)
        if problem or path == data and not os.path.isdir(data):
            return problem
    return ""


def _private(path: str) -> str:
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return ""  # nothing there yet (creating it will tell what is wrong)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{path} can be written by other users (mode {st.st_mode & 0o7777:o}; chmod go-w {shlex.quote(path)})"
    return ""


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


def find(root: str) -> str | None:
    """This plugin's data directory among the client's (private, and listing this root or laid out for it)."""
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
    if data and not private_problem(data) and serves(data, root):
        return data, ""
    found = find(root)
    if found:
        return found, ""
    if not data:
        return None, "this plugin has no data directory yet (a new Claude Code session creates it)"
    problem = private_problem(data)
    if problem:
        return None, f"its data directory is not safe to use: {problem}"
    return None, f"the data directory {data} belongs to another install of the plugin ({claimed_roots(data)[-1]})"
