"""The one state record of a repository index (`state.jsonl`): what the index claims to hold.

Line 1 is the head (repository id, generation, embedding recipe, fragment total, documents in flight,
research memory's write tokens); each further line one document's checksum and fragment count. Written
whole and atomically (temp file, fsync, rename) under a short flock, so readers see the old or the new
record and concurrent writers (an index run, research memory) never lose each other's change. A search
reads the first line only. The files it replaces are read once, on first touch, and removed.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic stays out of research memory's write path
    from gsd_research.researcher.models import DocumentMetadata, Head

RECORD = "state.jsonl"
LOCK = "state.lock"
KEYWORDS, VECTORS, SPOOL = "lexical.sqlite", "chroma", "spool.jsonl"  # the stores, named here alone
VECTOR_DB = "chroma.sqlite3"  # the embedded vector store's database, inside VECTORS
LEGACY = ("checksums.json", "meta.json", "journal.json", "embed.dirty", "embed.done")
RUNNING, INTERRUPTED = "running", "interrupted"  # an index run that has not finished
Stamp = tuple[str, int]  # (repository id, generation) of the index run that last committed into a store


@dataclass(frozen=True)
class Probe:
    """What a store holds, read without creating anything: its stamp and fragment count (None: not read, the
    store trusted as the last commit left it), or why it cannot be read."""

    where: str
    exists: bool = True
    held: int | None = None
    stamp: Stamp | None = None
    unreadable: str | None = None  # e.g. "cannot be read (file is not a database)"


class StoreUnreadable(Exception):
    """A store's file failed under a read or a write (gateways raise it; `health` says what it means)."""

    def __init__(self, where: object, detail: str) -> None:
        super().__init__(f"{where} {detail}")
        self.where, self.detail = str(where), detail


class StateGateway:
    """Reads and writes one repository's record; every write is a read-modify-write under `state.lock`."""

    def __init__(self, repo_dir: Path) -> None:
        self.repo_dir = Path(repo_dir)
        self.path = self.repo_dir / RECORD

    def set_aside_misplaced(self) -> Path | None:
        """Something other than a folder where the state folder belongs (a file; a link is moved itself, never
        followed) moved aside, so that an index run can write a new one; its new name, or None."""
        if not os.path.lexists(self.repo_dir) or (self.repo_dir.is_dir() and not self.repo_dir.is_symlink()):
            return None
        aside = self.repo_dir.with_name(f"{self.repo_dir.name}.misplaced-{time.strftime('%Y%m%d-%H%M%S')}")
        self.repo_dir.rename(aside)
        return aside

    # -- reading ------------------------------------------------------------------------------

    def exists(self) -> bool:
        return self.path.is_file() or any((self.repo_dir / n).is_file() for n in LEGACY[:2])

    def unfinished_run(self, busy: Callable[[], bool]) -> str | None:
        """RUNNING while an index run holds the lock (`busy`); INTERRUPTED when none does and one left work
        behind: documents in flight, or a spool of documents it converted but did not store (deleted once they
        are); else None. The lock is asked again after the record is read, because a run that began in between
        left that work, not a killed one."""
        if busy():
            return RUNNING
        head = self.head()
        if not (head is not None and head.in_flight or _size(self.repo_dir / SPOOL)):
            return None
        return RUNNING if busy() else INTERRUPTED

    def head(self) -> Head | None:
        """The head, reading one line; None when there is no record or it cannot be read."""
        from gsd_research.researcher.models import Head

        self._migrate()
        try:
            with self.path.open("rb") as fh:
                return Head.model_validate_json(fh.readline())
        except (OSError, ValueError):
            return None

    def load_checksums(self) -> dict[str, DocumentMetadata] | None:
        """Every document's entry; {} without a record, None when the record is damaged (the run rebuilds)."""
        from gsd_research.researcher.models import DocumentMetadata, Head

        self._migrate()
        try:
            lines = self.path.read_bytes().splitlines()
        except FileNotFoundError:
            return {}
        except OSError:
            return None
        try:
            Head.model_validate_json(lines[0])
            docs = (DocumentMetadata.model_validate_json(line) for line in lines[1:] if line.strip())
            return {d.file_path: d for d in docs}
        except (ValueError, IndexError):
            return None

    # -- writing ------------------------------------------------------------------------------

    def save_checksums(self, checksums: dict[str, DocumentMetadata], **head: object) -> None:
        """Record the documents (and head fields), keeping what other writers set meanwhile."""
        lines = [checksums[k].model_dump_json().encode("utf-8") for k in sorted(checksums)]
        self.update(lines, fragments=sum(m.fragment_count for m in checksums.values()), **head)

    def mark_written(self) -> None:
        """Research memory wrote or removed documents: a fresh token the next complete run covers."""
        self.update(durable=False, writes=os.urandom(8).hex())

    def update(self, lines: list[bytes] | None = None, durable: bool = True, **fields: object) -> None:
        """Head fields changed as plain JSON (validated where the head is read), and the document lines replaced
        when given, under the record's lock."""
        from gsd_research.core.private import flock

        self._migrate()
        with flock(self.repo_dir / LOCK):
            try:
                first, _, rest = self.path.read_bytes().partition(b"\n")
                head = json.loads(first)
                if not isinstance(head, dict):
                    raise ValueError(first[:40])
            except (OSError, ValueError):
                head, rest = {}, b""
            head.setdefault("repository_id", uuid.uuid4().hex)
            head.update(fields)
            body = rest if lines is None else b"".join(line + b"\n" for line in lines)
            self._write(json.dumps(head, ensure_ascii=False).encode("utf-8") + b"\n" + body, durable)

    def _write(self, data: bytes, durable: bool) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{RECORD}.", dir=self.repo_dir)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # -- the files it replaces ----------------------------------------------------------------

    def _migrate(self) -> None:
        """An index written by an older version: its files read once into the record (checked again under the
        lock), then removed, so that it keeps answering without being embedded again."""
        if self.path.exists() or not any((self.repo_dir / n).is_file() for n in LEGACY):
            return
        from gsd_research.core.private import flock
        from gsd_research.researcher.models import DocumentMetadata, Head

        with flock(self.repo_dir / LOCK):
            if self.path.exists():
                return
            meta = _legacy(self.repo_dir / "meta.json") or {}
            try:
                docs = {k: DocumentMetadata.model_validate(v)
                        for k, v in (_legacy(self.repo_dir / "checksums.json") or {}).items()}
            except (ValueError, AttributeError):
                docs = {}
            head = Head(embedding=meta.get("embedding"), chunking=meta.get("chunking"),
                        precisions=list(meta.get("precisions") or []),
                        fragments=sum(m.fragment_count for m in docs.values()),
                        in_flight=list(_legacy(self.repo_dir / "journal.json") or []),
                        writes=_legacy(self.repo_dir / "embed.dirty", str.strip) or "",
                        covered=_legacy(self.repo_dir / "embed.done", str.strip) or "")
            lines = [docs[k].model_dump_json() for k in sorted(docs)]
            self._write("\n".join([head.model_dump_json(), *lines]).encode("utf-8") + b"\n", True)
            for name in LEGACY:
                (self.repo_dir / name).unlink(missing_ok=True)


def _legacy(path: Path, parse=json.loads):
    """A legacy file's content, or None when it is missing or cannot be read."""
    try:
        return parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
