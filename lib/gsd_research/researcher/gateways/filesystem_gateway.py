"""File discovery, reading and SHA-256 checksums under one repository root."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache"}


class FilesystemGateway:
    """All filesystem access of the indexing pipeline; paths are relative POSIX strings."""

    def __init__(self, base_path: Path) -> None:
        self.base_path = Path(base_path)

    def list_files(self, file_types: list[str]) -> list[str]:
        """Relative paths of matching files, sorted; hidden and tool directories are skipped."""
        suffixes = {"." + t.lower().lstrip(".") for t in file_types}
        found: list[str] = []
        for root, dirs, files in os.walk(self.base_path):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for name in files:
                if name.startswith(".") or Path(name).suffix.lower() not in suffixes:
                    continue
                full = Path(root) / name
                found.append(full.relative_to(self.base_path).as_posix())
        return sorted(found)

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
