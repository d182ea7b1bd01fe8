"""The research memory's background embedding: after `fetch --extract` of N AEB pages (served on 127.0.0.1,
embedding off while they are read), the embedding worker itself (`python -m
gsd_research.researcher.embed_worker research-memory`, as `schedule_embedding` starts it, with its kernel
limits) runs to the end: its wall time, CPU time and peak RSS (wait4's rusage), and what it left pending.
With --huge, a 10 MiB page is fetched first: its kept entry and how much the state folder grew.

Usage: python bench/memory_embed.py [--pages 30] [--huge]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SHARED  # noqa: E402
from _pages import articles, english, page_url, serve  # noqa: E402

BIN = Path(sys.executable).parent


def env_for(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_API_URL"))}
    env.update(GSD_RESEARCH_HOME=str(home), GSD_RESEARCH_ALLOW_HOSTS="127.0.0.1", OLLAMA_HOST="http://127.0.0.1:9",
               TIKTOKEN_CACHE_DIR=str(SHARED / "tokenizers" / "tiktoken"), HOME=str(home.parent / "userhome"))
    Path(env["HOME"]).mkdir(parents=True, exist_ok=True)
    subprocess.run(["bash", str(SHARED / "tools" / "seed-offline-models.sh")], env=env, check=True,
                   capture_output=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text('memory:\n  embed: "off"\n')  # the worker is started and measured below
    return env


def fetch_pages(env: dict, base: str, n: int) -> int:
    ids = [aid for aid, a in articles().items() if english(a["articleBody"])][:n]
    for aid in ids:
        proc = subprocess.run([str(BIN / "gsd-research"), "fetch", "--extract", page_url(base, aid)],
                              capture_output=True, text=True, env=env)
        doc = json.loads(proc.stdout)
        if doc["metadata"].get("memory") != "stored":
            raise SystemExit(f"fetch {aid}: {proc.stdout[:300]}")
    return len(ids)


def tree_mb(root: Path) -> float:
    return round(sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 2**20, 2) if root.exists() else 0.0


def fetch_huge(env: dict, home: Path) -> dict:
    """One 10 MiB page (2 MiB of paragraphs, one 8 MiB paragraph) from its own server: what is kept of it."""
    import sqlite3
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    para = "<p>Paragraph {i} of a very long page about widget toolkits and their many release notes.</p>\n"
    body = ("<html><head><title>Huge</title></head><body><article><h1>Huge</h1>"
            + "".join(para.format(i=i) for i in range(24_000)) + "<p>" + "x" * (8 << 20) + "</p>"
            + "</article></body></html>").encode()

    class Huge(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    before = tree_mb(home)
    proc = subprocess.run([str(BIN / "gsd-research"), "fetch", "--extract", f"http://127.0.0.1:{server.server_address[1]}/"],
                          capture_output=True, text=True, env=env)
    server.shutdown()
    status = json.loads(proc.stdout)["metadata"].get("memory")
    conn = sqlite3.connect(home / "research-memory" / "catalog.sqlite")
    kept = conn.execute("SELECT MAX(bytes) FROM entries").fetchone()[0]
    conn.close()
    return {"page_mb": round(len(body) / 2**20, 2), "memory": status, "entry_kb": round(kept / 1024, 1),
            "memory_state_mb": round(tree_mb(home / "research-memory")
                                     + tree_mb(home / "repositories" / "research-memory"), 2),
            "home_growth_mb_with_http_cache": round(tree_mb(home) - before, 2)}


def run_worker(env: dict) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gsd_research.researcher.embed_worker", "research-memory"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"exit": proc.returncode, "wall_s": round(time.perf_counter() - started, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024),
            "stderr_tail": proc.stderr.read().decode(errors="replace")[-300:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=30)
    parser.add_argument("--huge", action="store_true", help="fetch a 10 MiB page first (kept and embedded too)")
    args = parser.parse_args()
    base, server = serve()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = env_for(home)
        huge = fetch_huge(env, home) if args.huge else None
        fetched = fetch_pages(env, base, args.pages)
        server.shutdown()
        worker = run_worker(env)
        state = subprocess.run([str(BIN / "researcher"), "status", "research-memory", "--json"], capture_output=True,
                               text=True, env=env)
        memory = json.loads(state.stdout).get("research_memory", {})
        kept_mb = sum(p.stat().st_size for p in (home / "research-memory").rglob("*") if p.is_file()) / 2**20
        print(json.dumps({"huge_page": huge, "pages": fetched, "worker": worker, "memory_after": memory,
                          "memory_folder_mb": round(kept_mb, 1)}, indent=1))


if __name__ == "__main__":
    main()
