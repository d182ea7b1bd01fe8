"""Private state: a 0077 umask at every process edge, our state folders closed to others, and a state folder
that someone else controls refused.

Every entry point (`gsd-research` and the deep worker it spawns as `gsd-research jobs worker`,
`researcher` and its MCP server `researcher serve`) calls `private_process()` first: folders are then
created 0700 and files 0600 whoever writes them (our code, SQLite, Chroma: its Rust core honours the
umask, checked by tests/test_private_state.py).

A state root (GSD_RESEARCH_HOME, the plugin data folder) that already exists is closed (0700) only when it is
ours: it belongs to the user running us, carries no sticky or setgid bit (a shared folder such as /tmp), and
is empty, or carries our marker file, or holds our state (config.yaml, the HTTP cache, job logs). A folder
that is not ours keeps its mode: the files we create inside it are private all the same.

`unsafe_state()` refuses a home another user owns or others can write to, and a config.yaml likewise:
whoever controls them controls where keys are sent and what the caches answer (STATE_UNSAFE).
`open_private()` opens a state file (logs, ledgers) without following a symlink planted in its place;
`open_lock()` opens a lock or counter file the same way but refuses a symlink or anything but a regular file
(STATE_UNSAFE) rather than replace it: another process may hold the lock through it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

PRIVATE_UMASK = 0o077
_USER_UMASK: list[int] = []  # the umask the user ran us with (set by private_process)
MARKER = ".gsd-research-state"  # written into a state root we closed: it is ours from then on
OUR_STATE = ("config.yaml", "cache/http_cache.sqlite", "conversation-logs", "jobs/worker.lock", "usage")


def state_roots() -> list[Path]:
    """Where gsd-research keeps state: GSD_RESEARCH_HOME and, inside Claude Code, the plugin data folder."""
    from gsd_research.core.config import home

    roots = [home()]
    data = os.environ.get("CLAUDE_PLUGIN_DATA", "").strip()
    if data:
        roots.append(Path(data).expanduser())
    return roots


def private_process(close: bool = True) -> int:
    """Set the private umask and (unless `close` is False: --version, --help) close the state roots that are
    ours; returns the previous umask."""
    previous = os.umask(PRIVATE_UMASK)
    _USER_UMASK[:] = [previous]
    if close:
        for root in state_roots():
            close_dir(root)
    return previous


@contextlib.contextmanager
def user_umask(enabled: bool = True):
    """The user's own umask for the duration (files the user asked for outside our state: reports)."""
    if not enabled or not _USER_UMASK:
        yield
        return
    current = os.umask(_USER_UMASK[0])
    try:
        yield
    finally:
        os.umask(current)


def close_dir(path: Path) -> None:
    """chmod 0700 a state folder of ours that others can enter, and mark it as ours."""
    try:
        info = os.stat(path)
    except OSError:
        return
    if not stat.S_ISDIR(info.st_mode) or not _ours(Path(path), info):
        return
    try:
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)
        marker = Path(path) / MARKER
        if not marker.exists():
            os.close(open_private(marker, os.O_WRONLY | os.O_CREAT))
    except OSError:
        pass


def _ours(path: Path, info: os.stat_result) -> bool:
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_ISVTX | stat.S_ISGID):
        return False  # another user's, or a shared folder (/tmp, a setgid team folder)
    try:
        if (path / MARKER).exists() or not any(os.scandir(path)):
            return True
    except OSError:
        return False
    return any((path / name).exists() for name in OUR_STATE)


def unsafe_state(*configs: str):
    """A GsdError (STATE_UNSAFE) when GSD_RESEARCH_HOME, its config.yaml or another of its `configs` (file
    names: `researcher` adds researcher.yaml) belongs to another user or others may write to it; None when it
    is safe (or does not exist yet: we create it private). Every entry point asks it (`gsd-research`,
    `researcher` and its MCP server); the hooks, which cannot import this package, apply the same rule
    (hooks/gsd_research_hooks/common.py `unsafe_home`, kept equal by tests/test_state_unsafe.py)."""
    from gsd_research.core.config import CONFIG_FILE, home

    root = home()
    files = [(root / name, f"its {name}" if name != CONFIG_FILE else "its config file")
             for name in dict.fromkeys((CONFIG_FILE, *configs))]
    for path, what in ((root, "GSD_RESEARCH_HOME"), *files):
        try:
            info = os.stat(path)  # a symlink is judged by what it points at
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) != (path == root):
            continue  # a home that is a file, a config that is a folder: STATE_NOT_WRITABLE or USAGE_ERROR later
        problem = None
        if info.st_uid != os.getuid():
            problem = f"belongs to another user (uid {info.st_uid})"
        elif info.st_mode & 0o022:
            problem = f"can be written by {'others' if info.st_mode & 0o002 else 'its group'} (mode {oct(stat.S_IMODE(info.st_mode))})"
        if problem:
            return _unsafe(root, path, what, problem)
    return None


def _unsafe(root: Path, path: Path, what: str, problem: str):
    from gsd_research.core.errors import StateUnsafe

    return StateUnsafe(
        f"Refusing to use {what} {path}: it {problem}. Whoever controls it controls where API keys are sent "
        "and what the caches answer",
        suggestions=["Point GSD_RESEARCH_HOME at a folder of your own (unset it for ~/.gsd-research)",
                     f"Or make it yours and private: chown -R {os.getuid()} {root} && chmod 700 {root} "
                     f"&& chmod 600 {root / 'config.yaml'}"],
        details={"path": str(path)})


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_APPEND | os.O_CREAT) -> int:
    """os.open of a state file, private (0600) and never through a symlink: one planted in its place (to make
    us append to or lock another file) is removed and the file created anew."""
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o600)
    except OSError:
        if not os.path.islink(path):
            raise
        os.unlink(path)  # the link, never its target
        return os.open(path, flags, 0o600)


def open_lock(path: Path) -> int:
    """A read-write descriptor of the lock (or counter) file `path`, created 0600 when missing, never through a
    symlink: a symlink or a non-regular file in its place (planted to make us create, lock or write another
    file) is refused with STATE_UNSAFE. FileNotFoundError when its folder is gone."""
    import errno

    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise _planted(path, "is a symbolic link") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        os.close(fd)
        raise _planted(path, "is not a regular file of ours")
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def flock(path: Path, blocking: bool = True):
    """An exclusive flock on the lock file `path` (opened by `open_lock`: a planted symlink is refused, never
    followed); yields False at once when not blocking and another process holds it."""
    import fcntl

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _planted(path: Path, problem: str):
    from gsd_research.core.errors import StateUnsafe

    return StateUnsafe(f"Refusing the lock file {path}: it {problem}, which we never create. Someone may have planted "
                    "it to make us write elsewhere",
                    suggestions=[f"Check what it points at, then remove it: rm {path}"], details={"path": str(path)})
