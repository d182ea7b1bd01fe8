"""The lexical index: SQLite FTS5 with BM25 ranking over the same fragments as the vector store."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

_TOKEN = re.compile(r"[\w][\w.\-]*[\w]|\w", re.UNICODE)
STOPWORDS = frozenset("""a an and are as at be by for from has have how i in is it its of on or that the this to
was were what when where which who why will with do does did can not no""".split())

SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS fragments USING fts5(
    text, fragment_id UNINDEXED, document_path UNINDEXED, fragment_index UNINDEXED,
    tokenize = "porter unicode61 tokenchars '_'");
"""


def match_expression(query: str) -> str | None:
    """An FTS5 OR-query of the query's terms (identifiers kept whole, stop words dropped if others remain)."""
    terms: list[str] = []
    for tok in _TOKEN.findall(query):
        for part in re.split(r"[.\-]", tok):
            part = part.strip()
            if part and part.lower() not in terms:
                terms.append(part.lower())
    content = [t for t in terms if t not in STOPWORDS] or terms
    if not content:
        return None
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in content)


class LexicalGateway:
    """BM25 over fragments in `lexical.sqlite`; writes are transactions, so a crash never half-writes."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = Path(db_path)
        self._conn: sqlite3.Connection | None = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.db_path))
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(SCHEMA)
        return self._conn

    def replace_documents(self, paths: list[str], rows: list[tuple[str, str, str, int]]) -> None:
        """Delete the documents' old fragments and insert (fragment_id, text, path, index) in one transaction."""
        with self.conn:
            self.conn.executemany("DELETE FROM fragments WHERE document_path = ?", [(p,) for p in paths])
            self.conn.executemany(
                "INSERT INTO fragments (fragment_id, text, document_path, fragment_index) VALUES (?, ?, ?, ?)", rows)

    def delete_by_document(self, document_path: str) -> None:
        self.replace_documents([document_path], [])

    def count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM fragments").fetchone()[0]

    def get_all_document_paths(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT DISTINCT document_path FROM fragments ORDER BY 1")]

    def search(self, query: str, n_results: int = 10, paths: list[str] | None = None) -> list:
        """BM25-ranked fragments (SearchResult); `paths` keeps only fragments of these documents. The models
        (pydantic) are imported here, not at the top: writers such as researcher.api stay light."""
        from gsd_research.researcher.models import SearchResult

        expr = match_expression(query)
        if not expr or (paths is not None and not paths):
            return []
        where, params = "fragments MATCH ?", [expr]
        if paths is not None:
            where += f" AND document_path IN ({','.join('?' * len(paths))})"
            params += list(paths)
        rows = self.conn.execute(
            "SELECT fragment_id, text, document_path, fragment_index, bm25(fragments) AS s FROM fragments "
            f"WHERE {where} ORDER BY s LIMIT ?", (*params, n_results)).fetchall()
        return [SearchResult(fragment_id=r[0], text=r[1], document_path=r[2], fragment_index=int(r[3]),
                             score=-float(r[4]), match="lexical") for r in rows]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
