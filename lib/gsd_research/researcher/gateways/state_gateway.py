"""checksums.json (document checksums recorded after storage) and the write-ahead journal."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from gsd_research.researcher.models import DocumentMetadata

CHUNK = 256  # checksums.json entries encoded at once


def recorded_fragments(repo_dir: Path) -> int:
    """Fragments the index runs stored, by checksums.json read as plain JSON (0 when unreadable)."""
    try:
        data = json.loads((Path(repo_dir) / "checksums.json").read_text(encoding="utf-8"))
        return sum(int(v.get("fragment_count") or 0) for v in data.values() if isinstance(v, dict))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def _token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def writes_pending(repo_dir: Path) -> bool:
    """Documents written or removed through `researcher.api` (research memory) since the last complete index
    run (`embed.dirty`, a fresh token per write, differs from `embed.done`, the token a run covered): their
    keyword rows lead the checksums meanwhile, so a keyword index short of what they record is no damage then."""
    dirty = _token(Path(repo_dir) / "embed.dirty")
    return bool(dirty) and dirty != _token(Path(repo_dir) / "embed.done")


def holds_files(folder: Path | None) -> bool:
    """Whether `folder` holds at least one file, anywhere below it (stops at the first; links not followed)."""
    if folder is None:
        return False
    stack = [Path(folder)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_file(follow_symlinks=False):
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
        except OSError:
            continue
    return False


def keywords_short(held: int | None, recorded: int, repo_dir: Path, documents: Path | None) -> bool:
    """Whether a keyword index holding `held` fragments falls short of the `recorded` ones. While research
    memory's writes lead the embedding, rows removed or rewritten ahead make counts no measure: only an index
    emptied while documents remain is short then."""
    if not recorded or (held or 0) >= recorded:
        return False
    if held is None or not writes_pending(repo_dir):
        return True
    return held == 0 and holds_files(documents)


class StateGateway:
    """Per-repository state files: `checksums.json`, `journal.json` (documents being written), `meta.json`."""

    def __init__(self, repo_dir: Path) -> None:
        self.repo_dir = Path(repo_dir)
        self.checksums_path = self.repo_dir / "checksums.json"
        self.journal_path = self.repo_dir / "journal.json"
        self.meta_path = self.repo_dir / "meta.json"

    def set_aside_misplaced(self) -> Path | None:
        """Something other than a folder where the repository's state folder belongs (a file; a link is moved
        itself, never followed) moved aside, so that an index run can write a new one; its new name, or None."""
        if not os.path.lexists(self.repo_dir) or (self.repo_dir.is_dir() and not self.repo_dir.is_symlink()):
            return None
        aside = self.repo_dir.with_name(f"{self.repo_dir.name}.misplaced-{time.strftime('%Y%m%d-%H%M%S')}")
        self.repo_dir.rename(aside)
        return aside

    def writes_token(self) -> str:
        """The token of research memory's last write (`embed.dirty`; empty when there is none)."""
        return _token(self.repo_dir / "embed.dirty")

    def cover_writes(self, token: str) -> None:
        """Record that a complete index run covered the writes up to `token` (`embed.done`), as the embedding
        worker's passes do: an index run from the command line settles them too."""
        if token:
            from gsd_research.core.config import atomic_write_text

            atomic_write_text(self.repo_dir / "embed.done", token)

    def _read(self, path: Path, default):
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return default
        except (OSError, ValueError):
            return None  # corrupt: the caller rebuilds

    def _write(self, path: Path, data) -> None:
        from gsd_research.core.config import atomic_write_text

        atomic_write_text(path, json.dumps(data, ensure_ascii=False, default=str))

    def load_checksums(self) -> dict[str, DocumentMetadata] | None:
        raw = self._read(self.checksums_path, {})
        if raw is None:
            return None
        try:
            return {k: DocumentMetadata.model_validate(v) for k, v in raw.items()}
        except Exception:  # noqa: BLE001 - corrupt entries: rebuild
            return None

    def save_checksums(self, checksums: dict[str, DocumentMetadata]) -> None:
        """Rewrite checksums.json atomically, CHUNK entries at a time: the same bytes as `json.dumps` of
        the whole mapping, but never the whole mapping dumped to dicts and one string at once (that
        transient grew with every document, after every batch)."""
        import os
        import tempfile

        path = self.checksums_path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                keys = sorted(checksums)
                fh.write("{")
                for start in range(0, len(keys), CHUNK):  # json's C encoder, CHUNK entries at a time
                    part = {k: checksums[k].model_dump(mode="json") for k in keys[start:start + CHUNK]}
                    fh.write((", " if start else "") + json.dumps(part, ensure_ascii=False, default=str)[1:-1])
                fh.write("}")
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.record_total(checksums)

    def record_total(self, checksums: dict) -> None:
        """meta.json's count of the fragments `checksums` record, written when it differs (an index run
        corrects one edited or left behind, which search would take for a store short of fragments)."""
        total = sum(m.fragment_count for m in checksums.values())
        meta = self.load_meta()
        if meta.get("recorded_fragments") != total:  # what a search compares the store with (no checksums read)
            self.save_meta(dict(meta, recorded_fragments=total))

    def recorded_total(self) -> int | None:
        """The fragments the checksums record, as the last save wrote it to meta.json (None: an older index)."""
        value = self.load_meta().get("recorded_fragments")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    def load_journal(self) -> list[str]:
        return list(self._read(self.journal_path, []) or [])

    def write_journal(self, paths: list[str]) -> None:
        self._write(self.journal_path, sorted(set(paths)))

    def clear_journal(self) -> None:
        self.journal_path.unlink(missing_ok=True)

    def load_meta(self) -> dict:
        return self._read(self.meta_path, {}) or {}

    def save_meta(self, meta: dict) -> None:
        self._write(self.meta_path, meta)
