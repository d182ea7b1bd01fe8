"""Which GSD line serves a project: GSD Core (`@opengsd/gsd-core`, installed as `gsd-core/`) or the original
(`get-shit-done-cc`, `get-shit-done/`). Stdlib only: the hooks use it, and install.sh's --gsd-project loads
this same file, so both decide alike."""

from __future__ import annotations

import os

CORE, ORIGINAL = "core", "original"
FOLDERS = {CORE: "gsd-core", ORIGINAL: "get-shit-done"}


def config_dirs(project: str) -> list[str]:
    """Where a GSD install may live, nearest first: the project's .claude, then the user's config folder."""
    home = os.path.expanduser("~")
    user = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
    dirs = [os.path.join(project, ".claude"), user, os.path.join(home, ".claude")]
    return list(dict.fromkeys(dirs))


def detect(project: str) -> str:
    """CORE or ORIGINAL for a GSD project (.planning/config.json) whose line is installed; '' otherwise. The
    nearest install wins (a project's own beats the user's); GSD Core wins when one folder holds both."""
    if not os.path.isfile(os.path.join(project, ".planning", "config.json")):
        return ""
    for folder in config_dirs(project):
        for line in (CORE, ORIGINAL):
            if os.path.isdir(os.path.join(folder, FOLDERS[line])):
                return line
    return ""
