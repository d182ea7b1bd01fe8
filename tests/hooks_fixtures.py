"""Helpers for tests that run the hook scripts as Claude Code does: event payloads and a real-process runner."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT

RUN = ROOT / "hooks" / "run"
SID = "4f1c2a9e-0d1b-4c55-9a43-7c0e3b1f2d11"
COMMON = {"session_id": SID, "transcript_path": f"/root/.claude/projects/-tmp-proj/{SID}.jsonl",
          "cwd": "/tmp/proj"}
SESSION_START = {**COMMON, "hook_event_name": "SessionStart", "source": "startup", "model": "claude-opus-5-5"}
PROMPT = {**COMMON, "prompt_id": "p-1", "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
          "prompt": "plan phase 3"}


def pre_tool(tool_name: str, tool_input: dict, **extra) -> dict:
    return {**COMMON, "permission_mode": "default", "effort": {"level": "high"}, "hook_event_name": "PreToolUse",
            "tool_name": tool_name, "tool_input": tool_input, "tool_use_id": "toolu_01ABC", **extra}


WEBFETCH = pre_tool("WebFetch", {"url": "https://fastapi.tiangolo.com/advanced/events/",
                                 "prompt": "how do lifespan events work"})
SUBAGENT = {"agent_id": "a7574d2e93c659aa7", "agent_type": "gsd-phase-researcher"}
CONTEXT7 = pre_tool("mcp__plugin_context7_context7__query-docs",
                    {"libraryId": "/vercel/next.js", "query": "middleware matcher"}, **SUBAGENT)


class Hook:
    def __init__(self, code: int, stdout: str, stderr: str):
        self.code, self.stdout, self.stderr = code, stdout, stderr

    @property
    def json(self) -> dict | None:
        text = self.stdout.strip()
        if not text:
            return None
        assert len(text.splitlines()) == 1, self.stdout
        return json.loads(text)


def hook(event: str, payload, env: dict | None = None, runner: Path = RUN) -> Hook:
    """Run one hook event as a real process, with bin/ on PATH as when installed; a hook never fails the
    session, so exit 0 and no traceback. A hang fails the test by the subprocess timeout."""
    data = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    full = dict(os.environ)
    full["PATH"] = f"{ROOT / 'bin'}{os.pathsep}{full.get('PATH', '')}"  # the commands reachable, as when installed
    full.update(env or {})
    proc = subprocess.run([str(runner), event], input=data.encode() if isinstance(data, str) else data,
                          capture_output=True, env=full, timeout=10)
    result = Hook(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    assert result.code == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result


def context(result: Hook) -> str:
    assert result.json is not None, "expected a JSON answer"
    return result.json["hookSpecificOutput"].get("additionalContext", "")


def set_config(home: Path, text: str) -> None:
    (home / "config.yaml").write_text(text)


def add_job(home: Path, job_id: str, status: str, age: float = 0) -> None:
    job = home / "conversation-logs" / job_id
    job.mkdir(parents=True, exist_ok=True)
    (job / "status.json").write_text(json.dumps({"status": status, "attempts": 1}))
    if age:
        t = time.time() - age
        os.utime(job / "status.json", (t, t))


def subagent_start(agent_type: str) -> dict:
    return {**COMMON, "prompt_id": "p-2", "agent_id": "a2aa1f0d633594eea", "agent_type": agent_type,
            "hook_event_name": "SubagentStart"}


PROVIDERS_TEXT_EVENT = subagent_start("gsd-phase-researcher")
