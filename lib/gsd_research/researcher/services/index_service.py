"""The indexing pipeline: discovery → checksum → conversion → chunking → embedding → storage."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

from gsd_research.core.errors import DocumentNotFound, NotFound, UsageError
from gsd_research.researcher import health, log
from gsd_research.researcher.chunking import VERSION as CHUNKING_VERSION
from gsd_research.researcher.chunking import chunk_text, embedding_text
from gsd_research.researcher.gateways.docling_gateway import (
    INSTALL_FIX,
    ConversionError,
    DoclingGateway,
    tesseract,
)
from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway
from gsd_research.researcher.gateways.filesystem_gateway import (
    FilesystemGateway,
    NotIndexable,
    OutsideRepository,
)
from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway
from gsd_research.researcher.gateways.lock_gateway import RepositoryLock
from gsd_research.researcher.gateways.spool_gateway import SpooledDocument, SpoolGateway
from gsd_research.researcher.models import (
    ChunkResult,
    DocumentMetadata,
    Fragment,
    Head,
    IndexingResult,
    IndexStats,
)
from gsd_research.researcher.state import RUNNING, StateGateway, StoreUnreadable

BATCH_FRAGMENTS = 128
BATCH_DOCUMENTS = 32
NO_TEXT_LISTED = 20  # no_text documents named in `status` (all are counted)
Progress = Callable[[int, str], None]
Converted = tuple[list[Fragment], str]  # fragments and text source (text | ocr | none)
T = TypeVar("T")


def fragment_id(document_path: str, index: int) -> str:
    """As researcher.api.fragment_id (importing api here would close an import cycle through the worker)."""
    return hashlib.sha1(document_path.encode("utf-8")).hexdigest()[:16] + f":{index}"


def no_text_fix(rel: str, repository: str) -> str:
    """What would make a document without text readable."""
    if not rel.lower().endswith(".pdf"):
        return "The file holds no extractable text (empty, or images only); nothing to do"
    if tesseract():
        return "OCR (tesseract) found no legible text on its pages; nothing to do"
    return INSTALL_FIX.format(name=repository)


def _ocr_pending(rel: str, known: DocumentMetadata) -> bool:
    """A PDF recorded without text that tesseract has not read yet (it was not installed then)."""
    return known.text_source == "none" and not known.ocr_tried and rel.lower().endswith(".pdf")


def _glibc(call: str, *args: int) -> None:
    """glibc's heap settings of an index run (no-ops elsewhere): few malloc arenas, set before Chroma's,
    onnxruntime's and the tokenizer's threads start, and each batch's freed heap given back (`malloc_trim`);
    without them the held-but-free memory grows with the number of batches."""
    try:
        import ctypes

        getattr(ctypes.CDLL("libc.so.6"), call)(*args)
    except (OSError, AttributeError):
        pass


def _batches(items: Iterable[T], fragments: Callable[[T], int]) -> Iterator[list[T]]:
    """Items grouped up to BATCH_FRAGMENTS fragments or BATCH_DOCUMENTS documents."""
    batch: list[T] = []
    pending = 0
    for item in items:
        batch.append(item)
        pending += fragments(item)
        if pending >= BATCH_FRAGMENTS or len(batch) >= BATCH_DOCUMENTS:
            yield batch
            batch, pending = [], 0
    if batch:
        yield batch


class IndexService:
    """Indexes one repository incrementally; both stores are written before the checksum is recorded."""

    def __init__(self, repository_name: str, filesystem_gateway: FilesystemGateway,
                 docling_gateway: DoclingGateway, embedding_gateway: EmbeddingGateway,
                 chroma_factory: Callable, lexical_gateway: LexicalGateway, state_gateway: StateGateway,
                 file_types: list[str], spool_gateway: SpoolGateway, store_label: str,
                 lock: RepositoryLock) -> None:
        self.name = repository_name
        self.fs, self.docling, self.embedding = filesystem_gateway, docling_gateway, embedding_gateway
        self._chroma_factory, self._chroma = chroma_factory, None
        self.lexical, self.state, self.file_types, self.store_label = (lexical_gateway, state_gateway,
                                                                        file_types, store_label)
        self.spool, self.lock = spool_gateway, lock
        self.checksums: dict[str, DocumentMetadata] = {}
        self.repaired: str | None = None

    @property
    def chroma(self):
        """The vector store, opened only when something must be written (a warm re-index never imports it)."""
        if self._chroma is None:
            self._chroma = self._chroma_factory()
            head = self.state.head()
            recipe = {"embedding": self.embedding.signature, "chunking": CHUNKING_VERSION}
            if head is None or any(getattr(head, k) != v for k, v in recipe.items()):
                self.state.update(**recipe)
        return self._chroma

    # -- the record and the stores ---------------------------------------------------------------

    def diagnose(self, writing: bool = False, remember: bool = False, locked: bool = True) -> health.Diagnosis:
        """The stores against the record; the vector store read only when its file is not as the last commit
        left it (a warm re-index never imports Chroma), and with `remember` its file then recorded as sound.
        Without the lock (`locked` False) a commit may land between the reads: the record is read again."""
        head = self.state.head()
        vectors = None
        if head is not None and head.fragments:
            store = self._chroma or self._chroma_factory()
            vectors = store.probe(trusted=head.vector_file or [])
        keywords = self.lexical.probe(thorough=True)  # a page garbled mid-file: only a full check sees it
        diagnosis = health.diagnose(self.name, head, keywords, vectors, writing, self.fs.base_path,
                                    reread=None if locked else self.state.head)
        if remember and vectors is not None and vectors.held is not None and diagnosis.state != health.DAMAGED:
            self.state.update(vector_file=store.file_state())  # read and sound: trusted unread from now on
        return diagnosis

    def _load_state(self, repair: bool = False) -> None:
        """The record read and the stores diagnosed: damage repaired by an index run (`repair`), refused by a
        single-document call; a killed run's documents in flight removed, so that this run redoes them."""
        in_flight = (self.state.head() or Head()).in_flight
        diagnosis = self.diagnose(remember=True)
        if in_flight and (diagnosis.state != health.DAMAGED or diagnosis.interrupted):  # dropped, redone now
            log.event("index.recover", repository=self.name, documents=len(in_flight))
            self.checksums = self.state.load_checksums() or {}
            self._remove(in_flight)
            diagnosis = self.diagnose()
        if diagnosis.state == health.DAMAGED:
            if not repair:
                raise diagnosis.error()
            log.event("index.repair", repository=self.name, damaged=diagnosis.problem)
            self.repaired = health.repair(diagnosis, self.lexical, self.chroma, self.state)
        checksums = self.state.load_checksums()
        head = self.state.head() or Head()
        if checksums is None or (head.embedding and head.embedding != self.embedding.signature) or \
                (checksums and head.chunking != CHUNKING_VERSION):
            log.event("index.reset", repository=self.name, reason="corrupt state, embedding or chunking change")
            health.reset(self.lexical, self.chroma, self.state)
        self.checksums = self.state.load_checksums() or {}

    @contextmanager
    def _failing_stores(self):
        """A store failing under a read or write: INDEX_DAMAGED, with the one fix."""
        try:
            yield
        except StoreUnreadable as exc:
            raise health.unreadable(self.name, exc) from None

    # -- pipeline -------------------------------------------------------------------------------

    def _digest(self, rel: str) -> str:
        try:
            return self.fs.compute_checksum(rel)
        except (OSError, NotIndexable):
            return "unreadable"

    def index_repository(self, progress: Progress | None = None, on_plan: Callable[[int], None] | None = None,
                         wait: float | None = None) -> IndexingResult:
        if not self.fs.base_path.is_dir():
            raise NotFound(f"Repository folder is missing: {self.fs.base_path}",
                           suggestions=[f"researcher repo remove {self.name}", "Restore the folder"])
        aside = self.state.set_aside_misplaced()
        if aside is not None:
            self.repaired = (f"The state folder {self.state.repo_dir} was no folder (a file or a link); moved aside to "
                             f"{aside.name}, every document indexed again")
        head = self.state.head()
        token = head.writes if head else ""  # research memory's writes this run covers
        with self.lock.hold(wait), self._failing_stores():
            started, walked = time.perf_counter(), time.time()
            _glibc("mallopt", -8, 2)  # M_ARENA_MAX, as MALLOC_ARENA_MAX=2
            self._load_state(repair=True)
            deleted = sorted(p for p in self.checksums if not self.fs.includes(p, self.file_types))
            result = IndexingResult(repository_name=self.name, repaired=self.repaired)
            if on_plan:
                on_plan(self.fs.count_files(self.file_types))
            expected, stale = self._embed_phase(result, progress)
            if progress and expected:
                progress(0, "storing")
            self._store_phase(expected, deleted, stale, result)
        result.skipped = sorted({s["document_path"]: s for s in self.fs.skipped + result.skipped}.values(),
                                key=lambda s: s["document_path"])
        result.no_text = [{"document_path": p, "fix": no_text_fix(p, self.name)} for p in self._no_text()]
        result.documents_no_text = len(result.no_text)
        result.elapsed_seconds = round(time.perf_counter() - started, 3)
        log.event("index.done", repository=self.name, **result.model_dump(exclude={"errors"}))
        self.state.update(walked=walked, **({"covered": token} if token else {}))  # what `status` compares with
        return result

    def _embed_phase(self, result: IndexingResult, progress: Progress | None) -> tuple[int, list[str]]:
        """Convert, chunk and embed every changed document into the spool, batch by batch, before the
        vector store is opened: the embedding model's memory and Chroma's in-memory index are never held
        at once, so peak memory does not grow with the size of the index. Returns how many documents await
        storage and the recorded documents that no longer convert."""
        stale: list[str] = []
        embedded = 0
        for batch in _batches(self._changed(result, progress, stale), lambda item: len(item[2][0])):
            self.spool.append(self._embed(batch))
            embedded += len(batch)
        self.spool.sync()
        head, precision = self.state.head(), self.embedding.precision  # `status` shows the precisions used
        known = set(head.precisions if head else [])
        if precision and precision not in known:
            self.state.update(precisions=sorted(known | {precision}))
        self.embedding.release()
        _glibc("malloc_trim", 0)
        return result.documents_resumed + embedded, stale

    def _changed(self, result: IndexingResult, progress: Progress | None,
                 stale: list[str]) -> Iterator[tuple[str, str, Converted]]:
        """Every new or changed file converted and chunked, streamed from the folder walk: unchanged files are
        only counted, and those an interrupted run already embedded are taken from its spool."""
        spooled = self.spool.checksums()
        retry_no_text = any(_ocr_pending(p, m) for p, m in self.checksums.items()) and tesseract() is not None
        for rel in self.fs.iter_files(self.file_types):
            digest, known, converted = self._digest(rel), self.checksums.get(rel), None
            if known and known.checksum == digest and not (retry_no_text and _ocr_pending(rel, known)):
                result.documents_skipped += 1
            elif spooled.get(rel) == digest:
                result.documents_resumed += 1
            else:
                converted = self._convert(rel, digest, result)
                if converted is None and rel in self.checksums:
                    stale.append(rel)
            if progress:
                progress(1, rel)
            if converted is not None:
                yield rel, digest, converted

    def _store_phase(self, expected: int, deleted: list[str], stale: list[str], result: IndexingResult) -> None:
        """Remove deleted and no-longer-converting documents, then stream the spool into both stores."""
        if deleted or stale:
            self._remove(deleted + stale)
            result.documents_removed = len(deleted)
        stored = sum(self._write(group, result) for group in _batches(self._unstored(), lambda d: len(d.fragments)))
        self.spool.clear()
        head = self.state.head()  # a folder with nothing to index is indexed all the same; a total edited corrected
        if head is None or head.fragments != sum(m.fragment_count for m in self.checksums.values()):
            self.state.save_checksums(self.checksums)
        missing = expected - stored
        if missing > 0:  # changed again while indexing, or the spool lost them (disk full): retried next run
            result.documents_failed += missing
            result.errors.append(f"{missing} document(s) changed during indexing or were lost from the spool; "
                                 "run the index again")

    def _unstored(self) -> Iterator[SpooledDocument]:
        """The spooled documents not stored yet (the first record of each) whose file still has the content they
        were embedded from; a no-text document is simply recorded again."""
        seen: set[str] = set()
        for doc in self.spool.read():
            known = self.checksums.get(doc.path)
            stored = known is not None and known.checksum == doc.checksum and known.text_source == doc.text_source
            if doc.path in seen or (stored and doc.text_source != "none"):
                continue
            if self.fs.includes(doc.path, self.file_types) and self._digest(doc.path) == doc.checksum:
                seen.add(doc.path)
                yield doc

    def _convert(self, rel: str, digest: str, result: IndexingResult) -> Converted | None:
        try:
            if digest == "unreadable":
                raise ConversionError(f"{rel}: cannot read")
            doc = self.docling.convert(self.fs.absolute(rel), rel)
            fragments = chunk_text(doc.text, doc.path, self.embedding.count_tokens, markdown=doc.markdown)
            return fragments, doc.source if fragments else "none"
        except NotIndexable as exc:  # swapped for a symlink out, a loop or a FIFO after the walk
            result.skipped.append({"document_path": rel, "reason": exc.reason})
            return None
        except ConversionError as exc:
            result.documents_failed += 1
            result.errors.append(str(exc))
            log.event("index.failed", repository=self.name, document=rel, error=str(exc))
            return None

    def _embed(self, batch: list[tuple[str, str, Converted]]) -> list[SpooledDocument]:
        vectors = iter(self.embedding.embed_texts([embedding_text(f) for _, _, (frags, _) in batch for f in frags]))
        return [SpooledDocument(rel, digest, frags, [next(vectors) for _ in frags], source)
                for rel, digest, (frags, source) in batch]

    def _write(self, documents: list[SpooledDocument], result: IndexingResult) -> int:
        """The documents' fragments into both stores and their checksums into the record, in one commit."""
        previously = [doc.path for doc in documents if doc.path in self.checksums]
        records, rows, now = [], [], datetime.now(timezone.utc)
        for doc in documents:
            file_type = Path(doc.path).suffix.lstrip(".").lower()
            for f, vector in zip(doc.fragments, doc.vectors, strict=True):
                fid = fragment_id(doc.path, f.fragment_index)
                meta = {"document_path": doc.path, "fragment_index": f.fragment_index, "file_type": file_type,
                        "checksum": doc.checksum, "breadcrumb": f.breadcrumb}
                records.append((fid, f.text, meta, vector))
                rows.append((fid, f.text, doc.path, f.fragment_index, f.breadcrumb))
            self.checksums[doc.path] = DocumentMetadata(
                file_path=doc.path, file_name=Path(doc.path).name, file_type=file_type, checksum=doc.checksum,
                indexed_at=now, fragment_count=len(doc.fragments), text_source=doc.text_source,
                ocr_tried=doc.text_source == "none" and doc.path.lower().endswith(".pdf") and tesseract() is not None)
        self._commit([doc.path for doc in documents], previously, records, rows)
        result.documents_indexed += sum(1 for doc in documents if doc.text_source != "none")
        result.documents_ocr += sum(1 for doc in documents if doc.text_source == "ocr")
        result.fragments_created += len(records)
        del records, rows
        _glibc("malloc_trim", 0)
        return len(documents)

    def _remove(self, paths: list[str]) -> None:
        for p in paths:
            self.checksums.pop(p, None)
        self._commit(paths, paths)

    def _commit(self, paths: list[str], delete: list[str], records: list | None = None,
                rows: list | None = None) -> None:
        """One transaction: `paths` named in flight, both stores written and stamped with the record's next
        generation, then the record written last (a run killed before it leaves the previous one answerable).
        Never a stamp without documents in flight: a reader tells a commit it raced by the record's change."""
        if not paths:
            return
        self.state.update(in_flight=sorted(set(paths)))
        head = self.state.head()
        stamp = (head.repository_id, head.generation + 1)
        chroma, records = self.chroma, records or []
        for start in range(0, len(delete), 500):
            chroma.delete_documents(delete[start:start + 500])
        for start in range(0, len(records), 1000):
            chroma.add_fragments_with_embeddings(records[start:start + 1000])
        chroma.stamp_with(stamp)
        self.lexical.replace_documents(paths, rows or [], stamp)
        self.state.save_checksums(self.checksums, in_flight=[], generation=stamp[1], vector_file=chroma.file_state())

    # -- single documents -----------------------------------------------------------------------

    def _no_text(self) -> list[str]:
        return sorted(p for p, m in self.checksums.items() if m.text_source == "none")

    @contextmanager
    def _document(self, document_path: str, wait: float | None) -> Iterator[str]:
        """The lock held and the record loaded for one document of the user's repositories (the research memory's
        come and go with its catalog: one removed here alone would be written back); its repository-relative
        POSIX path, never one outside the folder."""
        from gsd_research.core.config import MEMORY_REPOSITORY

        if self.name == MEMORY_REPOSITORY:
            raise UsageError(f"The documents of '{MEMORY_REPOSITORY}' are kept by the research memory, not added or "
                             "removed one by one", suggestions=["gsd-research recall --clear (removes what it kept)"])
        p = Path(document_path).expanduser()
        outside = DocumentNotFound(f"{document_path} is not inside repository '{self.name}' ({self.fs.base_path})",
                                   suggestions=[f"researcher status {self.name}"])
        if p.is_absolute():
            try:
                rel = p.resolve().relative_to(self.fs.root).as_posix()
            except ValueError:
                raise outside from None
        else:
            relative = Path(os.path.normpath(p.as_posix()))
            if relative.is_absolute() or relative.parts[:1] == ("..",) or relative.as_posix() in (".", ""):
                raise outside
            rel = relative.as_posix()
        with self.lock.hold(wait), self._failing_stores():
            self._load_state()
            yield rel

    def index_file(self, document_path: str, wait: float | None = None) -> ChunkResult:
        with self._document(document_path, wait) as rel:
            try:
                exists = self.fs.absolute(rel).is_file()
            except OutsideRepository as exc:
                raise DocumentNotFound(f"{document_path} leads outside repository '{self.name}' (a symlink out)") from exc
            if not exists:
                raise DocumentNotFound(f"No file {rel} in repository '{self.name}'")
            result = IndexingResult(repository_name=self.name)
            digest = self.fs.compute_checksum(rel)
            converted = self._convert(rel, digest, result)
            if converted is None:
                if rel in self.checksums:  # stale fragments of a file that no longer converts
                    self._remove([rel])
                raise ConversionError(result.errors[0] if result.errors else f"{rel}: cannot read")
            self._write(self._embed([(rel, digest, converted)]), result)
            return ChunkResult(document_path=rel, fragments=converted[0], text_source=converted[1])

    def remove_document(self, document_path: str, wait: float | None = None) -> str:
        with self._document(document_path, wait) as rel:
            if rel not in self.checksums:
                raise DocumentNotFound(f"Document '{rel}' is not in the index of '{self.name}'",
                                       suggestions=[f"researcher status {self.name}"])
            self._remove([rel])
            return rel

    def get_stats(self) -> IndexStats:
        """`status` of this repository: what its index records, and its diagnosis."""
        head = self.state.head() or Head()
        self.checksums = self.state.load_checksums() or {}
        no_text = self._no_text()
        return IndexStats(
            repository_name=self.name, total_documents=len(self.checksums) - len(no_text),
            total_fragments=sum(m.fragment_count for m in self.checksums.values()),
            last_indexed=max((m.indexed_at for m in self.checksums.values()), default=None),
            path=str(self.fs.base_path), store=self.store_label, embedding_provider=self.embedding.signature,
            embedding_precision="+".join(head.precisions) or None,
            documents_ocr=sum(1 for m in self.checksums.values() if m.text_source == "ocr"),
            documents_no_text=len(no_text), no_text=no_text[:NO_TEXT_LISTED],
            fix=no_text_fix(next((p for p in no_text if p.lower().endswith(".pdf")), no_text[0]),
                            self.name) if no_text else None,
            damaged=self.diagnose(writing=bool(head.in_flight) and self.lock.busy(), locked=False).report(),
            changed=self._folder_changes())

    def _folder_changes(self) -> str | None:
        """`status`'s word on documents the index has not seen (never for the research memory: it writes its
        own documents, and a folder that is gone is `index`'s error to report)."""
        from gsd_research.core.config import MEMORY_REPOSITORY

        if self.name == MEMORY_REPOSITORY or not self.fs.base_path.is_dir():
            return None
        run = self.state.unfinished_run(self.lock.busy)  # the run in progress is the fix: never advise a second
        if run:
            return health.unfinished([(self.name, run == RUNNING)])
        changed = health.changed_since(self.checksums, self.fs, self.file_types, (self.state.head() or Head()).walked)
        return f"{changed}. Run: researcher index {self.name}" if changed else None
