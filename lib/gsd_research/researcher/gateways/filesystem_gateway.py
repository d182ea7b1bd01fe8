"""File discovery, reading and SHA-256 checksums under one repository root, never outside it.

Every path is resolved (symlinks included) and must stay inside the repository's folder: a symlink that
points out is not followed, and the walk names it in `outside`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from gsd_research.core.errors import UsageError

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache"}


class OutsideRepository(UsageError):
    """A path that resolves outside the repository's folder."""


class FilesystemGateway:
    """All filesystem access of the indexing pipeline; paths are relative POSIX strings."""

    def __init__(self, base_path: Path) -> None:
        self.base_path = Path(base_path)
        self.outside: list[str] = []  # symlinks out of the folder met by the last walk

    @property
    def root(self) -> Path:
        return self.base_path.resolve()

    def _inside(self, path: Path, root: Path) -> bool:
        return path == root or root in path.parents

    def iter_files(self, file_types: list[str]) -> Iterator[str]:
        """Relative paths of matching files, streamed in a stable order (each directory's files sorted,
        then its subdirectories); hidden and tool directories are skipped, and so is every symlink that
        leads out of the folder (named in `outside`)."""
        suffixes = self._suffixes(file_types)
        root = self.root
        self.outside = []
        for folder, dirs, files in os.walk(self.base_path):
            here = Path(folder)
            kept = []
            for d in sorted(dirs):
                if d in SKIP_DIRS or d.startswith("."):
                    continue
                if (here / d).is_symlink() and not self._inside((here / d).resolve(), root):
                    self.outside.append((here / d).relative_to(self.base_path).as_posix())
                    continue
                kept.append(d)
            dirs[:] = kept
            for name in sorted(files):
                if name.startswith(".") or Path(name).suffix.lower() not in suffixes:
                    continue
                path = here / name
                rel = path.relative_to(self.base_path).as_posix()
                if path.is_symlink() and not self._inside(path.resolve(), root):
                    self.outside.append(rel)
                    continue
                yield rel

    def count_files(self, file_types: list[str]) -> int:
        return sum(1 for _ in self.iter_files(file_types))

    def includes(self, rel: str, file_types: list[str]) -> bool:
        """Whether `iter_files` would yield this path (it exists inside the folder, has a listed type, is not
        hidden)."""
        parts = rel.split("/")
        return (Path(parts[-1]).suffix.lower() in self._suffixes(file_types)
                and not any(p.startswith(".") or p in SKIP_DIRS for p in parts[:-1])
                and not parts[-1].startswith(".") and self.file_exists(rel))

    @staticmethod
    def _suffixes(file_types: list[str]) -> set[str]:
        return {"." + t.lower().lstrip(".") for t in file_types}

    def absolute(self, rel: str) -> Path:
        """The real path of `rel` (symlinks resolved); OutsideRepository when it leads out of the folder."""
        root = self.root
        path = (root / rel).resolve()
        if not self._inside(path, root):
            raise OutsideRepository(f"{rel} resolves outside the repository folder {self.base_path}",
                                    suggestions=["Give a path inside the repository's folder"])
        return path

    def read_file(self, rel: str) -> str:
        return self.absolute(rel).read_text(encoding="utf-8")

    def read_bytes(self, rel: str) -> bytes:
        return self.absolute(rel).read_bytes()

    def compute_checksum(self, rel: str) -> str:
        digest = hashlib.sha256()
        with self.absolute(rel).open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    def file_exists(self, rel: str) -> bool:
        try:
            return self.absolute(rel).is_file()
        except OutsideRepository:
            return False
