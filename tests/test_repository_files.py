"""Only product files in the repository: no Claude Code client state (`.claude.json`, `.claude/telemetry`,
backups, debug logs, projects, statsig …) is tracked, left in the checkout, or un-ignored."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

CLIENT_STATE = re.compile(
    r"(^|/)\.claude\.json(\.backup[^/]*)?$"
    r"|(^|/)\.claude/(backups|debug|file-history|plugins|projects|session-env|sessions|shell-snapshots|statsig"
    r"|telemetry|todos)(/|$)"
    r"|(^|/)\.claude/settings\.json$"
    # what only a client config dir holds, wherever that dir was (CLAUDE_CONFIG_DIR set to a product folder)
    r"|(^|/)(\.credentials\.json|history\.jsonl|\.last-cleanup)$|(^|/)file-history(/|$)")
# where the tests' own tools live (venv, the npm-installed client): not product files, never walked
SKIP_DIRS = {".git", ".venv", ".e2e", ".test-data", "node_modules", "__pycache__"}


def is_client_state(path: str) -> bool:
    return bool(CLIENT_STATE.search(path.replace(os.sep, "/")))


def git(*args: str) -> list[str]:
    if not shutil.which("git") or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked-files checks need git")
    out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def test_no_client_state_is_tracked():
    assert [p for p in git("ls-files") if is_client_state(p)] == []


def test_no_client_state_in_the_working_tree():
    """A test that ran the client with HOME or CLAUDE_CONFIG_DIR in the checkout leaves these behind."""
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in dirnames + filenames:
            rel = str((Path(dirpath) / name).relative_to(ROOT))
            if is_client_state(rel):
                found.append(rel)
    assert found == []


@pytest.mark.parametrize("path", [".claude.json", ".claude-plugin/.claude.json",
                                  ".claude-plugin/.claude/telemetry/1p_failed_events.x.json",
                                  ".claude/backups/.claude.json.backup.1795322825100", "x/.claude/statsig/s",
                                  ".claude/projects/-tmp-p/s.jsonl", ".claude/debug/latest",
                                  ".claude/plugins/installed_plugins.json", ".claude/plugins/data/research-x/venv",
                                  ".claude/sessions/1.json", ".claude/.last-cleanup", ".claude/settings.json",
                                  ".claude/.credentials.json", ".claude/history.jsonl", ".claude/file-history/a/b",
                                  ".claude-plugin/.credentials.json", "history.jsonl", ".last-cleanup",
                                  "file-history/s/x"])
def test_client_state_is_ignored_and_recognised(path):
    assert is_client_state(path)
    assert git("check-ignore", "--no-index", path) == [path]


@pytest.mark.parametrize("path", [".claude-plugin/plugin.json", ".claude-plugin/marketplace.json",
                                  "skills/library-docs/SKILL.md", "hooks/hooks.json", "agents/research-scout.md",
                                  "tests/e2e/fake_anthropic.py", "docs/projects/x.md", "docs/settings.json",
                                  "tests/fixtures/sessions/a.json", "lib/gsd_research/plugins/x.py",
                                  "tests/injection/clean/16-aws-cli-credentials.md", "docs/history.md"])
def test_product_files_are_not_mistaken_for_client_state(path):
    assert not is_client_state(path)


def test_the_client_is_never_given_the_checkout_as_its_home(tmp_path):
    from tests.e2e.conftest import client_home

    for inside in (ROOT, ROOT / ".claude-plugin"):
        with pytest.raises(AssertionError, match="inside the checkout"):
            client_home(inside)
    assert client_home(tmp_path) == {"HOME": str(tmp_path.resolve()), "CLAUDE_CONFIG_DIR": str(tmp_path.resolve() / ".claude")}
