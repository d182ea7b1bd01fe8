"""Where the plugin's environments are kept: one per lock digest, so every installed version of the plugin runs on
the environment of its own lock (Claude Code gives all versions one data directory; an old session and a new one
side by side after an update each keep theirs, never rebuilding the other's).

    <data>/current/<digest16>   symlink to envs/<digest16>-<stamp>, swapped atomically once a build is complete
    <data>/envs/<name>/         one virtual environment per build attempt; USED_FILE's mtime: its last use

Garbage collection (after a build, which holds the build lock) removes dead or replaced attempts at once, and the
environments of other locks only once unused for GC_AFTER; never one a running process uses."""

from __future__ import annotations

import os
import shutil
import time

from bootstrap.locate import USED_FILE, current_link
from bootstrap.verdict import is_env_name, marker_problem, read_marker

GC_AFTER = 7 * 86400  # seconds an environment of another lock stays after its last use
LEGACY_LINK = "venv"  # <data>/venv of earlier versions (one environment for all versions)


def processes_using(path: str) -> list[int]:
    """Processes of this user whose command line names a file under `path` (Linux /proc; [] elsewhere)."""
    prefix, found = path.rstrip("/") + "/", []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
    except OSError:
        return []
    for pid in pids:
        try:
            if os.stat(f"/proc/{pid}").st_uid != os.geteuid():
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                args = fh.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        if any(a.startswith(prefix) for a in args):
            found.append(pid)
    return found


def swap(data: str, target: str, digest: str) -> None:
    """Point <data>/current/<digest16> at `target` with one atomic rename."""
    link = current_link(data, digest)
    os.makedirs(os.path.dirname(link), mode=0o700, exist_ok=True)
    if os.path.isdir(link) and not os.path.islink(link):
        shutil.rmtree(link)  # not ours to keep: the link always points at a complete environment
    tmp = f"{link}.{os.getpid()}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(os.path.relpath(target, os.path.dirname(link)), tmp)
    os.replace(tmp, link)


def adopt(data: str, digest: str) -> bool:
    """A complete environment of this lock that no link names yet (an earlier version's <data>/venv, an update
    back to a lock seen before): linked instead of rebuilt."""
    envs = os.path.join(data, "envs")
    try:
        names = sorted(os.listdir(envs), reverse=True)  # the newest attempt first
    except OSError:
        return False
    for name in names:
        path = os.path.join(envs, name)
        if is_env_name(name) and name.startswith(digest[:16]) and not marker_problem(path, digest):
            swap(data, path, digest)
            return True
    return False


def last_used(env: str) -> float:
    try:
        return os.stat(os.path.join(env, USED_FILE)).st_mtime
    except OSError:
        return read_marker(env).get("built_at", 0.0)


def links(data: str) -> list[str]:
    """Every link naming an environment: current/* and an earlier version's <data>/venv."""
    folder = os.path.join(data, "current")
    try:
        found = [os.path.join(folder, n) for n in os.listdir(folder) if is_env_name(n)]
    except OSError:
        found = []
    legacy = os.path.join(data, LEGACY_LINK)
    return found + ([legacy] if os.path.islink(legacy) else [])


def collect_garbage(data: str, keep: set, now: float | None = None) -> None:
    """Remove the environments of other locks unused for GC_AFTER (and their links), then every environment no
    link names but those in `keep` (the new one and the one it replaced, which a starting call may still be on);
    never one a running process uses (a detached worker)."""
    now = time.time() if now is None else now
    named = set()
    for link in links(data):
        target = os.path.realpath(link)
        stale = target not in keep and now - last_used(target) > GC_AFTER
        if stale and not processes_using(target) or not os.path.isdir(target):
            os.unlink(link)
            continue
        named.add(target)
    envs = os.path.join(data, "envs")
    for name in os.listdir(envs):
        path = os.path.join(envs, name)
        real = os.path.realpath(path)
        if real not in keep and real not in named and not processes_using(path):
            shutil.rmtree(path, ignore_errors=True)
