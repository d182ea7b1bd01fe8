"""The real Claude Code client, pinned, installed from the npm registry into <repo>/.e2e once and reused."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

CLAUDE_CODE_VERSION = "2.1.330"  # verified in ../shared/claude-code/NOTES.md
E2E_DIR = ROOT / ".e2e"
CLAUDE = E2E_DIR / "node_modules" / ".bin" / "claude"


def client_home(home: str | Path) -> dict:
    """HOME and CLAUDE_CONFIG_DIR for one run of the client, both in a temporary directory: the client writes
    its state there (.claude.json, backups, telemetry, projects). Never the checkout (nor, with HOME unset, the
    real user's home)."""
    home = Path(home).resolve()
    if home == ROOT or ROOT in home.parents:
        raise AssertionError(f"the client's home {home} is inside the checkout {ROOT}: give it a tmp dir")
    return {"HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude")}


def _installed_version() -> str | None:
    if not CLAUDE.exists():
        return None
    try:  # a throw-away HOME: the client may write its config there
        with tempfile.TemporaryDirectory() as home:
            out = subprocess.run([str(CLAUDE), "--version"], capture_output=True, text=True, timeout=60,
                                 env={"PATH": "/usr/bin:/bin", **client_home(home)}).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.split()[0] if out.strip() else None


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    """Path of the pinned `claude` binary; skips (saying why) only when the npm registry is unreachable."""
    if not shutil.which("npm"):
        pytest.skip("npm is not installed: cannot install Claude Code for the end-to-end tests")
    E2E_DIR.mkdir(exist_ok=True)
    with open(E2E_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # parallel workers install once
        if _installed_version() != CLAUDE_CODE_VERSION:
            proc = subprocess.run(
                ["npm", "install", "--prefix", str(E2E_DIR), "--no-audit", "--no-fund", "--no-save",
                 f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"],
                capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                unreachable = any(s in proc.stderr for s in ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT",
                                                              "network", "ECONNRESET"))
                if unreachable:
                    pytest.skip(f"npm registry unreachable, cannot install @anthropic-ai/claude-code@"
                                f"{CLAUDE_CODE_VERSION}: {proc.stderr.strip().splitlines()[-1:]}")
                pytest.fail(f"npm install of Claude Code failed:\n{proc.stderr[-2000:]}")
        version = _installed_version()
    assert version == CLAUDE_CODE_VERSION, f"expected Claude Code {CLAUDE_CODE_VERSION}, got {version}"
    return CLAUDE


@pytest.fixture
def fake_api():
    from tests.e2e.fake_anthropic import FakeAnthropic

    server = FakeAnthropic().start()
    yield server
    server.stop()


def clean_env(**extra: str) -> dict:
    """A minimal environment for `claude`: no provider keys, no plugin bin/ on PATH of its own."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "ANTHROPIC_API_KEY": "dummy", "DISABLE_AUTOUPDATER": "1"}
    env.update(client_home(os.environ["HOME"]))  # the test's own HOME (autouse fixture), never the checkout
    for name in ("GSD_RESEARCH_HOME", "TIKTOKEN_CACHE_DIR"):
        env[name] = os.environ[name]
    env.update(extra)
    return env
