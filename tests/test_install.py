"""install.sh on a fresh HOME that already holds the user's settings.json with a hook of their own:
install, install again (nothing changes), uninstall (everything restored byte for byte)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import MODEL_DIR, ROOT, assert_no_traceback

INSTALL = ROOT / "install.sh"
USER_SETTINGS = """{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "/home/me/bin/guard.sh"}]}
        ]
    },
    "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)"]},
    "statusLine": {"type": "command", "command": "echo hi"}
}
"""
GSD_CONFIG = """{
  "mode": "interactive",
  "workflow": {
    "research": true
  },
  "agent_skills": {
    "gsd-executor": ["skills/testing-standards"]
  }
}
"""


@pytest.fixture
def user_home(home) -> Path:
    """The test's HOME with ~/.claude/settings.json as a user left it."""
    user = Path(os.environ["HOME"])
    (user / ".claude").mkdir()
    (user / ".claude" / "settings.json").write_text(USER_SETTINGS)
    return user


def install(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "CLAUDE_CONFIG_DIR",
                                                              "GSD_RESEARCH_VENV", "GSD_RESEARCH_BIN_DIR")}
    full.update(env or {})
    return subprocess.run(["bash", str(INSTALL), *args], capture_output=True, text=True, env=full, timeout=120)


def snapshot(root: Path) -> dict:
    """Every path under root: file bytes + mode + mtime, symlink targets, directory modes.

    ~/.cache is left out: the demo's knowledge-base run lets third-party runtimes (onnxruntime, Chroma's model
    cache) write there; that is theirs, not the installer's."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".cache" in dirnames:
            dirnames.remove(".cache")
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_dir():
                out[str(p)] = ("dir", st.st_mode)
            else:
                out[str(p)] = ("file", p.read_bytes(), st.st_mode, st.st_mtime_ns)
    return out


def seed_embedding_model(user: Path) -> bool:
    """Chroma's default model where Chroma looks for it (this machine has no internet), as seed-offline-models.sh."""
    if not MODEL_DIR.is_dir():
        return False
    dest = user / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2"
    dest.mkdir(parents=True)
    (dest / "onnx").symlink_to(MODEL_DIR)
    return True


def test_install_twice_then_uninstall_restores_everything(user_home, fake):
    before = snapshot(user_home)

    first = install("--skip-venv")
    assert first.returncode == 0, first.stderr
    after_first = snapshot(user_home)
    second = install("--skip-venv")
    assert second.returncode == 0, second.stderr
    assert snapshot(user_home) == after_first  # byte for byte, not even an mtime moved

    removed = install("--uninstall")
    assert removed.returncode == 0, removed.stderr
    assert snapshot(user_home) == before
    assert (user_home / ".claude" / "settings.json").read_text() == USER_SETTINGS
    for proc in (first, second, removed):
        assert_no_traceback(proc)
    # the closing demo ran the main job keyless against (fake) Context7
    docs = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert any(d.get("command") == "docs" and d.get("success") for d in docs), first.stdout
    assert "demo 1/3: gsd-research doctor" in first.stderr and "demo 3/3" in first.stderr


@pytest.mark.slow
def test_demo_indexes_the_plugins_docs_and_searches_them_offline(user_home, fake):
    if not seed_embedding_model(user_home):
        pytest.skip(f"no offline copy of Chroma's embedding model ({MODEL_DIR})")
    if subprocess.run([str(ROOT / "bin" / "researcher"), "--help"], capture_output=True).returncode != 0:
        pytest.skip("the researcher knowledge base is not available in this checkout yet")

    proc = install("--skip-venv")

    assert proc.returncode == 0, proc.stderr
    searches = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"success"')
                and '"command":"search"' in line.replace(" ", "")]
    assert searches and searches[0]["success"] is True, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "library-docs" in json.dumps(searches[0]), searches[0]
    assert install("--uninstall").returncode == 0
    assert not (user_home / ".local" / "share" / "gsd-research").exists()


@pytest.mark.slow
def test_demo_without_the_embedding_model_offline_says_how_to_seed_it(user_home, tmp_path):
    if subprocess.run([str(ROOT / "bin" / "researcher"), "--help"], capture_output=True).returncode != 0:
        pytest.skip("the researcher knowledge base is not available in this checkout yet")
    empty = tmp_path / "no-models"
    empty.mkdir()
    dead = "http://127.0.0.1:9"  # Chroma's model download goes nowhere, as on a machine without internet
    proc = install("--skip-venv", "--models-from", str(empty),
                   env={"HTTPS_PROXY": dead, "HTTP_PROXY": dead, "https_proxy": dead, "http_proxy": dead,
                        "CONTEXT7_API_URL": dead + "/api", "NO_PROXY": "", "no_proxy": ""})

    assert proc.returncode == 0, proc.stderr
    assert f"no all-MiniLM-L6-v2 ONNX files (model.onnx, tokenizer.json) under {empty}" in proc.stderr
    assert "demo 3/3: indexing failed" in proc.stderr and "./install.sh --models-from DIR" in proc.stderr
    assert "ENVIRONMENT_MISSING" in proc.stderr + proc.stdout
    assert '"command":"search"' not in proc.stdout.replace(" ", "")  # no search of an index that does not exist
    assert_no_traceback(proc)
    assert not (user_home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx" / "model.onnx").exists()


def test_install_merges_hooks_and_permissions_keeping_the_users(user_home):
    proc = install("--skip-venv", "--no-demo")
    assert proc.returncode == 0, proc.stderr

    settings = json.loads((user_home / ".claude" / "settings.json").read_text())
    assert settings["model"] == "opus" and settings["statusLine"] == {"type": "command", "command": "echo hi"}
    assert settings["permissions"]["allow"] == ["Bash(ls:*)", "Bash(gsd-research:*)", "Bash(researcher:*)"]
    assert settings["permissions"]["deny"] == ["Read(./.env)"]
    pre = settings["hooks"]["PreToolUse"]
    assert pre[0] == {"matcher": "Bash", "hooks": [{"type": "command", "command": "/home/me/bin/guard.sh"}]}
    assert {g["matcher"] for g in pre[1:]} == {"WebFetch", "^mcp__(context7|plugin_context7_context7)__.*"}
    commands = [h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]]
    run = user_home / ".claude" / "hooks" / "gsd-research" / "run"
    assert f'"{run}" session-start' in commands and f'"{run}" user-prompt-submit' in commands
    backup = user_home / ".local" / "share" / "gsd-research" / "backup" / "settings.json"
    assert backup.read_text() == USER_SETTINGS


def test_installed_pieces_work(user_home, fake):
    assert install("--skip-venv", "--no-demo").returncode == 0
    claude = user_home / ".claude"

    for rel in ("agents/gsd-researcher.md", "skills/library-docs/SKILL.md", "commands/research/docs.md",
                "commands/research/deep.md", "commands/research/search.md", "commands/research/fetch.md",
                "commands/research/kb.md"):
        assert (claude / rel).is_file(), rel
    launcher = user_home / ".local" / "bin" / "gsd-research"
    assert launcher.is_symlink() and Path(os.readlink(launcher)) == ROOT / "bin" / "gsd-research"
    docs = subprocess.run([str(launcher), "docs", "react", "hooks"], capture_output=True, text=True, timeout=60)
    assert json.loads(docs.stdout)["metadata"]["library_id"] == "/facebook/react"
    # the copied hook finds the environment through the data directory, not the plugin checkout
    hook = subprocess.run([str(claude / "hooks" / "gsd-research" / "run"), "session-start"],
                          input='{"hook_event_name": "SessionStart", "source": "startup"}',
                          capture_output=True, text=True, timeout=10)
    assert "gsd-research is available" in json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    venv_link = user_home / ".local" / "share" / "gsd-research" / "venv"
    assert venv_link.is_symlink() and (venv_link / "bin" / "python").exists()


def test_demo_offline_gives_a_clear_network_error_and_install_succeeds(user_home):
    dead = "http://127.0.0.1:9"  # nothing listens: connection refused at once, as offline
    proc = install("--skip-venv", env={"CONTEXT7_API_URL": dead + "/api", "PERPLEXITY_BASE_URL": dead,
                                       "TAVILY_BASE_URL": dead, "GEMINI_BASE_URL": dead, "OLLAMA_HOST": dead,
                                       "OPENAI_BASE_URL": dead})

    assert proc.returncode == 0, proc.stderr
    docs = [json.loads(line) for line in proc.stdout.splitlines() if '"command": "docs"' in line
            or '"command":"docs"' in line]
    assert docs and docs[0]["error"]["code"] == "NETWORK_ERROR"
    assert "CONTEXT7_API_KEY" not in os.environ  # keyless


def test_uninstall_keeps_changes_the_user_made_after_install(user_home):
    assert install("--skip-venv", "--no-demo").returncode == 0
    path = user_home / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    settings["theme"] = "dark"
    settings["permissions"]["allow"].append("Bash(git status:*)")
    path.write_text(json.dumps(settings))

    assert install("--uninstall").returncode == 0

    left = json.loads(path.read_text())
    assert left["theme"] == "dark"
    assert left["permissions"]["allow"] == ["Bash(ls:*)", "Bash(git status:*)"]
    assert left["hooks"] == json.loads(USER_SETTINGS)["hooks"]


def test_fresh_home_without_settings(home):
    user = Path(os.environ["HOME"])
    before = snapshot(user)

    assert install("--skip-venv", "--no-demo").returncode == 0
    assert "Bash(gsd-research:*)" in (user / ".claude" / "settings.json").read_text()
    assert install("--uninstall").returncode == 0

    assert snapshot(user) == before


def test_settings_with_comments_are_left_untouched(user_home):
    path = user_home / ".claude" / "settings.json"
    path.write_text('{ // my comment\n "model": "opus" }\n')

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 0 and "left untouched" in proc.stderr
    assert path.read_text() == '{ // my comment\n "model": "opus" }\n'
    assert install("--uninstall").returncode == 0
    assert path.read_text() == '{ // my comment\n "model": "opus" }\n'


def test_files_the_user_owns_are_not_overwritten(user_home):
    mine = user_home / ".claude" / "agents" / "gsd-researcher.md"
    mine.parent.mkdir()
    mine.write_text("my own agent\n")

    proc = install("--skip-venv", "--no-demo")
    assert proc.returncode == 0 and "left alone" in proc.stderr
    assert install("--uninstall").returncode == 0

    assert mine.read_text() == "my own agent\n"


def test_gsd_project_wiring_and_unwiring(user_home, tmp_path):
    project = tmp_path / "my app"
    (project / ".planning").mkdir(parents=True)
    config = project / ".planning" / "config.json"
    config.write_text(GSD_CONFIG)

    assert install("--skip-venv", "--no-demo", "--gsd-project", str(project)).returncode == 0
    wired = config.read_bytes()
    skills = json.loads(wired)["agent_skills"]
    assert skills["gsd-executor"] == ["skills/testing-standards"]
    for agent in ("gsd-phase-researcher", "gsd-project-researcher"):
        assert "global:library-docs" in skills[agent]
        for entry in skills[agent]:  # each global:<name> is a skill installed in ~/.claude/skills
            assert (user_home / ".claude" / "skills" / entry.split(":", 1)[1] / "SKILL.md").is_file()
    assert install("--skip-venv", "--no-demo", "--gsd-project", str(project)).returncode == 0
    assert config.read_bytes() == wired

    assert install("--uninstall").returncode == 0
    assert config.read_text() == GSD_CONFIG


def test_not_a_gsd_project_is_refused_before_any_change(user_home, tmp_path):
    before = snapshot(user_home)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(tmp_path))

    assert proc.returncode != 0 and "not a GSD project" in proc.stderr
    assert snapshot(user_home) == before


def test_unknown_option_and_uninstall_without_install(user_home):
    bad = install("--frobnicate")
    assert bad.returncode != 0 and "unknown option --frobnicate" in bad.stderr

    nothing = install("--uninstall")
    assert nothing.returncode == 0 and "nothing to uninstall" in nothing.stderr
    assert (user_home / ".claude" / "settings.json").read_text() == USER_SETTINGS


def test_no_claude_installs_only_the_environment_and_path_links(user_home):
    before = snapshot(user_home / ".claude")

    assert install("--skip-venv", "--no-demo", "--no-claude").returncode == 0

    assert snapshot(user_home / ".claude") == before
    assert (user_home / ".local" / "bin" / "gsd-research").is_symlink()
    assert install("--uninstall").returncode == 0
    assert not (user_home / ".local").exists()
