"""install.sh beside GSD: the agent under a name GSD's installers never delete (with the old one migrated), and
the commands reachable from Claude Code's Bash tool without the user editing a shell profile."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.install_fixtures import install

BARE_PATH = "/usr/bin:/bin"  # the Bash tool's PATH of a user without ~/.local/bin on it


def _manifest(user: Path) -> Path:
    return user / ".local" / "share" / "gsd-research" / "install-manifest.json"


def _pretend_an_earlier_install_wrote(user: Path, path: Path, blob: bytes) -> None:
    path.write_bytes(blob)
    manifest = json.loads(_manifest(user).read_text())
    manifest["files"][str(path)] = hashlib.sha256(blob).hexdigest()
    _manifest(user).write_text(json.dumps(manifest))


RETIRED = [  # (a file an earlier install wrote, what replaced it), under ~/.claude
    ("agents/gsd-researcher.md", "agents/research-scout.md"),
    ("skills/summarize/SKILL.md", "skills/read-url/SKILL.md"),
    ("hooks/gsd-research/gsd_research_hook.py", "hooks/gsd-research/entry.py"),
    ("hooks/gsd-research/gsd_research_hooks/gsd_line.py", "hooks/gsd-research/gsd_research_hooks/project_line.py"),
]


@pytest.mark.parametrize("old_rel, new_rel", RETIRED)
@pytest.mark.parametrize("changed_by_user, survives", [(False, False), (True, True)])
def test_reinstall_retires_a_file_an_earlier_install_owned(user_home, old_rel, new_rel, changed_by_user,  # noqa: F811
                                                            survives):
    assert install("--skip-venv", "--no-demo").returncode == 0
    old = user_home / ".claude" / old_rel
    old.parent.mkdir(parents=True, exist_ok=True)
    _pretend_an_earlier_install_wrote(user_home, old, b"---\nname: old\n---\nold\n")
    if changed_by_user:
        old.write_text("my edits\n")

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 0, proc.stderr
    assert old.exists() == survives
    assert (user_home / ".claude" / new_rel).is_file()
    assert str(old) not in json.loads(_manifest(user_home).read_text())["files"]


def _looks_like_gsds(rel: Path) -> bool:
    """GSD's installers' rule (both lines, installer-migrations/000-first-time-baseline): a file of theirs to
    delete, or to stop the install and ask about, unless their manifest lists it."""
    top = rel.parts[:2]
    return rel.name.startswith(("gsd-", "gsd_")) or top[0] in ("agents", "skills") and top[1].startswith("gsd-")


def test_no_installed_file_has_a_name_gsd_installers_take_for_theirs(user_home):  # noqa: F811
    assert install("--skip-venv", "--no-demo").returncode == 0
    claude = user_home / ".claude"

    installed = [p.relative_to(claude) for surface in ("agents", "skills", "hooks", "commands")
                 for p in (claude / surface).rglob("*") if p.is_file()]

    assert any(rel.parts[0] == "hooks" for rel in installed)
    assert [rel for rel in installed if _looks_like_gsds(rel)] == []


def _hook(user: Path, event: str, payload: dict, env: dict) -> str:
    run = user / ".claude" / "hooks" / "gsd-research" / "run"
    proc = subprocess.run([str(run), event], input=json.dumps(payload), capture_output=True, text=True, timeout=10,
                          env={"HOME": str(user), "PATH": BARE_PATH, **env})
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def test_session_start_puts_the_bin_folder_on_the_bash_path_then_says_available(user_home, tmp_path):  # noqa: F811
    assert install("--skip-venv", "--no-demo").returncode == 0
    env_file = tmp_path / "claude-env"
    env_file.write_text("")

    text = _hook(user_home, "session-start", {"hook_event_name": "SessionStart"}, {"CLAUDE_ENV_FILE": str(env_file)})
    found = subprocess.run(["bash", "-c", f". {env_file}; command -v gsd-research && command -v researcher"],
                           capture_output=True, text=True, env={"HOME": str(user_home), "PATH": BARE_PATH})

    assert text.startswith("gsd-research is available through Bash")
    assert found.returncode == 0 and found.stdout.split() == [
        str(user_home / ".local" / "bin" / "gsd-research"), str(user_home / ".local" / "bin" / "researcher")]


def test_a_researcher_of_a_session_whose_path_was_extended_is_told_available(user_home, tmp_path):  # noqa: F811
    assert install("--skip-venv", "--no-demo").returncode == 0
    env_file = tmp_path / "claude-env"
    env_file.write_text("")
    _hook(user_home, "session-start", {"hook_event_name": "SessionStart", "session_id": "s1"},
          {"CLAUDE_ENV_FILE": str(env_file)})

    text = _hook(user_home, "subagent-start", {"hook_event_name": "SubagentStart", "session_id": "s1",
                                                "agent_type": "gsd-phase-researcher"}, {})
    other = _hook(user_home, "subagent-start", {"hook_event_name": "SubagentStart", "session_id": "s2",
                                                 "agent_type": "gsd-phase-researcher"}, {})

    assert "full path" not in text and "gsd-research" in text  # the bare commands its Bash calls will find
    assert "full path" in other


@pytest.mark.parametrize("event", ["session-start", "subagent-start"])
def test_without_a_way_onto_path_the_hooks_give_the_full_path_and_the_profile_line(user_home, event):  # noqa: F811
    assert install("--skip-venv", "--no-demo").returncode == 0
    folder = user_home / ".local" / "bin"

    text = _hook(user_home, event, {"hook_event_name": "x", "agent_type": "gsd-phase-researcher"}, {})

    assert "available through Bash" not in text
    assert f"{folder}/gsd-research" in text and f'export PATH="$PATH:{folder}"' in text


def test_install_note_says_how_claude_code_gets_the_commands(user_home):  # noqa: F811
    proc = install("--skip-venv", "--no-demo")

    assert "outside Claude Code" not in proc.stderr
    assert "the SessionStart hook adds it to the Bash tool's PATH" in proc.stderr
