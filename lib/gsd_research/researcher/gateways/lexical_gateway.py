"""The lexical index: SQLite FTS5 with BM25 ranking over the same fragments as the vector store."""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import stat
import time
from contextlib import closing
from pathlib import Path

from gsd_research.core.errors import Locked
from gsd_research.core.private import open_private
from gsd_research.researcher.state import Probe, Stamp, StoreUnreadable

_TOKEN = re.compile(r"[\w][\w.\-]*[\w]|\w", re.UNICODE)
STOPWORDS = frozenset("""a an and are as at be by for from has have how i in is it its of on or that the this to
was were what when where which who why will with do does did can not no""".split())

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS fragments USING fts5(
    text, breadcrumb, fragment_id UNINDEXED, document_path UNINDEXED, fragment_index UNINDEXED,
    tokenize = "porter unicode61 tokenchars '_'");
CREATE TABLE IF NOT EXISTS stamp (repository_id TEXT NOT NULL, generation INTEGER NOT NULL);
"""
COLUMNS = ("text", "breadcrumb", "fragment_id", "document_path", "fragment_index")


def match_expression(query: str) -> str | None:
    """An FTS5 OR-query of the query's terms (identifiers kept whole, stop words dropped if others remain)."""
    terms = list(dict.fromkeys(part.lower() for tok in _TOKEN.findall(query) for part in re.split(r"[.\-]", tok)
                               if part))
    content = [t for t in terms if t not in STOPWORDS] or terms
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in content) or None


def phrase(term: str) -> str | None:
    """An FTS5 phrase matching `term` exactly as the index tokenizes it ("fastapi.Depends" -> "fastapi depends")."""
    tokens = re.findall(r"\w+", term.lower())
    return '"' + " ".join(tokens) + '"' if tokens else None


_HEX_PREFIX = re.compile(r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}")


def partial_expression(term: str) -> str | None:
    """An FTS5 query for fragments that may hold a distinctive `term` inside a longer token: a hex prefix of 8+
    characters (a short commit hash), or a code of 3+ parts, two of them numbers (a version `7.13.0-rc.4` in
    `v7.13.0-rc.4+build.9981`: its parts after the first, as a phrase); else None. `holds` checks the hits."""
    tokens = re.findall(r"\w+", term.lower())
    if len(tokens) == 1 and _HEX_PREFIX.fullmatch(tokens[0]):
        return f'"{tokens[0]}"*'
    if not re.search(r"\s", term) and len(tokens) >= 3 and sum(t.isdigit() for t in tokens) >= 2:
        return '"' + " ".join(tokens[1:]) + '"'
    return None


def _token_start(lower: str, start: int) -> bool:
    """Whether a term found at `start` begins a token: the text's start, after a separator that does not
    continue a number (`2.5.1-rc.3` holds no version `5.1-rc.3` or `1-rc.3`), or after a lone leading "v"."""
    if start == 0:
        return True
    before = lower[start - 1]
    if before == "v":
        return start == 1 or not lower[start - 2].isalnum()
    if before.isalnum():
        return False
    return not (before in ".-" and start >= 2 and lower[start - 2].isdigit())


def holds(text: str, term: str) -> bool:
    """Whether `text` holds `term` as it is written: a term of one part at the start of a token or inside one
    (a hash prefix); a term of several parts (a version) from the start of a token (`7.13.0` is not in
    `v17.13.0`) to where the text's token ends (`rc.4` is not `rc.40`)."""
    lower, needle = text.lower(), term.lower()
    single = len(re.findall(r"\w+", needle)) == 1
    for found in re.finditer(f"(?={re.escape(needle)})", lower):  # every occurrence, overlapping ones too
        start, end = found.start(), found.start() + len(needle)
        if single and (start == 0 or not lower[start - 1].isalnum()):
            return True
        if not single and _token_start(lower, start) and \
                (end == len(lower) or not (lower[end].isalnum() and needle[-1].isalnum())):
            return True
    return False


def _regular_file(path: Path) -> bool:
    """An existing regular file, not a symlink. Such a store is never opened and closed outside SQLite: closing
    any descriptor of a file drops every POSIX lock this process holds on it, those of its other SQLite
    connections included (a long-running process then lets another one reset the WAL under them)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection: nothing created, a file replaced under an open connection seen as it is."""
    return sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)


_PASSING = frozenset((sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED))  # primary codes: another connection's lock
_PASSING_READ_ONLY = frozenset((sqlite3.SQLITE_READONLY_RECOVERY, sqlite3.SQLITE_READONLY_CANTLOCK,
                                sqlite3.SQLITE_READONLY_ROLLBACK, sqlite3.SQLITE_READONLY_CANTINIT))


def transient(exc: sqlite3.DatabaseError, repository: Path, read_only: bool = False) -> bool:
    """Whether SQLite failed on another connection's state, not on the file's content: a lock (any BUSY or
    LOCKED code), or a WAL index, WAL or hot journal that a connection cannot recover (the READONLY codes of
    recovery; on a read-only connection, any READONLY: it never writes pages) while an index run of
    `repository` holds its lock: a writer mid-write. Without one, the same journal stays unrecoverable (a
    folder this process cannot write): damage, named. Never damage while it is transient: wait or retry."""
    from gsd_research.researcher.gateways.lock_gateway import RepositoryLock

    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return False
    recovery = code in _PASSING_READ_ONLY or read_only and code & 0xFF == sqlite3.SQLITE_READONLY
    return code & 0xFF in _PASSING or recovery and RepositoryLock(repository).busy()


def _guarded(method):
    """SQLite's errors become StoreUnreadable naming the file, but another process's lock outlasting SQLite's
    wait, which is Locked: run again, nothing is damaged."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if transient(exc, self.db_path.parent):
                raise Locked(f"The keyword index {self.db_path} is held by another process ({exc})",
                             suggestions=["Run the command again when it has finished"]) from None
            self.close()
            raise StoreUnreadable(self.db_path, f"is damaged ({exc})") from None
    return call


class LexicalGateway:
    """BM25 over fragments in one SQLite file; writes are transactions, so a crash never half-writes."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self._conn: sqlite3.Connection | None = None

    @property
    @_guarded
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            if not _regular_file(self.db_path):  # created private, a planted symlink refused, before SQLite writes
                os.close(open_private(self.db_path, os.O_RDWR | os.O_CREAT))
            conn = sqlite3.connect(str(self.db_path))
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(fragments)"))
                if columns and columns != COLUMNS:  # an index written by an older version: rebuilt by the next run
                    conn.execute("DROP TABLE fragments")
                conn.executescript(SCHEMA)
            except sqlite3.DatabaseError:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def set_aside(self) -> Path:
        """Move a damaged store (and its WAL files) aside, so the next use starts an empty one; its new name."""
        self.close()
        aside = self.db_path.with_name(f"{self.db_path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(self.db_path) + suffix)
            if os.path.lexists(part):  # a link is moved itself, never followed
                part.rename(Path(str(aside) + suffix))
        return aside

    @_guarded
    def replace_documents(self, paths: list[str], rows: list[tuple[str, str, str, int, str]],
                          stamp: Stamp | None = None) -> None:
        """Delete the documents' old fragments and insert (fragment_id, text, path, index, breadcrumb) rows in one
        transaction, with the stamp of the index run writing them when given."""
        with self.conn:
            self.conn.executemany("DELETE FROM fragments WHERE document_path = ?", [(p,) for p in paths])
            self.conn.executemany(
                "INSERT INTO fragments (fragment_id, text, document_path, fragment_index, breadcrumb) "
                "VALUES (?, ?, ?, ?, ?)", rows)
            if stamp is not None:
                self.conn.execute("DELETE FROM stamp")
                self.conn.execute("INSERT INTO stamp VALUES (?, ?)", stamp)

    def probe(self, thorough: bool = False) -> Probe:
        """Its stamp and fragment count, read-only from FTS5's size table (no scan; `thorough`: SQLite's quick
        check of every page too, for the index run and status, which must see a page garbled mid-file). A file
        another process has locked is trusted unread: the record says what it holds."""
        where = str(self.db_path)
        if not os.path.lexists(self.db_path):
            return Probe(where, exists=False)
        if not _regular_file(self.db_path):
            return Probe(where, unreadable="is not a regular file (a folder, a link or a device in its place)")
        try:
            conn = read_only(self.db_path)
        except sqlite3.Error as exc:
            held_elsewhere = transient(exc, self.db_path.parent, read_only=True)
            return Probe(where) if held_elsewhere else Probe(where, unreadable=f"cannot be opened ({exc})")
        try:
            with closing(conn):
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
                if "fragments_docsize" not in tables:
                    return Probe(where, held=0) if not tables else Probe(
                        where, unreadable="is another SQLite database (it holds no keyword index)")
                held = conn.execute("SELECT count(*) FROM fragments_docsize").fetchone()[0]
                row = conn.execute("SELECT repository_id, generation FROM stamp LIMIT 1").fetchone() \
                    if "stamp" in tables else None
                problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)") if r[0] != "ok"] \
                    if thorough else []
            if problems:
                return Probe(where, unreadable=f"is damaged ({'; '.join(map(str, problems))[:200]})")
        except sqlite3.DatabaseError as exc:
            held_elsewhere = transient(exc, self.db_path.parent, read_only=True)
            return Probe(where) if held_elsewhere else Probe(where, unreadable=f"is damaged ({exc})")
        return Probe(where, held=held, stamp=(str(row[0]), int(row[1])) if row else None)

    @_guarded
    def clear(self) -> None:
        with self.conn:
            self.conn.execute("DELETE FROM fragments")
            self.conn.execute("DELETE FROM stamp")

    def search(self, query: str, n_results: int = 10, paths: list[str] | None = None) -> list:
        """BM25 ranking of the query's terms (any of them); `paths` keeps only fragments of these documents."""
        expr = match_expression(query)
        if not expr or (paths is not None and not paths):
            return []
        return self.phrase_hits(expr, n_results, paths)

    @_guarded
    def phrase_documents(self, expr: str, cap: int = 100) -> int:
        """How many documents hold the FTS5 phrase `expr`, counted over its first `cap` fragments (enough to tell
        a rare term from a common one, without reading every fragment of a common word)."""
        return self.conn.execute(
            "SELECT count(DISTINCT document_path) FROM (SELECT document_path FROM fragments WHERE fragments MATCH ? "
            "LIMIT ?)", (expr, cap)).fetchone()[0]

    @_guarded
    def phrase_hits(self, expr: str, n_results: int, paths: list[str] | None = None) -> list:
        """SearchResults of the fragments matching the FTS5 expression `expr` (of `paths` only, when given), best
        BM25 first. The models (pydantic) are imported here: writers such as researcher.api stay light."""
        from gsd_research.researcher.models import SearchResult

        where = "" if paths is None else f" AND document_path IN ({','.join('?' * len(paths))})"
        rows = self.conn.execute(
            "SELECT fragment_id, text, document_path, fragment_index, breadcrumb, bm25(fragments) AS s "
            f"FROM fragments WHERE fragments MATCH ?{where} ORDER BY s LIMIT ?",
            (expr, *(paths or ()), n_results)).fetchall()
        return [SearchResult(fragment_id=r[0], text=r[1], document_path=r[2], fragment_index=int(r[3]),
                             breadcrumb=r[4] or "", score=-float(r[5]), match="lexical") for r in rows]

    def partial_hits(self, term: str, n_results: int, scan: int = 500) -> list:
        """The fragments holding `term` inside a longer token (see `partial_expression`), best BM25 first."""
        expr = partial_expression(term)
        if not expr:
            return []
        return [r for r in self.phrase_hits(expr, scan) if holds(r.text, term)][:n_results]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
