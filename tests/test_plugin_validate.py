"""`claude plugin validate --strict` (the pinned Claude Code from npm) on the repository, and on broken copies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import (
    claude_bin,  # noqa: F401 - the session fixture that installs the client
    client_home,
)

pytestmark = pytest.mark.e2e
PARTS = (".claude-plugin", "plugin.json", "README.md", "skills", "agents", "commands", "hooks", "bin")


def validate(claude: Path, target: Path) -> subprocess.CompletedProcess:
    """Offline, no key, a throw-away HOME and config dir (the client writes .claude.json and telemetry there)."""
    env = {"PATH": "/usr/bin:/bin", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **client_home(os.environ["HOME"])}
    return subprocess.run([str(claude), "plugin", "validate", "--strict", str(target)], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json"])
def test_repository_validates_strictly(claude_bin, target):  # noqa: F811
    proc = validate(claude_bin, ROOT / target)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "✔ Validation passed" in out and "with warnings" not in out
    for provided in ("skills: research:library-docs", "commands: research:docs", "commands: research:deep",
                     "commands: research:search", "commands: research:fetch", "commands: research:kb",
                     "agents: research:research-scout", "bin: gsd-research", "bin: researcher",
                     "hooks: SessionStart", "hooks: UserPromptSubmit", "hooks: PreToolUse WebFetch",
                     "hooks: SubagentStart"):
        assert provided in out, provided


@pytest.fixture
def plugin_copy(tmp_path) -> Path:
    copy = tmp_path / "plugin"
    copy.mkdir()
    for part in PARTS:
        src = ROOT / part
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, copy / part)
    return copy


def test_validator_catches_a_broken_hooks_file(claude_bin, plugin_copy):  # noqa: F811
    spec = json.loads((plugin_copy / "hooks" / "hooks.json").read_text())
    spec["hooks"]["PreToolUze"] = spec["hooks"].pop("PreToolUse")
    (plugin_copy / "hooks" / "hooks.json").write_text(json.dumps(spec))

    proc = validate(claude_bin, plugin_copy)

    assert proc.returncode == 1 and "PreToolUze" in proc.stdout


def test_validator_catches_a_broken_manifest(claude_bin, plugin_copy):  # noqa: F811
    manifest = json.loads((plugin_copy / ".claude-plugin" / "plugin.json").read_text())
    manifest["keywords"] = "research"
    manifest["comands"] = "./x"
    (plugin_copy / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))

    proc = validate(claude_bin, plugin_copy)

    assert proc.returncode == 1 and "keywords" in proc.stdout
