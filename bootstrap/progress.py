"""How far a running build is and how long it will take: from what is on disk and this machine's last timings."""

from __future__ import annotations

import glob
import os
import time

from bootstrap.locate import LOCK_FILE, site_packages

TYPICAL_SECONDS = {"uv": 30, "pip": 90}  # first build, before this machine has a timing of its own
# the free space a build needs: the venv with pip, plus a share per locked package. Measured: the real lock's
# environment (152 packages pinned, 142 installed on CPython 3.11, pip --no-compile) takes 594 MB (`du -sm`),
# 3.75 MB a package; 4 MB a package keeps a modest margin (632 MB)
BASE_BYTES, PER_PACKAGE_BYTES = 24 << 20, 4 << 20


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
    """(fraction done, seconds left) of the running build."""
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
