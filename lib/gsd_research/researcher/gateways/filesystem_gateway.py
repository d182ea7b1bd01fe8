"""File discovery, reading and SHA-256 checksums under one repository root."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache"}


class FilesystemGateway:
    """All filesystem access of the indexing pipeline; paths are relative POSIX strings."""

    def __init__(self, base_path: Path) -> None:
        self.base_path = Path(base_path)

    def iter_files(self, file_types: list[str]) -> Iterator[str]:
        """Relative paths of matching files, streamed in a stable order (each directory's files sorted,
        then its subdirectories); hidden and tool directories are skipped."""
        suffixes = self._suffixes(file_types)
        for root, dirs, files in os.walk(self.base_path):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(files):
                if not name.startswith(".") and Path(name).suffix.lower() in suffixes:
                    yield (Path(root) / name).relative_to(self.base_path).as_posix()

    def count_files(self, file_types: list[str]) -> int:
        return sum(1 for _ in self.iter_files(file_types))

    def includes(self, rel: str, file_types: list[str]) -> bool:
        """Whether `iter_files` would yield this path (it exists, has a listed type, is not hidden)."""
        parts = rel.split("/")
        return (Path(parts[-1]).suffix.lower() in self._suffixes(file_types)
                and not any(p.startswith(".") or p in SKIP_DIRS for p in parts[:-1])
                and not parts[-1].startswith(".") and self.file_exists(rel))

    @staticmethod
    def _suffixes(file_types: list[str]) -> set[str]:
        return {"." + t.lower().lstrip(".") for t in file_types}

    def absolute(self, rel: str) -> Path:
        return self.base_path / rel

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
        return self.absolute(rel).is_file()
