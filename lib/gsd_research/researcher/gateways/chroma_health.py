"""Whether a repository's vector store still holds what its index records, found without creating anything.

Chroma recreates an empty store wherever it opens a missing one (and initialises an empty file in place), so a
folder deleted by hand would otherwise leave every vector search silently empty. The embedded store's SQLite
file is read here directly (read-only, chromadb not imported) by processes in which Chroma does not hold it.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from gsd_research.core.errors import IndexDamaged

DB_NAME = "chroma.sqlite3"
# Chroma 1.x's layout: a collection's records are the rows of its metadata segment
_COUNT = ("SELECT count(*) FROM embeddings e JOIN segments s ON e.segment_id = s.id "
          "JOIN collections c ON s.collection = c.id WHERE c.name = ? AND s.scope = 'METADATA'")


class VectorStoreDamaged(IndexDamaged):
    """The vector store lost the fragments the index records (its folder or database deleted, emptied,
    truncated or unreadable)."""


def fix(repository: str, keywords: bool = True) -> list[str]:
    """The advice: the index run; meanwhile a search by keywords, unless the keyword index is damaged or
    missing too (`keywords` False), which the same run rebuilds."""
    if not keywords:
        return [f"Run: researcher index {repository} (its keyword index is damaged or missing too: the run "
                "rebuilds both and embeds the documents again)"]
    return [f"Run: researcher index {repository} (embeds the documents whose vectors are missing again)",
            f"Meanwhile: researcher search --repo {repository} --mode lexical (keywords only; mode \"lexical\" "
            "in the MCP search tools)"]


def lost(repository: str, where: str, held: int, expected: int) -> VectorStoreDamaged:
    return VectorStoreDamaged(f"The vector store {where} holds {held} of the {expected} fragments repository "
                              f"'{repository}' has indexed (deleted, emptied or truncated since)",
                              suggestions=fix(repository))


def interrupted(repository: str, where: str, held: int, expected: int) -> VectorStoreDamaged:
    """The store short of what the index records because an index run was killed while it rewrote documents (its
    journal is left, no run holds the lock): the next run resumes and stores them again."""
    return VectorStoreDamaged(f"An index run of repository '{repository}' was interrupted while it rewrote "
                              f"documents: the vector store {where} holds {held} of the {expected} fragments the "
                              "index records", suggestions=[
                                  f"Run: researcher index {repository} (it resumes the interrupted run)",
                                  *fix(repository)[1:]])


def unreadable(repository: str, where: str, why: str) -> VectorStoreDamaged:
    return VectorStoreDamaged(f"The vector store {where} of repository '{repository}' cannot be read ({why})",
                              suggestions=fix(repository))


def removed(repository: str, where: str) -> VectorStoreDamaged:
    return VectorStoreDamaged(f"The vector store {where} of repository '{repository}' was removed (or replaced) "
                              "while it was being written", suggestions=[
                                  f"Run: researcher index {repository} again (it writes a new store and embeds "
                                  "the documents the removed one held again)"])


def identity(db: Path) -> tuple[int, int] | None:
    """(device, inode) of a non-empty database file; None when it is missing or empty."""
    try:
        info = os.stat(db)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if info.st_size else None


def stored_fragments(db: Path, collection: str, repository: str = "") -> int | None:
    """Fragments `collection` holds in the SQLite file `db`, read-only: 0 when the file is missing or empty or
    has no such collection; None when it is not laid out as this knows (then ask Chroma); VectorStoreDamaged
    when SQLite cannot read it."""
    if identity(db) is None:
        return 0
    try:
        conn = sqlite3.connect(f"{Path(db).absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        if not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
            return 0  # an empty database (Chroma had not written its tables yet)
        return int(conn.execute(_COUNT, (collection,)).fetchone()[0])
    except sqlite3.DatabaseError as exc:
        if isinstance(exc, sqlite3.OperationalError) and "malformed" not in str(exc):
            return None  # another layout, a lock, a hot journal to roll back: Chroma knows
        raise unreadable(repository or collection, str(Path(db).parent), str(exc)) from None  # not a database
    finally:
        conn.close()


def damaged_inside(db: Path) -> str | None:
    """What SQLite's quick check finds wrong inside the file (a page overwritten: Chroma's queries then fail or
    its Rust core panics, while a count still reads), or None. Read-only; an index run pays it, a search not."""
    if identity(db) is None:
        return None
    try:
        conn = sqlite3.connect(f"{Path(db).absolute().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        rows = conn.execute("PRAGMA quick_check(3)").fetchall()
    except sqlite3.DatabaseError as exc:
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and "malformed" not in text:
            return None  # locked, busy, a hot journal another process rolls back: not known to be damaged
        return text[:200]
    finally:
        conn.close()
    problems = [str(r[0]) for r in rows if r and r[0] != "ok"]
    return "; ".join(problems)[:200] or None
