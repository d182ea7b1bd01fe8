"""File discovery and SHA-256 checksums under one repository root, never outside it.

Every path is resolved (symlinks included) and must stay inside the repository's folder, and only regular
files are read: a symlink that points out, loops or dangles, and anything that is not a regular file (a FIFO
would block the reader forever, a device never ends) is not followed, and the walk names it in `skipped`
with the reason (one of REASONS).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from gsd_research.core.errors import UsageError

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache"}
REASONS = {"outside": "a symlink leading outside the repository", "loop": "a symlink loop",
           "dangling": "a symlink to nothing", "not_regular": "not a regular file (FIFO, socket or device)",
           "unreadable": "cannot be read", "not_utf8": "a name that is not valid UTF-8 (rename it to index it)"}


class NotIndexable(UsageError):
    """A path that is not read: `reason` is one of REASONS."""

    def __init__(self, message: str, reason: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.reason = reason


class OutsideRepository(NotIndexable):
    def __init__(self, message: str, **kwargs) -> None:
        super().__init__(message, "outside", **kwargs)


def _suffixes(file_types: list[str]) -> set[str]:
    return {"." + t.lower().lstrip(".") for t in file_types}


def _utf8(name: str) -> bool:
    """Whether a file name decoded from the disk is valid UTF-8 (no stores, spool or record could hold it)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _problem(path: Path, root: Path, directory: bool = False) -> str | None:
    """Why a walked entry is not followed (None when it is a regular file, or directory, inside)."""
    try:
        real = path.resolve(strict=True)
        mode = real.stat().st_mode
    except RuntimeError:  # Python < 3.13 reports a symlink loop this way
        return "loop"
    except FileNotFoundError:
        return "dangling"
    except OSError as exc:
        return "loop" if exc.errno == errno.ELOOP else "unreadable"
    if not real.is_relative_to(root):
        return "outside"
    if not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
        return "not_regular"
    return None


class FilesystemGateway:
    """All filesystem access of the indexing pipeline; paths are relative POSIX strings."""

    def __init__(self, base_path: Path) -> None:
        self.base_path = Path(base_path)
        self.skipped: list[dict] = []  # [{"document_path", "reason"}] met by the last walk

    @property
    def root(self) -> Path:
        return self.base_path.resolve()

    def _refused(self, path: Path, root: Path, directory: bool = False) -> bool:
        """Whether a walked entry is not followed (named in `skipped`); a folder is checked only as a symlink."""
        if not _utf8(path.name):
            reason = "not_utf8"
        elif directory and not path.is_symlink():
            reason = None
        else:
            reason = _problem(path, root, directory)
        if reason:
            rel = os.fsencode(path.relative_to(self.base_path).as_posix()).decode("utf-8", "replace")
            self.skipped.append({"document_path": rel, "reason": reason})
        return bool(reason)

    def iter_files(self, file_types: list[str]) -> Iterator[str]:
        """Relative paths of matching files, streamed in a stable order (each folder's files sorted, then its
        subfolders), without hidden and tool folders and entries `_refused`."""
        suffixes, root = _suffixes(file_types), self.root
        self.skipped = []
        for folder, dirs, files in os.walk(self.base_path):
            here = Path(folder)
            dirs[:] = [d for d in sorted(dirs) if d not in SKIP_DIRS and not d.startswith(".")
                       and not self._refused(here / d, root, directory=True)]
            for name in sorted(files):
                if not name.startswith(".") and Path(name).suffix.lower() in suffixes \
                        and not self._refused(here / name, root):
                    yield (here / name).relative_to(self.base_path).as_posix()

    def count_files(self, file_types: list[str]) -> int:
        return sum(1 for _ in self.iter_files(file_types))

    def includes(self, rel: str, file_types: list[str]) -> bool:
        """Whether `iter_files` would yield this path (inside the folder, of a listed type, not hidden)."""
        *folders, name = rel.split("/")
        if name.startswith(".") or Path(name).suffix.lower() not in _suffixes(file_types) \
                or any(p.startswith(".") or p in SKIP_DIRS for p in folders):
            return False
        try:
            return self.absolute(rel).is_file()
        except NotIndexable:
            return False

    def absolute(self, rel: str) -> Path:
        """The real path of `rel` (symlinks resolved); NotIndexable when it leads out of the folder
        (OutsideRepository), loops or exists but is not a regular file. A missing file is returned as is."""
        root = self.root
        try:
            path = (root / rel).resolve()
        except RuntimeError:
            raise NotIndexable(f"{rel} is a symlink loop", "loop") from None
        if not path.is_relative_to(root):
            raise OutsideRepository(f"{rel} resolves outside the repository folder {self.base_path}",
                                    suggestions=["Give a path inside the repository's folder"])
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NotIndexable(f"{rel} is a symlink loop", "loop") from None
            return path
        if not stat.S_ISREG(mode):
            raise NotIndexable(f"{rel} is {REASONS['not_regular']}", "not_regular")
        return path

    def compute_checksum(self, rel: str) -> str:
        """SHA-256 of the regular file `rel`, opened without blocking (a FIFO swapped in after the check cannot
        hang the reader), then checked again."""
        fd = os.open(self.absolute(rel), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotIndexable(f"{rel} is {REASONS['not_regular']}", "not_regular")
        digest = hashlib.sha256()
        with os.fdopen(fd, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
