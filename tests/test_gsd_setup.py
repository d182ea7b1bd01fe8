"""/research:setup (installer/allow_rules.py): the plugin route's permission rules merged into settings.json as
install.sh merges them, the original kept, and `revoke` giving back the user's exact file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.install_fixtures import USER_SETTINGS

RULES = ["Bash(gsd-research:*)", "Bash(researcher:*)"]


def setup(action: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-E", "-s", str(ROOT / "installer" / "allow_rules.py"), action],
                          capture_output=True, text=True, timeout=30, env=dict(os.environ))


@pytest.fixture
def settings(home) -> Path:
    path = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(USER_SETTINGS)
    return path


def test_allow_adds_both_rules_and_keeps_everything_else(settings):
    proc = setup("allow")

    after = json.loads(settings.read_text())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert after["permissions"]["allow"] == ["Bash(ls:*)", *RULES]
    assert after["permissions"]["deny"] == ["Read(./.env)"] and after["statusLine"]["command"] == "echo hi"


def test_allow_twice_changes_nothing(settings):
    assert setup("allow").returncode == 0
    once = settings.read_bytes()

    proc = setup("allow")

    assert proc.returncode == 0 and "already allowed" in proc.stdout
    assert settings.read_bytes() == once


def test_revoke_restores_the_users_exact_bytes(settings):
    assert setup("allow").returncode == 0

    assert setup("revoke").returncode == 0

    assert settings.read_text() == USER_SETTINGS


def test_revoke_keeps_a_rule_the_user_had_before(settings):
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(researcher:*)"]}}))
    assert setup("allow").returncode == 0

    assert setup("revoke").returncode == 0

    assert json.loads(settings.read_text())["permissions"]["allow"] == ["Bash(researcher:*)"]


def test_revoke_after_a_setup_that_changed_nothing_keeps_the_users_rules(settings):
    settings.write_text(json.dumps({"permissions": {"allow": RULES}}))
    assert setup("allow").returncode == 0
    before = settings.read_bytes()

    proc = setup("revoke")

    assert proc.returncode == 0 and "nothing to revoke" in proc.stdout and settings.read_bytes() == before


def test_settings_with_comments_are_left_untouched(settings):
    settings.write_text('{ // mine\n "model": "opus" }\n')

    proc = setup("allow")

    assert proc.returncode == 1 and "left unchanged" in proc.stdout
    assert settings.read_text() == '{ // mine\n "model": "opus" }\n'


def test_allow_writes_the_rules_install_sh_writes(home):
    sys.path.insert(0, str(ROOT / "installer"))
    try:
        import claude_settings as cs
    finally:
        sys.path.remove(str(ROOT / "installer"))

    assert cs.allow({})["permissions"]["allow"] == cs.merge({}, "/x/run")["permissions"]["allow"] == RULES
