"""Helpers for tests that run the hook scripts as Claude Code does: event payloads and a real-process runner."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

RUN = ROOT / "hooks" / "run"
SID = "4f1c2a9e-0d1b-4c55-9a43-7c0e3b1f2d11"
COMMON = {"session_id": SID, "transcript_path": f"/root/.claude/projects/-tmp-proj/{SID}.jsonl",
          "cwd": "/tmp/proj"}
SESSION_START = {**COMMON, "hook_event_name": "SessionStart", "source": "startup", "model": "claude-opus-5-5"}
WEBFETCH = {**COMMON, "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "WebFetch",
            "tool_input": {"url": "https://fastapi.tiangolo.com/advanced/events/", "prompt": "how do lifespan events work"},
            "tool_use_id": "toolu_01ABC"}


@dataclass
class Hook:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> dict | None:
        text = self.stdout.strip()
        if not text:
            return None
        assert len(text.splitlines()) == 1, self.stdout
        return json.loads(text)


def hook(event: str, payload, env: dict | None = None, runner: Path = RUN) -> Hook:
    """Run one hook event as a real process; a hook never fails the session, so exit 0 and no traceback.
    A hang fails the test by the subprocess timeout."""
    data = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    proc = subprocess.run([str(runner), event], input=data.encode() if isinstance(data, str) else data,
                          capture_output=True, env={**os.environ, **(env or {})}, timeout=10)
    result = Hook(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def context(result: Hook) -> str:
    assert result.json is not None, "expected a JSON answer"
    return result.json["hookSpecificOutput"].get("additionalContext", "")


def add_job(home: Path, job_id: str, status: str, age: float = 0) -> None:
    """A job folder as the deep worker leaves it (status.json aged by `age` seconds)."""
    job = home / "conversation-logs" / job_id
    job.mkdir(parents=True, exist_ok=True)
    (job / "status.json").write_text(json.dumps({"status": status, "attempts": 1}))
    if age:
        t = time.time() - age
        os.utime(job / "status.json", (t, t))
