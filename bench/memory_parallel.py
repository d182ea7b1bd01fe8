"""Parallel research: N `gsd-research fetch` processes at once on distinct AEB pages (served on 127.0.0.1), the
memory's defaults (background embedding on): what each answered for `memory`, how many entries the catalog
kept, how many documents it has no row for, and whether `recall` finds each page by its title.

Usage: python bench/memory_parallel.py [--pages 30]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _pages import articles, english, page_url, serve  # noqa: E402
from memory_embed import BIN, env_for  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=30)
    args = parser.parse_args()
    ids = [aid for aid, a in articles().items() if english(a["articleBody"])][:args.pages]
    base, server = serve()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = env_for(home)
        (home / "config.yaml").write_text("")  # the defaults: background embedding on

        def fetch(aid: str) -> str:
            proc = subprocess.run([str(BIN / "gsd-research"), "fetch", "--extract", page_url(base, aid)],
                                  capture_output=True, text=True, env=env)
            return json.loads(proc.stdout)["metadata"].get("memory", "?")

        started = time.perf_counter()
        with ThreadPoolExecutor(len(ids)) as pool:
            statuses = Counter(pool.map(fetch, ids))
        wall = time.perf_counter() - started
        server.shutdown()
        conn = sqlite3.connect(home / "research-memory" / "catalog.sqlite")
        rows = {r[0] for r in conn.execute("SELECT path FROM entries")}
        titles = [r[0] for r in conn.execute("SELECT title FROM entries")]
        conn.close()
        docs = {p.relative_to(home / "research-memory" / "documents").as_posix()
                for p in (home / "research-memory" / "documents").rglob("*.md")}
        found = 0
        for title in titles:
            proc = subprocess.run([str(BIN / "gsd-research"), "recall", title or ""], capture_output=True, text=True,
                                  env=env)
            found += any(r.get("title") == title for r in json.loads(proc.stdout).get("results", []))
        print(json.dumps({"fetches": len(ids), "wall_s": round(wall, 1), "memory_statuses": dict(statuses),
                          "entries_kept": len(rows), "documents_without_row": len(docs - rows),
                          "recalled_by_title": found}, indent=1))


if __name__ == "__main__":
    main()
