"""The indexing pipeline: discovery → checksum → conversion → chunking → embedding → storage."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from gsd_research.core.errors import DocumentNotFound, NotFound, UsageError
from gsd_research.researcher import health, log
from gsd_research.researcher.chunking import VERSION as CHUNKING_VERSION
from gsd_research.researcher.chunking import chunk_text, embedding_text
from gsd_research.researcher.gateways.docling_gateway import ConversionError, DoclingGateway
from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway
from gsd_research.researcher.gateways.filesystem_gateway import (
    FilesystemGateway,
    NotIndexable,
    OutsideRepository,
)
from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway
from gsd_research.researcher.gateways.lock_gateway import WAIT_SECONDS, RepositoryLock
from gsd_research.researcher.gateways.spool_gateway import SpooledDocument, SpoolGateway
from gsd_research.researcher.models import (
    ChunkResult,
    DocumentMetadata,
    Fragment,
    FragmentWithEmbedding,
    Head,
    IndexingResult,
    IndexStats,
)
from gsd_research.researcher.services.heap import limit_malloc_arenas, release_freed_memory
from gsd_research.researcher.services.index_report import (
    no_text_fix,
    ocr_pending,
    ocr_retry,
    tesseract_on_path,
)
from gsd_research.researcher.state import StateGateway, StoreUnreadable

BATCH_FRAGMENTS = 128
BATCH_DOCUMENTS = 32
Progress = Callable[[int, str], None]
Converted = tuple[list[Fragment], str]  # fragments and text source (text | ocr | none)


def fragment_id(document_path: str, index: int) -> str:
    return hashlib.sha1(document_path.encode("utf-8")).hexdigest()[:16] + f":{index}"


class IndexService:
    """Indexes one repository incrementally; both stores are written before the checksum is recorded."""

    def __init__(self, repository_name: str, filesystem_gateway: FilesystemGateway,
                 docling_gateway: DoclingGateway, embedding_gateway: EmbeddingGateway,
                 chroma_factory: Callable, lexical_gateway: LexicalGateway, state_gateway: StateGateway,
                 file_types: list[str], spool_gateway: SpoolGateway, store_label: str = "embedded",
                 lock: RepositoryLock | None = None) -> None:
        self.name = repository_name
        self.fs, self.docling, self.embedding = filesystem_gateway, docling_gateway, embedding_gateway
        self._chroma_factory, self._chroma = chroma_factory, None
        self.lexical, self.state, self.file_types, self.store_label = (lexical_gateway, state_gateway,
                                                                        file_types, store_label)
        self.spool = spool_gateway
        self.lock = lock or RepositoryLock(state_gateway.repo_dir, f"researcher index {repository_name}")
        self.checksums: dict[str, DocumentMetadata] = {}

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

    def diagnose(self, writing: bool = False, remember: bool = False) -> health.Diagnosis:
        """The stores against the record; the vector store read only when its file is not as the last commit
        left it (a warm re-index never imports Chroma), and with `remember` its file then recorded as sound."""
        head = self.state.head()
        vectors = None
        if head is not None and head.fragments:
            store = self._chroma or self._chroma_factory()
            vectors = store.probe(trusted=head.vector_file or [])
        diagnosis = health.diagnose(self.name, head, self.lexical.probe(), vectors, writing, self.fs.base_path)
        if remember and vectors is not None and vectors.held is not None and diagnosis.state != health.DAMAGED:
            self.state.update(vector_file=store.file_state())  # read and sound: trusted unread from now on
        return diagnosis

    def _load_state(self, repair: bool = False) -> None:
        """The record read and the stores diagnosed: damage repaired by an index run (`repair`), refused by a
        single-document call; a killed run's documents in flight removed, so that this run redoes them."""
        in_flight = (self.state.head() or Head()).in_flight
        diagnosis = self.diagnose(remember=True)
        if in_flight and diagnosis.resumable:  # a killed run's documents: dropped from both stores, redone now
            log.event("index.recover", repository=self.name, documents=len(in_flight))
            self.checksums = self.state.load_checksums() or {}
            self._remove(in_flight)
            diagnosis = self.diagnose()
        if diagnosis.state == health.DAMAGED:
            if not repair:
                raise diagnosis.error()
            log.event("index.repair", repository=self.name, damaged=diagnosis.problem)
            self.repaired = health.repair(diagnosis, self.lexical, self._store(), self.state)
            self._chroma = None
        checksums = self.state.load_checksums()
        head = self.state.head() or Head()
        if checksums is None or (head.embedding and head.embedding != self.embedding.signature) or \
                (checksums and head.chunking != CHUNKING_VERSION):
            log.event("index.reset", repository=self.name, reason="corrupt state, embedding or chunking change")
            self._reset()
        self.checksums = self.state.load_checksums() or {}

    def _store(self):
        return self._chroma or self._chroma_factory()

    def _reset(self) -> None:
        health.reset(self.lexical, self._store(), self.state)
        self._chroma = None

    @contextmanager
    def _failing_stores(self):
        """A store failing under a read or write: INDEX_DAMAGED, with the one fix."""
        try:
            yield
        except StoreUnreadable as exc:
            raise health.unreadable(self.name, exc) from None

    # -- pipeline -------------------------------------------------------------------------------

    def deleted(self) -> list[str]:
        """Recorded documents whose file is gone (or no longer matches the repository's file types)."""
        return sorted(p for p in self.checksums if not self.fs.includes(p, self.file_types))

    def changes(self, result: IndexingResult, progress: Progress | None = None) -> Iterator[tuple[str, str]]:
        """(path, SHA-256) of every new or changed file, streamed from the folder walk; unchanged files
        are only counted, so nothing per file is held while the folder is read."""
        retry_no_text = ocr_retry(self.checksums)
        for rel in self.fs.iter_files(self.file_types):
            digest = self._digest(rel)
            known = self.checksums.get(rel)
            if known and known.checksum == digest and not (retry_no_text and ocr_pending(rel, known)):
                result.documents_skipped += 1
                if progress:
                    progress(1, rel)
            else:
                yield rel, digest

    def _digest(self, rel: str) -> str:
        try:
            return self.fs.compute_checksum(rel)
        except (OSError, NotIndexable):
            return "unreadable"

    def index_repository(self, progress: Progress | None = None, on_plan: Callable[[int], None] | None = None,
                         wait: float = WAIT_SECONDS) -> IndexingResult:
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
            result = self._index_repository(progress, on_plan)
        if token:
            self.state.update(covered=token)
        return result

    def _index_repository(self, progress: Progress | None, on_plan: Callable[[int], None] | None) -> IndexingResult:
        started = time.perf_counter()
        limit_malloc_arenas()
        self._load_state(repair=True)
        deleted = self.deleted()
        result = IndexingResult(repository_name=self.name)
        if on_plan:
            on_plan(self.fs.count_files(self.file_types))
        expected, stale = self._embed_phase(result, progress)
        if progress and expected:
            progress(0, "storing")
        self._store_phase(expected, deleted, stale, result)
        head = self.state.head()  # a folder with nothing to index is indexed all the same; a total edited corrected
        if head is None or head.fragments != sum(m.fragment_count for m in self.checksums.values()):
            self.state.save_checksums(self.checksums)
        result.repaired = getattr(self, "repaired", None)
        result.skipped = sorted({s["document_path"]: s for s in self.fs.skipped + result.skipped}.values(),
                                key=lambda s: s["document_path"])
        result.no_text = [{"document_path": p, "fix": no_text_fix(p, self.name)} for p in self._no_text()]
        result.documents_no_text = len(result.no_text)
        result.elapsed_seconds = round(time.perf_counter() - started, 3)
        log.event("index.done", repository=self.name, **result.model_dump(exclude={"errors"}))
        return result

    def _embed_phase(self, result: IndexingResult, progress: Progress | None) -> tuple[int, list[str]]:
        """Convert, chunk and embed every changed document into the spool, batch by batch, before the
        vector store is opened: the embedding model's memory and Chroma's in-memory index are never held
        at once, so peak memory does not grow with the size of the index. Documents an interrupted run
        already embedded are taken from the spool. Returns how many documents await storage and the
        recorded documents that no longer convert."""
        spooled = self.spool.checksums()
        expected, stale = 0, []
        batch: list[tuple[str, str, Converted]] = []
        pending = 0
        for rel, digest in self.changes(result, progress):
            if spooled.get(rel) == digest:
                expected += 1
                result.documents_resumed += 1
            else:
                converted = self._convert(rel, digest, result)
                if converted is None:
                    stale += [rel] if rel in self.checksums else []
                else:
                    expected += 1
                    batch.append((rel, digest, converted))
                    pending += len(converted[0])
            if progress:
                progress(1, rel)
            if batch and (pending >= BATCH_FRAGMENTS or len(batch) >= BATCH_DOCUMENTS):
                self.spool.append(self._embed(batch))
                batch, pending = [], 0
        if batch:
            self.spool.append(self._embed(batch))
        self.spool.sync()
        self._record_precision(self.embedding.precision)
        self.embedding.release()
        release_freed_memory()
        return expected, stale

    def _record_precision(self, precision: str | None) -> None:
        """Remember which model precision embedded documents of this index (`status` shows it)."""
        head = self.state.head()
        known = set(head.precisions if head else [])
        if precision and precision not in known:
            self.state.update(precisions=sorted(known | {precision}))

    def _store_phase(self, expected: int, deleted: list[str], stale: list[str], result: IndexingResult) -> None:
        """Remove deleted and no-longer-converting documents, then stream the spool into both stores."""
        if deleted or stale:
            self._remove(deleted + stale)
            result.documents_removed = len(deleted)
        group: list[SpooledDocument] = []
        pending = stored = 0
        for doc in self.spool.read():
            if any(d.path == doc.path for d in group) or not self._current(doc):
                continue
            group.append(doc)
            pending += len(doc.fragments)
            if pending >= BATCH_FRAGMENTS or len(group) >= BATCH_DOCUMENTS:
                stored += self._write(group, result)
                group, pending = [], 0
        if group:
            stored += self._write(group, result)
        self.spool.clear()
        missing = expected - stored
        if missing > 0:  # changed again while indexing, or the spool lost them (disk full): retried next run
            result.documents_failed += missing
            result.errors.append(f"{missing} document(s) changed during indexing or were lost from the spool; "
                                 "run the index again")

    def _current(self, doc: SpooledDocument) -> bool:
        """A spooled document not stored yet whose file still has the content it was embedded from."""
        known = self.checksums.get(doc.path)
        if known and known.checksum == doc.checksum and known.text_source == doc.text_source != "none":
            return False  # stored by the run that left this spool (a no-text document is simply recorded again)
        return self.fs.includes(doc.path, self.file_types) and self._digest(doc.path) == doc.checksum

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
        """Both stores, then the checksums; the journal names the documents in flight meanwhile."""
        paths = [doc.path for doc in documents]
        records, rows = [], []
        for doc in documents:
            file_type = Path(doc.path).suffix.lstrip(".").lower()
            for f, vector in zip(doc.fragments, doc.vectors, strict=True):
                fid = fragment_id(doc.path, f.fragment_index)
                meta = {"document_path": doc.path, "fragment_index": f.fragment_index, "file_type": file_type,
                        "checksum": doc.checksum, "breadcrumb": f.breadcrumb}
                records.append(FragmentWithEmbedding(id=fid, text=f.text, metadata=meta, embedding=vector))
                rows.append((fid, f.text, doc.path, f.fragment_index, f.breadcrumb))
        self.state.set_in_flight(paths)
        stamp = self._next_stamp()
        previously = [p for p in paths if p in self.checksums]
        chroma = self.chroma
        chroma.delete_documents(previously)
        for start in range(0, len(records), 1000):
            chroma.add_fragments_with_embeddings(records[start:start + 1000])
        chroma.stamp_with(stamp)
        self.lexical.replace_documents(paths, rows, stamp)
        now = datetime.now(timezone.utc)
        for doc in documents:
            self.checksums[doc.path] = DocumentMetadata(
                file_path=doc.path, file_name=Path(doc.path).name, file_type=Path(doc.path).suffix.lstrip(".").lower(),
                checksum=doc.checksum, indexed_at=now, fragment_count=len(doc.fragments), text_source=doc.text_source,
                ocr_tried=doc.text_source == "none" and doc.path.lower().endswith(".pdf") and tesseract_on_path())
        self._commit(stamp)
        result.documents_indexed += sum(1 for doc in documents if doc.text_source != "none")
        result.documents_ocr += sum(1 for doc in documents if doc.text_source == "ocr")
        result.fragments_created += len(records)
        del records, rows
        release_freed_memory()
        return len(documents)

    def _remove(self, paths: list[str]) -> None:
        self.state.set_in_flight(paths)
        stamp = self._next_stamp()
        for start in range(0, len(paths), 500):
            self.chroma.delete_documents(paths[start:start + 500])
            self.lexical.replace_documents(paths[start:start + 500], [], stamp)
        self.chroma.stamp_with(stamp)
        for p in paths:
            self.checksums.pop(p, None)
        self._commit(stamp)

    def _next_stamp(self) -> tuple[str, int]:
        """The stamp this write gives the stores: the record's next generation (its in-flight write made it)."""
        head = self.state.head()
        return head.repository_id, head.generation + 1

    def _commit(self, stamp: tuple[str, int]) -> None:
        """The record written last: the generation the stores now carry, nothing in flight."""
        self.state.save_checksums(self.checksums, in_flight=[], generation=stamp[1],
                                  vector_file=self.chroma.file_state())

    # -- single documents -----------------------------------------------------------------------

    def _no_text(self) -> list[str]:
        return sorted(p for p, m in self.checksums.items() if m.text_source == "none")

    def resolve(self, document_path: str) -> str:
        """A repository-relative POSIX path from a relative or absolute path; never one outside the folder."""
        p = Path(document_path).expanduser()
        outside = DocumentNotFound(f"{document_path} is not inside repository '{self.name}' ({self.fs.base_path})",
                           suggestions=[f"researcher status {self.name}"])
        if p.is_absolute():
            try:
                return p.resolve().relative_to(self.fs.root).as_posix()
            except ValueError:
                raise outside from None
        rel = Path(os.path.normpath(p.as_posix()))
        if rel.is_absolute() or rel.parts[:1] == ("..",) or rel.as_posix() in (".", ""):
            raise outside
        return rel.as_posix()

    def _single_documents(self) -> None:
        """Documents added or removed one by one: the user's repositories only. The research memory's documents
        come and go with its catalog (fetch, recall --clear); one removed here alone would be written back."""
        from gsd_research.core.config import MEMORY_REPOSITORY

        if self.name == MEMORY_REPOSITORY:
            raise UsageError(f"The documents of '{MEMORY_REPOSITORY}' are kept by the research memory, not added or "
                             "removed one by one", suggestions=["gsd-research recall --clear (removes what it kept)"])

    def index_file(self, document_path: str, wait: float = WAIT_SECONDS) -> ChunkResult:
        self._single_documents()
        rel = self.resolve(document_path)
        with self.lock.hold(wait), self._failing_stores():
            self._load_state()
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

    def remove_document(self, document_path: str, wait: float = WAIT_SECONDS) -> str:
        self._single_documents()
        rel = self.resolve(document_path)
        with self.lock.hold(wait), self._failing_stores():
            self._load_state()
            if rel not in self.checksums:
                raise DocumentNotFound(f"Document '{rel}' is not in the index of '{self.name}'", suggestions=[f"researcher status {self.name}"])
            self._remove([rel])
            return rel

    def get_stats(self) -> IndexStats:
        from gsd_research.researcher.services.index_report import repository_stats

        return repository_stats(self)
