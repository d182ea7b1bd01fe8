"""What the safe cache format costs: reading and writing one cached answer, pickle vs tagged JSON.

    .venv/bin/python bench/cache_format.py [--rounds 30]

A SQLite cache of each format (requests-cache's pickle serializer, the one before; gsd-research's tagged
JSON serializer, the one now) stores and reads back answers of three sizes (a 3 kB JSON API answer, a
60 kB HTML page, a 2 MB PDF), alternating the two formats round by round. Prints the median time of a
write and of a `get_response` per format and size, and the stored size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

from _common import ROOT  # noqa: F401 - sys.path for the checkout


def make_response(body: bytes, content_type: str, expires):
    from requests.structures import CaseInsensitiveDict
    from requests_cache.models import CachedRequest, CachedResponse

    url = "https://example.org/x"
    return CachedResponse(content=body, status_code=200, url=url, reason="OK", encoding="utf-8",
                          created_at=datetime.now(timezone.utc), expires=expires,
                          headers=CaseInsensitiveDict({"Content-Type": content_type}),
                          request=CachedRequest(method="GET", url=url, headers=CaseInsensitiveDict()))


def bodies() -> dict[str, tuple[bytes, str]]:
    api = json.dumps({"results": [{"id": i, "title": f"Library {i}", "snippet": "text " * 40} for i in range(12)]})
    html = "<html><body>" + "<p>Paragraph with some words about widgets.</p>" * 1300 + "</body></html>"
    return {"3 kB JSON": (api.encode(), "application/json"), "60 kB HTML": (html.encode(), "text/html"),
            "2 MB PDF": (os.urandom(2_000_000), "application/pdf")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    from gsd_research.core.http_cache import import_requests_cache, safe_serializer

    requests_cache = import_requests_cache(False)
    folder = tempfile.mkdtemp(prefix="gsd-cache-format-")
    caches = {"pickle (before)": requests_cache.SQLiteCache(os.path.join(folder, "p.sqlite"), serializer="pickle"),
              "tagged JSON (now)": requests_cache.SQLiteCache(os.path.join(folder, "j.sqlite"),
                                                              serializer=safe_serializer())}
    expires = datetime.now(timezone.utc) + timedelta(hours=1)
    print(f"{args.rounds} rounds, formats alternating; load average {os.getloadavg()[0]:.2f}\n")
    print("| answer | format | save median | read median | stored bytes |\n|---|---|---|---|---|")
    for label, (body, ctype) in bodies().items():
        times = {name: ([], []) for name in caches}
        for i in range(args.rounds):
            for name, cache in caches.items():
                key = f"{label}-{i}"
                resp = make_response(body, ctype, expires)
                started = time.perf_counter()
                cache.responses[key] = resp
                times[name][0].append(time.perf_counter() - started)
                started = time.perf_counter()
                got = cache.get_response(key)
                times[name][1].append(time.perf_counter() - started)
                assert got is not None and got.content == body
        for name, cache in caches.items():
            raw = cache.responses.connection().__enter__().execute(
                "SELECT length(value) FROM responses WHERE key = ?", (f"{label}-0",)).fetchone()[0]
            save, read = (statistics.median(t) * 1000 for t in times[name])
            print(f"| {label} | {name} | {save:.2f} ms | {read:.2f} ms | {raw:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
