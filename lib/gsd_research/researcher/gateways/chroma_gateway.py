"""Chroma operations for one repository: an embedded persistent store or a Chroma server."""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import sqlite3
import threading
from contextlib import closing, contextmanager, suppress
from pathlib import Path

from gsd_research.core.errors import GsdError, ProviderError
from gsd_research.researcher.gateways.chroma_server import PROBE_TIMEOUT, check_url, probe, unreachable
from gsd_research.researcher.gateways.lexical_gateway import read_only, transient
from gsd_research.researcher.models import SearchResult
from gsd_research.researcher.state import VECTOR_DB, Probe, StoreUnreadable

QUERY_BATCH = 16
STAMP_ID, STAMP_GENERATION = "gsd_repository", "gsd_generation"
# The HNSW search breadth (Chroma's default is 100). A small repository whose fragments crowd together (one long
# document) is searched nearly whole; at 100 its clearly nearest fragment was missed in about a third of the
# processes (Chroma rebuilds the graph per process), and with it the repository's place in a search.
SEARCH_EF = 1000
REQUEST_TIMEOUT = 120.0  # seconds a Chroma server may take to answer one call once its heartbeat answered
_OPENED: dict[str, list[int]] = {}  # embedded stores Chroma opened in this process: their file then
_OPENING = threading.RLock()  # one client and collection made at a time: Chroma's start-up is not thread-safe
_PASSED_ON = (KeyboardInterrupt, SystemExit, GeneratorExit, GsdError)  # never taken for a store's failure


def _file(db: Path) -> list[int] | None:
    """(device, inode, size, mtime) of a non-empty database file; None when it is missing or empty."""
    try:
        info = os.stat(db)
    except OSError:
        return None
    return [info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns] if info.st_size else None


def _identity(db: Path) -> list[int]:
    return (_file(db) or [])[:2]  # which file, whatever it holds now


def _integrity(db: Path) -> str | None:
    """What SQLite's quick check finds wrong inside the file (a page overwritten: Chroma's core then panics
    while a count still reads), or None; a lock or a hot journal is no finding."""
    try:
        with closing(read_only(db)) as conn:
            rows = conn.execute("PRAGMA quick_check(3)").fetchall()
    except sqlite3.DatabaseError as exc:
        return None if transient(exc, db.parent.parent, read_only=True) else str(exc)[:200]
    return "; ".join(str(r[0]) for r in rows if r and r[0] != "ok")[:200] or None


def collection_name(repository: str) -> str:
    """A valid Chroma collection name for a repository (3-512 chars, alphanumeric ends)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "-", repository).strip("._-") or "repo"
    return f"researcher-{safe}"


@functools.cache
def _settings():
    """Chroma's settings, built once per process: pydantic-settings reads the environment and .env files for
    each new one (about 20 ms, a third of a resident search). Callers take a copy: a client writes its store's
    path into the settings it is given."""
    for name in ("chromadb", "chromadb.telemetry"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def _client(persist_directory: Path | None, url: str | None):
    import chromadb

    settings = _settings().model_copy()
    if url:
        return _http_client(chromadb, settings, url)
    key, db = str(persist_directory), persist_directory / VECTOR_DB
    if key in _OPENED and _OPENED[key] != _identity(db):
        _forget(key)  # deleted, truncated or replaced since: Chroma's cached client would go on with the old file
    persist_directory.mkdir(parents=True, exist_ok=True)
    client = chromadb.PersistentClient(path=key, settings=settings)
    _OPENED[key] = _identity(db)
    return client


def _forget(key: str) -> None:
    """Drop Chroma's client of the embedded store at `key`, cached for the whole process, with its file."""
    if _OPENED.pop(key, False) is False:
        return
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient._identifier_to_refcount.pop(key, None)
    system = SharedSystemClient._identifier_to_system.pop(key, None)
    if system is not None:
        with suppress(Exception):  # a store already gone
            system.stop()


def _http_client(chromadb, settings, url: str):
    """A client of the Chroma server at `url` (checked by the option and the config that give it), probed first:
    chromadb's own client waits forever."""
    host, port, https = check_url(url)
    probe(url)
    try:
        client = chromadb.HttpClient(host=host, port=port, ssl=https, settings=settings)
    except Exception as exc:  # noqa: BLE001 - connection errors vary by version
        raise unreachable(url, exc.__class__.__name__) from None
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is not None:  # later calls bounded too (chromadb sets no timeout; a query may take a while)
        import httpx

        session.timeout = httpx.Timeout(REQUEST_TIMEOUT, connect=PROBE_TIMEOUT)
    return client


def _unavailable(exc: BaseException) -> ProviderError:
    return ProviderError(f"Chroma store unavailable: {exc.__class__.__name__}: {str(exc)[:200]}")


class ChromaGateway:
    """Fragments of one repository in one collection; metadata carries document_path and fragment_index."""

    def __init__(self, persist_directory: Path | None, collection: str, url: str | None = None) -> None:
        self.persist_directory, self.url, self.collection_name = persist_directory, url, collection
        self._client = self._collection = None

    @property
    def client(self):
        if self._client is None:
            with _OPENING:
                if self._client is None:
                    self._client = _client(self.persist_directory, self.url)
        return self._client

    @property
    def collection(self):
        """The collection, created when missing."""
        if self._collection is None:
            with _OPENING:
                if self._collection is None:
                    try:
                        self._collection = self.client.get_or_create_collection(
                            self.collection_name, embedding_function=None,
                            metadata={"hnsw:space": "cosine", "hnsw:search_ef": SEARCH_EF})
                    except GsdError:
                        raise
                    except Exception as exc:  # noqa: BLE001
                        raise _unavailable(exc) from None
        return self._collection

    def _existing(self):
        """The collection when it exists (none created), kept for the queries that follow."""
        from chromadb.errors import NotFoundError

        if self._collection is None:
            with _OPENING:
                try:
                    self._collection = self.client.get_collection(self.collection_name, embedding_function=None)
                except NotFoundError:
                    return None
        return self._collection

    def add_fragments_with_embeddings(self, records: list[tuple[str, str, dict, list[float]]]) -> None:
        """Upsert (fragment id, text, metadata, embedding) records."""
        if records:
            ids, texts, metadatas, embeddings = (list(column) for column in zip(*records, strict=True))
            with self._writing():
                self.collection.upsert(ids=ids, documents=texts, metadatas=metadatas, embeddings=embeddings)

    def delete_documents(self, paths: list[str]) -> None:
        if paths:
            with self._writing():
                self.collection.delete(where={"document_path": {"$in": list(paths)}})

    def stamp_with(self, stamp: tuple[str, int]) -> None:
        """Record which index run committed last (the collection's metadata; its distance lives in its
        configuration), and widen the search of a collection made before SEARCH_EF."""
        hnsw = (self.collection.configuration_json or {}).get("hnsw") or {}
        narrow = hnsw.get("ef_search", 0) < SEARCH_EF
        widen = {"configuration": {"hnsw": {"ef_search": SEARCH_EF}}} if narrow else {}
        with self._writing():
            self.collection.modify(metadata={STAMP_ID: stamp[0], STAMP_GENERATION: stamp[1]}, **widen)

    @contextmanager
    def _writing(self):
        """A write that fails because the embedded store was removed or replaced under this process (SQLite:
        "attempt to write a readonly database") is StoreUnreadable, and the client is let go."""
        try:
            yield
        except GsdError:
            raise
        except Exception:
            key = str(self.persist_directory)
            if self.url is not None or key not in _OPENED or _OPENED[key] == _identity(self.persist_directory / VECTOR_DB):
                raise
            raise self._let_go("was removed (or replaced) while it was being written") from None

    def _let_go(self, detail: str) -> StoreUnreadable:
        """StoreUnreadable for the embedded store, whose client (kept by Chroma for the process) is dropped."""
        _forget(str(self.persist_directory))
        self._client = self._collection = None
        return StoreUnreadable(self.persist_directory, detail)

    def query_many(self, embeddings: list[list[float]], n_results: int, where: dict | None = None, *,
                   total: int) -> list[list[SearchResult]]:
        """Nearest fragments per embedding; `where` is a Chroma metadata filter (e.g. on document_path);
        `total` what the collection holds, as the caller has just probed it."""
        out: list[list[SearchResult]] = []
        for start in range(0, len(embeddings), QUERY_BATCH):  # Chroma's SQL variable limit
            try:
                res = self.collection.query(query_embeddings=embeddings[start:start + QUERY_BATCH],
                                            n_results=min(n_results, total), where=where,
                                            include=["documents", "metadatas", "distances"])
            except _PASSED_ON:
                raise
            except BaseException as exc:  # noqa: BLE001 - Chroma's Rust core panics (a BaseException) on a damaged file
                if self.url is None:
                    raise self._let_go(_cannot_read(exc)) from None
                raise
            for ids, docs, metas, dists in zip(res["ids"], res["documents"], res["metadatas"], res["distances"],
                                               strict=False):
                out.append([SearchResult(fragment_id=i, text=t or "", document_path=m.get("document_path", ""),
                                         fragment_index=int(m.get("fragment_index", 0)), distance=float(d),
                                         breadcrumb=str(m.get("breadcrumb") or ""))
                            for i, t, m, d in zip(ids, docs, metas, dists, strict=False)
                            if m is not None])  # a fragment another process is replacing at this moment
        return out

    def vectors_of(self, ids: list[str]) -> dict[str, list[float]]:
        """The stored vectors of these fragments (those the collection holds)."""
        if not ids:
            return {}
        try:
            res = self.collection.get(ids=ids, include=["embeddings"])
        except _PASSED_ON:
            raise
        except BaseException as exc:  # noqa: BLE001 - as in query_many; the client is kept: a writer may be the cause
            raise StoreUnreadable(self.url or self.persist_directory, _cannot_read(exc)) from None
        return {i: e for i, e in zip(res["ids"], res["embeddings"], strict=False) if e is not None}

    def file_state(self) -> list[int] | None:
        """The embedded store's database file as `_file` sees it (None for a server). The record keeps it at each
        commit: a file that still matches is trusted unread."""
        return None if self.url is not None else _file(self.persist_directory / VECTOR_DB)

    def probe(self, trusted: list[int] | None = None) -> Probe:
        """Its stamp and fragment count, nothing created. An embedded store whose file is missing or empty is
        not opened; one whose file is as `trusted` (what the record saw at its commit) is not read either;
        else its file is checked by SQLite before Chroma opens it."""
        where = str(self.persist_directory) if self.url is None else f"on the Chroma server {self.url}"
        if self.url is None:
            seen = self.file_state()
            if seen is None or seen == trusted:
                return Probe(where, exists=seen is not None)
            problem = _integrity(self.persist_directory / VECTOR_DB) if trusted is not None else None
            if problem:
                return Probe(where, unreadable=f"cannot be read ({problem})")
        try:
            collection = self._existing()
            if collection is None:
                return self._without_own(where)
            held, meta = collection.count(), collection.metadata or {}
        except _PASSED_ON:
            raise
        except BaseException as exc:  # noqa: BLE001 - Chroma's Rust core panics (a BaseException) on a damaged file
            if self.url is None:
                return Probe(where, unreadable=self._let_go(_cannot_read(exc)).detail)
            raise _unavailable(exc) from None
        stamp = (str(meta[STAMP_ID]), int(meta[STAMP_GENERATION])) if STAMP_ID in meta and STAMP_GENERATION in meta \
            else None
        return Probe(where, held=held, stamp=stamp)

    def _without_own(self, where: str) -> Probe:
        """No collection of this repository's: an embedded store (one repository's alone) that holds another's was
        copied in, its stamp that collection's name (never a record's id, whatever stamp it carries: a whole state
        folder copied in brings a record that matches it); else nothing is stored."""
        if self.url is None:
            for other in self.client.list_collections():
                return Probe(where, stamp=(f"collection {other.name}", 0))
        return Probe(where, exists=False)

    def delete_collection(self) -> None:
        with suppress(Exception):  # an absent collection
            self.client.delete_collection(self.collection_name)
        self._collection = None

    def discard(self) -> None:
        """Remove the store (an embedded one's folder, a server's collection): the next write starts a new one."""
        if self.url is not None:
            self.delete_collection()
        else:
            _forget(str(self.persist_directory))
            path = Path(self.persist_directory)
            if path.is_symlink() or path.is_file():  # a link (never followed) or a file where the folder was
                path.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)
        self._client = self._collection = None

    def heartbeat(self) -> None:
        """Reach the store (a server: NETWORK_ERROR when it does not answer)."""
        try:
            self.client.heartbeat()
        except GsdError:
            raise
        except Exception as exc:  # noqa: BLE001 - connection errors vary by version
            raise unreachable(self.url, exc.__class__.__name__) from None


def _cannot_read(exc: BaseException) -> str:
    return f"cannot be read ({exc.__class__.__name__}: {str(exc)[:120]})"
