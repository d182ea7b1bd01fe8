"""Every change one install run makes, recorded before it is made, so a failure or a killed run is undone."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path


class InstallError(Exception):
    """A clear, user-facing reason an install cannot go on."""


TMP_SUFFIX = ".gsd-research-install.tmp"


def temp_name(path: Path) -> Path:
    """The one temporary name an atomic write of `path` uses (fixed, so a killed run's leftover is known)."""
    return path.parent / f".{path.name}{TMP_SUFFIX}"


def remove_temp(path: Path) -> None:
    tmp = temp_name(path)
    if os.path.lexists(tmp) and not os.path.isdir(tmp):
        os.unlink(tmp)


def atomic_write(path: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
    """Replace `path` (a real file, not a link) with `data` and exactly `mode` (umask ignored)."""
    tmp = temp_name(path)
    remove_temp(path)  # a killed run's leftover
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, mode)
        if owner and owner != (os.geteuid(), os.getegid()):
            try:
                os.fchown(fd, *owner)
            except PermissionError:
                pass  # not root: the file is ours anyway
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def write_in_place(path: Path, data: bytes, mode: int | None = None) -> None:
    """Overwrite the file `path` itself: its inode, hard links, owner and extended attributes stay (how Claude
    Code and editors write it). Not atomic; the journal holds the old bytes for a crash."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        view, done = memoryview(data), 0
        while done < len(data):
            done += os.pwrite(fd, view[done:], done)
        os.ftruncate(fd, len(data))
        if mode is not None and stat.S_IMODE(os.fstat(fd).st_mode) != mode:
            os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def real_target(path: Path) -> Path:
    """Where writes to `path` land: a symlinked settings.json (dotfiles) is written through to its target."""
    return Path(os.path.realpath(path))


def _alive_installer(pid: int) -> bool:
    """Whether process `pid` is running and is an install.sh run (its Python side)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        return b"main.py" in cmdline.read_bytes()
    except OSError:
        return not cmdline.parent.parent.is_dir()  # no /proc: trust that the process exists


class Journal:
    """Write-ahead log of one run in DATA/install-journal.json (0600: it may hold a settings file's bytes)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: not persisted (uninstall's single writes)
        self.steps: list[dict] = []

    # -- recording ---------------------------------------------------------------------------------------
    def _record(self, step: dict) -> None:
        self.steps.append(step)
        if self.path is not None and self.path.parent.is_dir():
            atomic_write(self.path, json.dumps({"pid": os.getpid(), "steps": self.steps}).encode(), 0o600)

    def created_dirs(self) -> list[str]:
        return [s["path"] for s in self.steps if s["op"] == "mkdir"]

    def made_dirs(self, dirs: list[Path]) -> None:
        """Record directories made before this journal existed (so a rollback removes them too)."""
        for d in dirs:
            self._record({"op": "mkdir", "path": str(d)})

    # -- changes -----------------------------------------------------------------------------------------
    def mkdirs(self, path: Path, mode: int = 0o755) -> None:
        """mkdir -p, each directory created recorded (and given `mode`, umask ignored)."""
        missing = []
        p = path
        while not os.path.lexists(p):
            missing.append(p)
            p = p.parent
        if not p.is_dir():
            raise InstallError(f"{p} is not a directory (needed for {path})")
        for d in reversed(missing):
            self._record({"op": "mkdir", "path": str(d)})
            d.mkdir()
            d.chmod(mode)

    def write(self, path: Path, data: bytes, mode: int | None = None, new_mode: int = 0o644,
              in_place: bool = False) -> bool:
        """Write `data` to `path` (through a symlink to its target). `mode` None keeps the file's mode;
        a new file gets `new_mode`. `in_place`: an existing file is overwritten as itself (the user's files:
        inode, hard links, owner, extended attributes kept), else replaced atomically. Returns whether
        anything changed."""
        real = real_target(path)
        if real.is_dir():
            raise InstallError(f"{path} is a directory, not a file")
        if real.exists():
            st = real.stat()
            old_mode = stat.S_IMODE(st.st_mode)
            target_mode = old_mode if mode is None else mode
            old = real.read_bytes()
            if old == data and old_mode == target_mode:
                remove_temp(real)
                return False
            self._record({"op": "replace", "path": str(real), "data": base64.b64encode(old).decode(),
                          "mode": old_mode, "mtime_ns": st.st_mtime_ns, "owner": [st.st_uid, st.st_gid],
                          "in_place": in_place})
            if in_place:
                write_in_place(real, data, target_mode)
            else:
                atomic_write(real, data, target_mode, (st.st_uid, st.st_gid))
            return True
        self.mkdirs(real.parent)
        self._record({"op": "create", "path": str(real)})
        atomic_write(real, data, new_mode if mode is None else mode)
        return True

    def symlink(self, link: Path, target: Path) -> None:
        self.mkdirs(link.parent)
        self._record({"op": "symlink", "path": str(link)})
        link.symlink_to(target)

    def remove(self, path: Path) -> None:
        """Delete a file we installed, its bytes kept in the journal so a rollback puts it back."""
        st = path.stat()
        self._record({"op": "remove", "path": str(path), "data": base64.b64encode(path.read_bytes()).decode(),
                      "mode": stat.S_IMODE(st.st_mode), "mtime_ns": st.st_mtime_ns})
        path.unlink()

    def unlink_link(self, link: Path) -> None:
        self._record({"op": "unlink_link", "path": str(link), "target": os.readlink(link)})
        link.unlink()

    # -- ending ------------------------------------------------------------------------------------------
    def commit(self) -> None:
        self.steps = []
        if self.path is not None and self.path.is_file():
            self.path.unlink()

    def rollback(self) -> list[str]:
        """Undo every recorded step, newest first; returns what could not be undone."""
        failures = []
        if self.path is not None:
            remove_temp(self.path)
            if self.path.is_file():
                self.path.unlink()
        for step in reversed(self.steps):
            try:
                _undo(step)
            except OSError as exc:
                failures.append(f"{step['op']} {step['path']}: {exc.strerror or exc}")
        self.steps = []
        return failures

    @classmethod
    def recover(cls, path: Path) -> list[str] | None:
        """Roll back what a killed run left (its journal, its temporary files); None when there was nothing to
        recover. A journal whose run is still alive is refused (InstallError), never rolled back under it."""
        if not path.is_file():
            remove_temp(path)
            return None
        try:
            saved = json.loads(path.read_text())
            steps, pid = saved["steps"], saved.get("pid")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            steps, pid = [], None
        if isinstance(pid, int) and _alive_installer(pid):
            raise InstallError(f"another install.sh run (process {pid}) is still working ({path} is its journal); "
                               "wait for it to finish, then run install.sh again")
        journal = cls(path)
        journal.steps = [s for s in steps if isinstance(s, dict) and "op" in s and "path" in s]
        return journal.rollback()


def _undo_mkdir(path: Path) -> None:
    if not path.is_dir() or path.is_symlink():
        return
    pycache = path / "__pycache__"  # left by a hook run from there
    if pycache.is_dir() and all(p.name == "__pycache__" for p in path.iterdir()):
        for f in pycache.iterdir():
            f.unlink()
        pycache.rmdir()
    path.rmdir()  # OSError when something not ours is inside: reported, never deleted


def _undo_replace(path: Path, step: dict) -> None:
    old = base64.b64decode(step["data"])
    if path.is_file() and not path.is_symlink():
        st = path.stat()
        if stat.S_IMODE(st.st_mode) == step["mode"] and path.read_bytes() == old:
            return  # never changed (the write failed) or already restored: nothing to undo
        if step.get("in_place"):
            write_in_place(path, old, step["mode"])
            os.utime(path, ns=(step["mtime_ns"], step["mtime_ns"]))
            return
    owner = tuple(step["owner"]) if step.get("owner") else None
    atomic_write(path, old, step["mode"], owner)
    os.utime(path, ns=(step["mtime_ns"], step["mtime_ns"]))


def _undo(step: dict) -> None:
    path = Path(step["path"])
    op = step["op"]
    remove_temp(path)  # a write killed midway leaves its temporary file
    if op == "mkdir":
        _undo_mkdir(path)
    elif op in ("create", "symlink"):
        if path.is_symlink() or (op == "create" and path.is_file()):
            path.unlink()
    elif op == "replace":
        _undo_replace(path, step)
    elif op == "remove" and not os.path.lexists(path):
        atomic_write(path, base64.b64decode(step["data"]), step["mode"])
        os.utime(path, ns=(step["mtime_ns"], step["mtime_ns"]))
    elif op == "unlink_link" and not os.path.lexists(path):
        path.symlink_to(step["target"])
