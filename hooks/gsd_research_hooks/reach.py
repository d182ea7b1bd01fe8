"""Would a Bash tool call find `gsd-research`? The hooks say "available" only when it would, else the exact fix.

The plugin route: the client appends the plugin's bin/ to the Bash tool's PATH (env_context covers a root it
refuses). The install.sh route: the commands are links in a bin folder (install.sh writes its path beside these
hooks, in `bin-dir`); when that folder is not on PATH, SessionStart appends it for the session's Bash calls
through CLAUDE_ENV_FILE, so no shell profile needs editing."""

from __future__ import annotations

import os
import shlex
import shutil
import stat

TOOLS = ("gsd-research", "researcher")
BIN_DIR_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin-dir")


class Reach:
    """fix: '' when a Bash call runs the bare command, else what to say instead of "available"; usable: the
    commands can be called at all (by full path at least)."""

    def __init__(self, fix: str = "", usable: bool = True):
        self.fix, self.usable = fix, usable


def installed_bin_dir() -> str:
    """The folder install.sh linked the commands into ('' when this is not an install.sh install)."""
    try:
        with open(BIN_DIR_FILE, encoding="utf-8") as fh:
            folder = fh.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return folder if os.path.isabs(folder) and os.access(os.path.join(folder, TOOLS[0]), os.X_OK) else ""


def _export_path(folder: str) -> bool:
    """Append the folder to later Bash commands' PATH."""
    return export_line(f'export PATH="$PATH:"{shlex.quote(folder)}')


def export_line(line: str) -> bool:
    """Append one `export` line for later Bash commands (SessionStart's CLAUDE_ENV_FILE, a regular file only)."""
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if not env_file:
        return False
    try:
        fd = os.open(env_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0),
                     0o600)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        os.write(fd, f"{line}\n".encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def export_session(session_id: str) -> bool:
    """Name the client's session for later Bash calls (GSD_RESEARCH_SESSION), so gsd-research answers within
    one session never repeat a passage in full. Only a plain id is written (it lands in a shell file)."""
    from gsd_research_hooks.common import plain_id

    sid = plain_id(session_id)
    return bool(sid) and export_line(f"export GSD_RESEARCH_SESSION={shlex.quote(sid)}")


def _exported(session: str, folder: str, record: bool = False) -> bool:
    """Did SessionStart put `folder` on this session's Bash PATH? (SubagentStart's own PATH lacks it.)"""
    from gsd_research_hooks.common import load_state, save_state

    state = load_state()
    seen = state.get("path_exported") if isinstance(state.get("path_exported"), dict) else {}
    if record:
        seen = {k: v for k, v in list(seen.items())[-19:] if k != session}  # the newest sessions only
        seen[session] = folder
        state["path_exported"] = seen
        save_state(state)
    return bool(session) and seen.get(session) == folder


def reach(export: bool, session: str = "") -> Reach:
    """Whether the bare commands run from the Bash tool; `export` (SessionStart) may put them on its PATH,
    which later hooks of the same `session` take as done."""
    if os.environ.get("CLAUDE_PLUGIN_ROOT"):
        return Reach()  # the client puts the plugin's bin/ on PATH
    if shutil.which(TOOLS[0]):
        return Reach()
    folder = installed_bin_dir()
    if not folder:
        return Reach("gsd-research is NOT available: no `gsd-research` command where Bash looks. Tell the "
                            "user the fix: install the plugin (`claude plugin marketplace add OWNER/REPO`, then "
                            "`claude plugin install research@gsd-research`) or run install.sh of a gsd-research "
                            "checkout, and start a new session. Use your other tools meanwhile", usable=False)
    if export and _export_path(folder):
        if session:
            _exported(session, folder, record=True)
        return Reach()
    if not export and _exported(session, folder):
        return Reach()
    full = " and ".join(shlex.quote(os.path.join(folder, t)) for t in TOOLS)
    line = f'export PATH="$PATH:{folder}"'
    return Reach(f"gsd-research's folder {folder} is not on the Bash tool's PATH, so the bare commands may "
                        f"answer `command not found`: call them by full path, {full}. Tell the user the lasting "
                        f"fix: add `{line}` to the shell profile and restart Claude Code")
