"""Fixtures of the HTTP cache tests: a throwaway redis-server, a planted pickle, entries made to expire."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from gsd_research.core.config import set_value
from gsd_research.core.http_cache import FORMAT_TAG

# requests-cache 1.3 calls redis-py's deprecated setex; not ours to fix.
redis_warning = pytest.mark.filterwarnings("ignore:Call to deprecated setex:DeprecationWarning")
PAST = "2000-01-01T00:00:00+00:00"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A throwaway redis-server on 127.0.0.1 (no persistence, a free port per worker), stopped at the end."""
    exe = shutil.which("redis-server")
    if not exe:
        pytest.skip("redis-server is not on PATH (Debian: apt-get install redis-server); Redis backend untested")
    port = free_port()
    workdir = tmp_path_factory.mktemp("redis")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    for _ in range(400):  # up to ~20 s on a loaded machine
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("redis-server did not start")
    if proc.poll() is not None:
        pytest.fail("redis-server exited at start")
    yield f"redis://127.0.0.1:{port}/0", client
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def redis_home(redis_server, home):
    """This test's home configured for the Redis backend, on an emptied server; gives the redis client."""
    url, client = redis_server
    client.flushall()
    set_value("cache.backend", "redis", home / "config.yaml")
    set_value("cache.redis_url", url, home / "config.yaml")
    return client


class _Payload:
    """Unpickling this runs `touch MARKER`: what an attacker with write access to the cache would plant."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def evil_pickle(marker: Path) -> bytes:
    return pickle.dumps(_Payload(marker))


def expire_entries(path: Path, where: str = "") -> int:
    """Make SQLite cache entries expired (both the stored answer and requests-cache's expiry column), so a test
    need not wait out a TTL; `where` narrows which rows. Returns how many."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT key, value FROM responses {where}").fetchall()
        for key, value in rows:
            text = value.decode() if isinstance(value, bytes) else value
            entry = dict(json.loads(text.removeprefix(FORMAT_TAG)), expires=PAST)
            conn.execute("UPDATE responses SET value = ?, expires = ? WHERE key = ?",
                         (FORMAT_TAG + json.dumps(entry), 946684800, key))
    return len(rows)
