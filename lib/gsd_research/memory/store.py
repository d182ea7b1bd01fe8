"""The research memory's catalog: one entry per source and content, its document in the knowledge base.

Layout under GSD_RESEARCH_HOME: `research-memory/catalog.sqlite` (the entries), `research-memory/documents/`
(one Markdown file per entry: the folder of the knowledge-base repository `research-memory`, whose index
lives under `repositories/research-memory/` like every repository's).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import gsd_research.researcher.api as kb
from gsd_research.core.config import MEMORY_REPOSITORY as REPOSITORY
from gsd_research.core.errors import MemoryCorrupt

DEFAULT_MAX_MB = 500
DEFAULT_PAGE_CAP_KB = 512  # one page's kept document at most: recall needs passages, not a 10 MiB dump
CUT_MARK = "\n\n[cut at the research memory's page cap]\n"
KINDS = ("page", "search_result", "search", "report", "deep")

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, url TEXT, title TEXT, provider TEXT, query TEXT, ref TEXT,
    fetched_at TEXT NOT NULL, seen_at TEXT NOT NULL, content_hash TEXT NOT NULL, path TEXT NOT NULL,
    body_offset INTEGER NOT NULL, bytes INTEGER NOT NULL, flags TEXT NOT NULL DEFAULT '[]');
CREATE INDEX IF NOT EXISTS entries_url ON entries(url);
CREATE INDEX IF NOT EXISTS entries_seen ON entries(seen_at);
CREATE INDEX IF NOT EXISTS entries_path ON entries(path);
CREATE TABLE IF NOT EXISTS writing (path TEXT PRIMARY KEY);
"""
COLUMNS = ("id", "kind", "url", "title", "provider", "query", "ref", "fetched_at", "seen_at", "content_hash",
           "path", "body_offset", "bytes", "flags")


def now_iso() -> str:
    """UTC with milliseconds: two versions read within a second still sort."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def memory_dir() -> Path:
    from gsd_research.core.config import memory_documents

    return memory_documents().parent


@dataclass
class Entry:
    """What is kept of one thing read: its text (Markdown) and where it came from."""

    kind: str
    body: str
    url: str | None = None
    title: str | None = None
    provider: str | None = None
    query: str | None = None
    ref: str | None = None
    flags: list[str] = field(default_factory=list)
    fetched_at: str = field(default_factory=now_iso)

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.body.encode("utf-8")).hexdigest()

    @property
    def id(self) -> str:
        key = f"{self.kind}\n{self.url or self.query or self.ref or ''}\n{self.content_hash}"  # not the job id:
        # a deep answer served again from the cache is the same entry
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]

    @property
    def path(self) -> str:
        return f"{self.kind}/{self.id[:2]}/{self.id}.md"

    def header(self) -> str:
        """The lines above the body in the stored document: title and source, for any reader of the store."""
        lines = [f"# {self.title or self.query or self.url or self.kind}", ""]
        if self.url:
            lines.append(f"Source: {self.url}")
        if self.query and self.kind != "page":
            lines.append(f"Query: {self.query}")
        return "\n".join(lines).rstrip() + "\n\n"


class MemoryStore:
    """The catalog and the documents of one GSD_RESEARCH_HOME's research memory."""

    def __init__(self, root: Path | None = None, page_cap: int = DEFAULT_PAGE_CAP_KB * 1024) -> None:
        self.root = root or memory_dir()
        self.page_cap = page_cap  # bytes of one stored document (header and body), whatever wrote it
        self._conn: sqlite3.Connection | None = None
        self._older = False

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            kb.private_dirs(self.root)
            path = self.root / "catalog.sqlite"
            if not path.exists():  # private from the start (SQLite gives its -wal and -shm files the same mode)
                os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
            self._conn = sqlite3.connect(str(path), timeout=10)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            self._older = "entries" in tables and "writing" not in tables  # written before `writing` existed
            self._conn.executescript(SCHEMA)
            self._conn.row_factory = sqlite3.Row
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def documents(self) -> Path:
        return self.root / "documents"

    # -- writing ---------------------------------------------------------------------------------

    def put(self, entry: Entry) -> str:
        """Keep `entry` unless the same source with the same content is kept already: "stored" | "known"."""
        return self.put_many([entry])[0]

    def put_many(self, entries: list[Entry]) -> list[str]:
        """`put` for many entries: their documents in one lexical transaction."""
        return [status for _, status in self.keep(entries)]

    def keep(self, entries: list[Entry]) -> list[tuple[Entry, str]]:
        """`put_many`, with each entry as kept (cut to the page cap): [(entry, "stored" | "known")]."""
        entries = [capped(e, self.page_cap) for e in entries]
        fresh: dict[str, Entry] = {}
        with self._writing():
            now = now_iso()
            with self.conn:
                for entry in entries:
                    if entry.id in fresh:
                        continue
                    touched = self.conn.execute("UPDATE entries SET seen_at = ? WHERE id = ?", (now, entry.id))
                    if not touched.rowcount:
                        fresh[entry.id] = entry
            if fresh:
                self._write(list(fresh.values()), now)
        return [(e, "stored" if e.id in fresh and fresh[e.id] is e else "known") for e in entries]

    def _write(self, fresh: list[Entry], now: str) -> None:
        """Documents and their rows: the paths are recorded in `writing` first and leave it with the rows, in one
        transaction, so a writer killed in between leaves only what the next writer sweeps."""
        docs = [(e.path, e.header() + e.body, e.title or e.query) for e in fresh]
        kb.ensure_repository(REPOSITORY, self.documents)
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO writing (path) VALUES (?)", [(p,) for p, _, _ in docs])
        kb.put_documents(REPOSITORY, docs)
        rows = [(e.id, e.kind, e.url, e.title, e.provider, e.query, e.ref, e.fetched_at, now, e.content_hash,
                 e.path, len(e.header()), len(text.encode("utf-8")), json.dumps(sorted(set(e.flags))))
                for e, (_, text, _) in zip(fresh, docs, strict=True)]
        with self.conn:
            self.conn.executemany(f"INSERT OR REPLACE INTO entries ({', '.join(COLUMNS)}) "
                                  f"VALUES ({', '.join('?' * len(COLUMNS))})", rows)
            self.conn.executemany("DELETE FROM writing WHERE path = ?", [(p,) for p, _, _ in docs])

    @contextlib.contextmanager
    def _writing(self):
        """The memory's one writer at a time (a blocking flock the kernel drops with its process). A path still
        in `writing` when it is taken was left by a writer that died: its document and row go first."""
        from gsd_research.core.private import flock

        self.conn  # noqa: B018 - creates the memory's folder, private, before its lock file
        with flock(self.root / "write.lock", blocking=True):
            left = [r[0] for r in self.conn.execute("SELECT path FROM writing")]
            if self._older:  # once: what an older version's killed writes left has no mark, only no row
                left += self._unknown_documents()
                self._older = False
            if left:
                self._drop_paths(left)
            yield

    def _unknown_documents(self) -> list[str]:
        """Document files the catalog has no row for."""
        known = {r[0] for r in self.conn.execute("SELECT path FROM entries")}
        files = (p.relative_to(self.documents).as_posix() for p in self.documents.rglob("*.md")) \
            if self.documents.is_dir() else ()
        return [p for p in files if p not in known]

    def total_bytes(self) -> int:
        return int(self.conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM entries").fetchone()[0])

    def evict(self, max_bytes: int) -> int:
        """Remove the least recently seen entries until the kept text is within `max_bytes`; how many."""
        removed = 0
        with self._writing():
            over = self.total_bytes() - max_bytes
            while over > 0:
                victims, freed = [], 0
                for row in self.conn.execute("SELECT path, bytes FROM entries ORDER BY seen_at, fetched_at LIMIT 200"):
                    victims.append(row["path"])
                    freed += row["bytes"]
                    if freed >= over:
                        break
                if not victims:
                    break
                self._drop_paths(victims)
                removed += len(victims)
                over -= freed
        return removed

    def remove(self, ids: list[str]) -> int:
        """Remove these entries (their documents and rows); how many there were."""
        if not ids:
            return 0
        with self._writing():
            marks = ", ".join("?" * len(ids))
            victims = [r[0] for r in self.conn.execute(f"SELECT path FROM entries WHERE id IN ({marks})", ids)]
            if victims:
                self._drop_paths(victims)
        return len(victims)

    def _drop_paths(self, paths: list[str]) -> None:
        """Remove documents and their rows; marked in `writing` first, so a removal cut short is finished next."""
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO writing (path) VALUES (?)", [(p,) for p in paths])
        kb.remove_documents(REPOSITORY, paths)
        with self.conn:
            self.conn.executemany("DELETE FROM entries WHERE path = ?", [(p,) for p in paths])
            self.conn.executemany("DELETE FROM writing WHERE path = ?", [(p,) for p in paths])

    # -- reading ---------------------------------------------------------------------------------

    def count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM entries").fetchone()[0])

    def paths_matching(self, since: str | None = None, url_prefixes: list[str] | None = None) -> list[str] | None:
        """Document paths of the entries within the filters; None when there is no filter."""
        if not since and not url_prefixes:
            return None
        clauses, params = [], []
        if since:
            clauses.append("seen_at >= ?")
            params.append(since)
        if url_prefixes:
            clauses.append("(" + " OR ".join("url LIKE ? ESCAPE '\\'" for _ in url_prefixes) + ")")
            params += [_like_prefix(p) for p in url_prefixes]
        sql = "SELECT path FROM entries WHERE " + " AND ".join(clauses)
        return [r[0] for r in self.conn.execute(sql, params)]

    def by_paths(self, paths: list[str]) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for start in range(0, len(paths), 500):
            part = paths[start:start + 500]
            sql = f"SELECT * FROM entries WHERE path IN ({','.join('?' * len(part))})"
            out.update({r["path"]: dict(r) for r in self.conn.execute(sql, part)})
        return out

    def latest_urls(self, urls: list[str]) -> dict[str, str]:
        """url -> id of its newest page entry (older ones are superseded versions)."""
        out: dict[str, str] = {}
        for url in set(urls):
            row = self.conn.execute("SELECT id FROM entries WHERE url = ? AND kind = 'page' "
                                    "ORDER BY fetched_at DESC, rowid DESC LIMIT 1", (url,)).fetchone()
            if row:
                out[url] = row["id"]
        return out

    def page(self, url: str, kind: str = "page") -> tuple[dict, str] | None:
        """The newest kept page of `url` (also matched without a trailing slash): (entry, body text). With
        kind="search_result", the longest snippet a search showed of it."""
        candidates = list(dict.fromkeys([url, url.rstrip("/"), url.rstrip("/") + "/"]))
        order = "fetched_at DESC, rowid DESC" if kind == "page" else "bytes DESC"
        sql = (f"SELECT * FROM entries WHERE kind = ? AND url IN ({','.join('?' * len(candidates))}) "
               f"ORDER BY {order} LIMIT 1")
        row = self.conn.execute(sql, [kind, *candidates]).fetchone()
        if row is None:
            return None
        text = kb.read_document(REPOSITORY, row["path"])
        if text is None:
            return None
        return dict(row), text[row["body_offset"]:]

    def stats(self) -> dict:
        row = self.conn.execute("SELECT count(*), COALESCE(SUM(bytes), 0), MIN(fetched_at), MAX(seen_at) "
                                "FROM entries").fetchone()
        return {"entries": row[0], "bytes": row[1], "oldest": row[2], "newest": row[3]}


def capped(entry: Entry, cap: int) -> Entry:
    """`entry` with its body cut (at a paragraph break when one is near) so that its document fits `cap` bytes."""
    from dataclasses import replace

    room = cap - len(entry.header().encode("utf-8"))
    if len(entry.body.encode("utf-8")) <= room:
        return entry
    room = max(0, room - len(CUT_MARK.encode("utf-8")))
    body = entry.body.encode("utf-8")[:room].decode("utf-8", "ignore")
    para = body.rfind("\n\n")
    if para > len(body) * 0.8:
        body = body[:para]
    return replace(entry, body=body.rstrip() + CUT_MARK, fetched_at=entry.fetched_at)


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def clear_memory() -> dict:
    """Remove the whole research memory: its catalog, documents and knowledge-base index (a fresh one is made
    at the next write). Planted links are removed, never followed."""
    import shutil

    removed = []
    for path in (memory_dir(), kb.repo_dir(REPOSITORY)):
        if path.is_symlink() or path.is_file():
            path.unlink()
            removed.append(path.name)
        elif path.exists():
            shutil.rmtree(path)
            removed.append(path.name)
    return {"cleared": bool(removed)}


def corrupt_error(exc: Exception, where: str):
    """The error for an unreadable memory file: which file, and how to start afresh."""
    from gsd_research.core.errors import GsdError

    files = {"catalog": memory_dir() / "catalog.sqlite", "index": kb.keyword_index(REPOSITORY)}
    why = exc.message if isinstance(exc, GsdError) else f"{type(exc).__name__}: {str(exc)[:200]}"
    if where == "index":  # the kept pages are intact: the index run rebuilds what searches them
        return MemoryCorrupt(f"the research memory's index ({files[where]}) cannot be searched ({why})",
                        suggestions=[
                            f"Run: researcher index {REPOSITORY} (rebuilds it from the kept pages)",
                            "Or start afresh: gsd-research recall --clear"])
    return MemoryCorrupt(f"the research memory's {where} ({files[where]}) cannot be read ({why}); clear the memory and "
                    "let fetch, search and deep fill it again", suggestions=["gsd-research recall --clear"])
