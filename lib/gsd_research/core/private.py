"""Private state: a 0077 umask at every process edge and GSD_RESEARCH_HOME closed to others.

Every entry point (`gsd-research` and the deep worker it spawns as `gsd-research jobs worker`,
`researcher` and its MCP server `researcher serve`) calls `private_process()` first: folders are then
created 0700 and files 0600 whoever writes them (our code, SQLite, Chroma: its Rust core honours the
umask, checked by tests/test_private_state.py). An existing home (or plugin data folder) that the group
or others can enter is closed (0700) when it belongs to the user running us, which also covers files an
older version left 0644 inside it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077


def state_roots() -> list[Path]:
    """Where gsd-research keeps state: GSD_RESEARCH_HOME and, inside Claude Code, the plugin data folder."""
    from gsd_research.core.config import home

    roots = [home()]
    data = os.environ.get("CLAUDE_PLUGIN_DATA", "").strip()
    if data:
        roots.append(Path(data).expanduser())
    return roots


def private_process() -> int:
    """Set the private umask and close the state roots; returns the previous umask."""
    previous = os.umask(PRIVATE_UMASK)
    for root in state_roots():
        close_dir(root)
    return previous


def close_dir(path: Path) -> None:
    """chmod 0700 a folder of ours that others can enter (never a folder of another user)."""
    try:
        info = os.stat(path)
    except OSError:
        return
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
        try:
            os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
        except OSError:
            pass

