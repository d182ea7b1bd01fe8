"""The spool: documents converted, chunked and embedded by an index run, waiting to be stored."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from gsd_research.researcher.models import Fragment

VERSION = 2  # 2: fragments carry their breadcrumb, documents their text source


class SpooledDocument(NamedTuple):
    """One document ready for the stores: its fragments and their vectors, in fragment order."""

    path: str
    checksum: str
    fragments: list[Fragment]
    vectors: list[list[float]]
    text_source: str = "text"  # text | ocr | none


class SpoolGateway:
    """An append-only file of embedded documents, one JSON line each (vectors as float32, base64), deleted once
    stored. A run that dies leaves it behind; the next takes from it the documents whose checksum still matches
    instead of embedding them again. Lines of another `recipe` (model, chunking), torn or damaged are ignored."""

    def __init__(self, path: Path, recipe: str) -> None:
        self.path, self.recipe = Path(path), recipe

    def append(self, documents: list[SpooledDocument]) -> None:
        """Records appended after cutting a torn last line (a kill in the middle of a write): the first record of
        the next run would otherwise be glued to it and lost with it."""
        import numpy as np

        from gsd_research.core.private import open_private

        self.path.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(open_private(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT), "ab") as fh:
            _cut_torn_tail(fh.fileno())
            for doc in documents:
                vectors = np.asarray(doc.vectors, dtype=np.float32).reshape(len(doc.fragments), -1) \
                    if doc.fragments else np.zeros((0, 0), dtype=np.float32)  # a document without text
                fh.write(json.dumps({
                    "v": VERSION, "recipe": self.recipe, "path": doc.path, "checksum": doc.checksum,
                    "indexes": [f.fragment_index for f in doc.fragments], "texts": [f.text for f in doc.fragments],
                    "breadcrumbs": [f.breadcrumb for f in doc.fragments], "source": doc.text_source,
                    "dim": int(vectors.shape[1]), "vectors": base64.b64encode(vectors.tobytes()).decode("ascii"),
                }, ensure_ascii=False).encode("utf-8") + b"\n")

    def sync(self) -> None:
        """Make what was appended durable (once per run, before the stores are written)."""
        if self.path.exists():
            with self.path.open("rb+") as fh:
                os.fsync(fh.fileno())

    def read(self) -> Iterator[SpooledDocument]:
        """The valid records in file order, one line in memory at a time."""
        for raw, data in self._records():
            import numpy as np  # only when there is something to read (a warm run has no spool)

            n, path = len(raw["texts"]), str(raw["path"])
            vectors = np.frombuffer(data, dtype=np.float32).reshape(n, -1).tolist() if n else []
            fragments = [Fragment(text=str(t), document_path=path, fragment_index=int(i), breadcrumb=str(c))
                         for i, t, c in zip(raw["indexes"], raw["texts"], raw["breadcrumbs"], strict=True)]
            yield SpooledDocument(path, str(raw["checksum"]), fragments, vectors, str(raw["source"]))

    def checksums(self) -> dict[str, str]:
        """path → checksum of the valid records (the last record of a path wins)."""
        return {str(raw["path"]): str(raw["checksum"]) for raw, _ in self._records()}

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def _records(self) -> Iterator[tuple[dict, bytes]]:
        try:
            fh = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with fh:
            for line in fh:
                record = self._check(line)
                if record is not None:
                    yield record

    def _check(self, line: str) -> tuple[dict, bytes] | None:
        """A record written by this recipe whose every field is present and consistent, else None."""
        try:
            raw = json.loads(line)
            texts, indexes, dim = raw["texts"], raw["indexes"], int(raw["dim"])
            data = base64.b64decode(raw["vectors"], validate=True)
            ok = (raw["v"] == VERSION and raw["recipe"] == self.recipe
                  and all(isinstance(x, list) and len(x) == len(texts) for x in (texts, indexes, raw["breadcrumbs"]))
                  and all(isinstance(i, int) for i in indexes)
                  and all(isinstance(raw[k], str) for k in ("path", "checksum", "source"))
                  and (not texts or dim > 0) and len(data) == 4 * dim * len(texts))
            return (raw, data) if ok else None
        except (ValueError, TypeError, KeyError):
            return None


def _cut_torn_tail(fd: int) -> None:
    """Truncate the file after its last newline (to nothing when it has none)."""
    import mmap

    size = os.fstat(fd).st_size
    if size:
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as view:
            keep = view.rfind(b"\n") + 1
        if keep < size:
            os.ftruncate(fd, keep)
