"""Shared helpers of the deep research and job queue tests (test files import these, never each other)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import BIN, TEST_CONFIG

CANARY = "pplx-canary-7c1d9e2f4b8a"
SUBMIT = "/perplexity/async/chat/completions"  # blocking calls submit through the async API too
POLL = SUBMIT + "/"
FAST_DEEP = {"poll_interval": 0.02, "retry_backoff": 0.02, "retry_backoff_max": 0.05, "idle_exit": 0.3,
             "autostart": False, "concurrency": 1}


def configure(home: Path, deep: dict | None = None, http: dict | None = None, extra: dict | None = None) -> None:
    """Write the test home's config.yaml: the fast HTTP settings plus fast deep research settings."""
    import yaml

    cfg = yaml.safe_load(TEST_CONFIG)
    cfg["http"].update(http or {})
    cfg["deep"] = {**FAST_DEEP, **(deep or {})}
    cfg.update(extra or {})
    (home / "config.yaml").write_text(yaml.safe_dump(cfg))


def is_worker(pid) -> bool:
    try:
        return b"jobs\x00worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, TypeError):
        return False


def reap_worker(home: Path) -> None:
    """Kill the background worker a test left in its home (by the pid it recorded, checked by command line);
    each file's `reap` fixture calls it after its test."""
    try:
        pid = read(home / "jobs" / "worker.json").get("pid")
    except (OSError, ValueError):
        return
    if is_worker(pid):
        os.kill(pid, signal.SIGKILL)


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def job_dirs(home: Path) -> list[Path]:
    logs = home / "conversation-logs"
    return sorted(p for p in logs.iterdir() if p.is_dir()) if logs.is_dir() else []


def status_of(home: Path, job_id: str) -> dict:
    return read(home / "conversation-logs" / job_id / "status.json")


def ledger_lines(home: Path) -> list[dict]:
    path = home / "usage" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def all_state_text(home: Path) -> str:
    """Every file the product wrote under the home (logs, status, ledger, caches), as text."""
    chunks = []
    for path in home.rglob("*"):
        if path.is_file() and path.name != "config.yaml":
            chunks.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(chunks)


def enqueue(cli, query: str, *extra: str) -> str:
    result = cli("deep", "--async", query, *extra)
    assert result.code == 0, result.stdout
    return result.json["conversation_id"]


def submitted_queries(fake) -> list[str]:
    return [r.json()["request"]["messages"][0]["content"] for r in fake.hits(SUBMIT, method="POST")]


def wait_for(predicate, timeout: float = 15.0, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")


def remote_id_recorded(home: Path) -> bool:
    """Whether a job has recorded the id of its paid request: a kill from now on lands mid-poll."""
    return any((read(d / "status.json") if (d / "status.json").exists() else {}).get("remoteId")
               for d in job_dirs(home))


def start_blocking(query: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "gsd-research"), "deep", query, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def gsd(*args: str, timeout: float = 60) -> tuple[int, dict]:
    proc = subprocess.run([str(BIN / "gsd-research"), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ))
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)
