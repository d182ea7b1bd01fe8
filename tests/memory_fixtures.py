"""Helpers for tests of pages read through the fake server and kept in the research memory."""

from __future__ import annotations

import sqlite3

PAGE = """<html><head><title>{title}</title></head><body><article><h1>{title}</h1>
<p>{text}</p><p>The second paragraph gives more context about the subject so that the extraction keeps the
article as its main content and the page is long enough to be read.</p></article></body></html>"""


def page(fake, name: str, title: str, text: str) -> str:
    fake.state.setdefault("pages", {})[name] = PAGE.format(title=title, text=text)
    return f"{fake.url}/pages/state/{name}"


def entries(home) -> list[dict]:
    path = home / "research-memory" / "catalog.sqlite"
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute("SELECT * FROM entries ORDER BY fetched_at, kind")]
    finally:
        conn.close()
