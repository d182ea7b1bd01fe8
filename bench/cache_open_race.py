"""Processes racing to open a new HTTP cache: how many of them lose the cache ("database is locked").

Usage: python bench/cache_open_race.py [--rounds N] [--procs P] [--lib DIR]
Each round starts P fresh processes on a new GSD_RESEARCH_HOME at the same instant; each builds the
product's session (`gsd_research.core.http_cache.build_session`) and makes two requests to a local server.
`--lib` runs another copy of the package (e.g. `git archive HEAD lib | tar -x -C /tmp/before`) for a
side-by-side comparison. A process that fails prints the exception; the script counts them.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

CHILD = r"""
import os, sys, time
start, home, port = float(sys.argv[1]), sys.argv[2], sys.argv[3]
os.environ["GSD_RESEARCH_HOME"] = home
from gsd_research.core.config import Config
from gsd_research.core.http_cache import build_session
while time.time() < start:
    pass
try:
    session = build_session(Config())
    for name in ("a", "b"):
        session.get(f"http://127.0.0.1:{port}/{name}", expire_after=3600)
    print("ok")
except Exception as exc:  # noqa: BLE001 - reported, counted
    print(f"FAIL {exc.__class__.__name__}: {exc}")
"""


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        time.sleep(0.02)
        body = json.dumps({"x": "y" * 3000}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--procs", type=int, default=16)
    parser.add_argument("--lib", help="a lib/ folder to import gsd_research from instead of the installed one")
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = dict(os.environ, PYTHONPATH=args.lib) if args.lib else dict(os.environ)
    failures: list[str] = []
    for _ in range(args.rounds):
        home, start = tempfile.mkdtemp(prefix="gsd-race-"), time.time() + 1.5
        procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(start), home, str(server.server_address[1])],
                                  stdout=subprocess.PIPE, text=True, env=env) for _ in range(args.procs)]
        failures += [out for out in (p.communicate()[0].strip() for p in procs) if out != "ok"]
    server.shutdown()
    print(json.dumps({"processes": args.rounds * args.procs, "lost_the_cache": len(failures),
                      "errors": sorted(set(failures))[:5], "lib": args.lib or "installed"}))


if __name__ == "__main__":
    main()
