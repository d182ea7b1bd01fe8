"""Every change one install run makes, recorded before it is made, so a failure or a killed run is undone."""

from __future__ import annotations

import base64
import json
import os
import stat
import tempfile
from pathlib import Path


class InstallError(Exception):
    """A clear, user-facing reason an install cannot go on."""


def atomic_write(path: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
    """Replace `path` (a real file, not a link) with `data` and exactly `mode` (umask ignored)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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


def real_target(path: Path) -> Path:
    """Where writes to `path` land: a symlinked settings.json (dotfiles) is written through to its target."""
    return Path(os.path.realpath(path))


class Journal:
    """Write-ahead log of one run in DATA/install-journal.json (0600: it may hold a settings file's bytes)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: not persisted (uninstall's single writes)
        self.steps: list[dict] = []

    # -- recording ---------------------------------------------------------------------------------------
    def _record(self, step: dict) -> None:
        self.steps.append(step)
        if self.path is not None and self.path.parent.is_dir():
            atomic_write(self.path, json.dumps({"steps": self.steps}).encode(), 0o600)

    def created_dirs(self) -> list[str]:
        return [s["path"] for s in self.steps if s["op"] == "mkdir"]

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

    def write(self, path: Path, data: bytes, mode: int | None = None, new_mode: int = 0o644) -> bool:
        """Write `data` to `path` (through a symlink to its target). `mode` None keeps the file's mode;
        a new file gets `new_mode`. Returns whether anything changed."""
        real = real_target(path)
        if real.is_dir():
            raise InstallError(f"{path} is a directory, not a file")
        if real.exists():
            st = real.stat()
            old_mode = stat.S_IMODE(st.st_mode)
            target_mode = old_mode if mode is None else mode
            old = real.read_bytes()
            if old == data and old_mode == target_mode:
                return False
            self._record({"op": "replace", "path": str(real), "data": base64.b64encode(old).decode(),
                          "mode": old_mode, "mtime_ns": st.st_mtime_ns, "owner": [st.st_uid, st.st_gid]})
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
        if self.path is not None and self.path.is_file():
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
        """Roll back what a killed run left (its journal); None when there was nothing to recover."""
        if not path.is_file():
            return None
        try:
            steps = json.loads(path.read_text())["steps"]
        except (OSError, ValueError, KeyError, TypeError):
            steps = []
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


def _undo(step: dict) -> None:
    path = Path(step["path"])
    op = step["op"]
    if op == "mkdir":
        _undo_mkdir(path)
    elif op in ("create", "symlink"):
        if path.is_symlink() or (op == "create" and path.is_file()):
            path.unlink()
    elif op == "replace":
        owner = tuple(step["owner"]) if step.get("owner") else None
        atomic_write(path, base64.b64decode(step["data"]), step["mode"], owner)
        os.utime(path, ns=(step["mtime_ns"], step["mtime_ns"]))
    elif op == "unlink_link" and not os.path.lexists(path):
        path.symlink_to(step["target"])
