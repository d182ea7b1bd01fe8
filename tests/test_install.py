"""install.sh on a fresh HOME that already holds the user's settings.json with a hook of their own:
install, install again (nothing changes), uninstall (everything restored byte for byte)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import MODEL_DIR, ROOT, assert_no_traceback
from tests.install_fixtures import (
    GSD_CONFIG,
    RUN_REL,
    SETTINGS_REL,
    USER_SETTINGS,
    assert_registered,
    copy_checkout,
    install,
    our_commands,
    snapshot,
)
from tests.researcher_fixtures import seed_model


def seed_embedding_model(user: Path) -> bool:
    """Chroma's default model where Chroma looks for it (this machine has no internet), as seed-offline-models.sh,
    and the int8 build the researcher makes of it on first use (built once per test process, linked into the
    test's GSD_RESEARCH_HOME), so that the demo's indexing does not quantize the model again. The installer's
    own seeding is test_install_faults' test_the_seeded_embedding_model_is_removed_on_uninstall."""
    if not MODEL_DIR.is_dir():
        return False
    seed_model(user)
    return True


def test_install_twice_then_uninstall_restores_everything(user_home, fake):
    """The full route as a user runs it, demo included: the demo indexes the plugin's own docs and searches them
    offline; a second run changes nothing; uninstall restores HOME and unregisters the demo's repository."""
    from gsd_research.researcher.api import repository_folder

    if not seed_embedding_model(user_home):
        pytest.skip(f"no offline copy of Chroma's embedding model ({MODEL_DIR})")
    before = snapshot(user_home)

    first = install("--skip-venv")
    assert first.returncode == 0, first.stderr
    after_first = snapshot(user_home)
    second = install("--skip-venv")
    assert second.returncode == 0, second.stderr
    assert snapshot(user_home) == after_first  # byte for byte, not even an mtime moved
    assert repository_folder("gsd-research-docs") is not None

    removed = install("--uninstall")
    assert removed.returncode == 0, removed.stderr
    assert snapshot(user_home) == before
    assert (user_home / ".claude" / "settings.json").read_text() == USER_SETTINGS
    assert repository_folder("gsd-research-docs") is None
    for proc in (first, second, removed):
        assert_no_traceback(proc)
    # the closing demo ran the main job keyless against (fake) Context7, then searched the indexed docs
    docs = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert any(d.get("command") == "docs" and d.get("success") for d in docs), first.stdout
    assert "demo 1/3: gsd-research doctor" in first.stderr and "demo 3/3" in first.stderr
    searches = [d for d in docs if d.get("command") == "search"]
    assert searches and searches[0]["success"] is True, first.stdout[-2000:] + first.stderr[-2000:]
    assert "library-docs" in json.dumps(searches[0]), searches[0]


def test_demo_offline_gives_clear_errors_and_install_succeeds(user_home, tmp_path):
    """Offline, without the embedding model: the keyless docs lookup says NETWORK_ERROR, indexing fails saying how
    to seed the model, and the install still succeeds."""
    empty = tmp_path / "no-models"
    empty.mkdir()
    dead = "http://127.0.0.1:9"  # nothing listens: connection refused at once, as offline
    proc = install("--skip-venv", "--models-from", str(empty),
                   env={"HTTPS_PROXY": dead, "HTTP_PROXY": dead, "https_proxy": dead, "http_proxy": dead,
                        "NO_PROXY": "", "no_proxy": "", "CONTEXT7_API_URL": dead + "/api",
                        "PERPLEXITY_BASE_URL": dead, "TAVILY_BASE_URL": dead, "GEMINI_BASE_URL": dead,
                        "OLLAMA_HOST": dead, "OPENAI_BASE_URL": dead})

    assert proc.returncode == 0, proc.stderr
    docs = [json.loads(line) for line in proc.stdout.splitlines() if '"command": "docs"' in line
            or '"command":"docs"' in line]
    assert docs and docs[0]["error"]["code"] == "NETWORK_ERROR"
    assert "CONTEXT7_API_KEY" not in os.environ  # keyless
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
    assert {g["matcher"] for g in pre[1:]} == {"WebFetch", "^mcp__(context7|plugin_context7_context7)__.*", "Bash"}
    plugin_bash = [g for g in json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]["PreToolUse"]
                   if g["matcher"] == "Bash"]
    assert [h["if"] for g in pre[1:] if g["matcher"] == "Bash" for h in g["hooks"]] == [
        h["if"] for h in plugin_bash[0]["hooks"]]  # the plugin's filters: only our commands start the hook
    commands = [h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]]
    run = user_home / ".claude" / "hooks" / "gsd-research" / "run"
    assert f"{run} session-start" in commands and f"{run} user-prompt-submit" in commands
    # GSD's researchers get the tool strategy when they start (the hook answers subagent-start)
    plugin_matcher = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]["SubagentStart"][0]["matcher"]
    assert settings["hooks"]["SubagentStart"] == [{"matcher": plugin_matcher, "hooks": [
        {"type": "command", "command": f"{run} subagent-start", "timeout": 5}]}]  # the plugin's, anchored
    backup = user_home / ".local" / "share" / "gsd-research" / "backup" / "settings.json"
    assert backup.read_text() == USER_SETTINGS


def test_installed_pieces_work(user_home, fake):
    assert install("--skip-venv", "--no-demo").returncode == 0
    claude = user_home / ".claude"

    for rel in ("agents/research-scout.md", "skills/library-docs/SKILL.md", "commands/research/docs.md",
                "commands/research/deep.md", "commands/research/search.md", "commands/research/fetch.md",
                "commands/research/kb.md"):
        assert (claude / rel).is_file(), rel
    launcher = user_home / ".local" / "bin" / "gsd-research"
    assert launcher.is_symlink() and Path(os.readlink(launcher)) == ROOT / "bin" / "gsd-research"
    docs = subprocess.run([str(launcher), "docs", "react", "hooks"], capture_output=True, text=True, timeout=60)
    assert json.loads(docs.stdout)["metadata"]["library_id"] == "/facebook/react"
    # the copied hook finds the environment through the data directory, not the plugin checkout
    env_file = user_home / "claude-env"  # SessionStart puts ~/.local/bin on the Bash tool's PATH through it
    hook = subprocess.run([str(claude / "hooks" / "gsd-research" / "run"), "session-start"],
                          input='{"hook_event_name": "SessionStart", "source": "startup"}',
                          capture_output=True, text=True, timeout=10,
                          env={**os.environ, "CLAUDE_ENV_FILE": str(env_file)})
    assert "gsd-research is available" in json.loads(hook.stdout)["hookSpecificOutput"]["additionalContext"]
    venv_link = user_home / ".local" / "share" / "gsd-research" / "venv"
    assert venv_link.is_symlink() and (venv_link / "bin" / "python").exists()


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
    mine = user_home / ".claude" / "agents" / "research-scout.md"
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
        assert "global:research-tools" in skills[agent]
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


# -- settings.json: modes, symlinks, every valid shape; failures roll back -------------------------------


def test_a_private_settings_file_stays_private(user_home):
    path = user_home / SETTINGS_REL
    path.chmod(0o600)

    assert install("--skip-venv", "--no-demo").returncode == 0
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    backup = user_home / ".local" / "share" / "gsd-research" / "backup" / "settings.json"
    assert oct(backup.stat().st_mode & 0o777) == oct(0o600) and oct(backup.parent.stat().st_mode & 0o777) == oct(0o700)
    assert install("--skip-venv", "--no-demo").returncode == 0
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)

    removed = install("--uninstall")
    assert removed.returncode == 0 and "exactly as it was" in removed.stderr
    assert path.read_text() == USER_SETTINGS and oct(path.stat().st_mode & 0o777) == oct(0o600)


@pytest.fixture
def dotfiles_settings(home) -> tuple[Path, Path]:
    """~/.claude/settings.json as a relative symlink into a dotfiles checkout, the target 0600."""
    user = Path(os.environ["HOME"])
    target = user / "dotfiles" / "claude" / "settings.json"
    target.parent.mkdir(parents=True)
    target.write_text(USER_SETTINGS)
    target.chmod(0o600)
    (user / ".claude").mkdir()
    (user / SETTINGS_REL).symlink_to(Path("..") / "dotfiles" / "claude" / "settings.json")
    return user, target


def test_a_symlinked_settings_file_stays_a_symlink_and_uninstall_restores_its_target(dotfiles_settings):
    user, target = dotfiles_settings
    link = user / SETTINGS_REL
    before = snapshot(user)

    assert install("--skip-venv", "--no-demo").returncode == 0

    assert link.is_symlink() and os.readlink(link) == "../dotfiles/claude/settings.json"
    assert oct(target.stat().st_mode & 0o777) == oct(0o600)
    assert_registered(user, json.loads(target.read_text()))
    assert not list(target.parent.glob(".settings.json.*"))  # no temporary file left beside the target
    assert install("--skip-venv", "--no-demo").returncode == 0
    assert link.is_symlink()

    removed = install("--uninstall")
    assert removed.returncode == 0 and f"restored {link} exactly as it was" in removed.stderr
    assert snapshot(user) == before  # the link, the target's bytes, mode and mtime


def test_uninstall_says_exactly_only_when_it_is_true(dotfiles_settings):
    user, target = dotfiles_settings
    link = user / SETTINGS_REL
    assert install("--skip-venv", "--no-demo").returncode == 0
    merged = link.read_bytes()
    link.unlink()  # the user replaced the dotfiles link with a plain copy in the meantime
    link.write_bytes(merged)

    removed = install("--uninstall")

    assert removed.returncode == 0
    assert "exactly as it was" not in removed.stderr and "no longer a symlink" in removed.stderr, removed.stderr
    assert link.read_text() == USER_SETTINGS


def test_a_dangling_settings_symlink_is_refused_before_any_change(home):
    user = Path(os.environ["HOME"])
    (user / ".claude").mkdir()
    (user / SETTINGS_REL).symlink_to(user / "dotfiles" / "settings.json")
    before = snapshot(user)

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 1 and "which does not exist" in proc.stderr
    assert_no_traceback(proc)
    assert snapshot(user) == before


def test_a_settings_symlink_loop_is_called_a_loop(home):
    user = Path(os.environ["HOME"])
    (user / ".claude").mkdir()
    (user / SETTINGS_REL).symlink_to(user / ".claude" / "other.json")
    (user / ".claude" / "other.json").symlink_to(user / SETTINGS_REL)
    before = snapshot(user)

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 1 and "symlink loop" in proc.stderr and "does not exist" not in proc.stderr
    assert_no_traceback(proc)
    assert snapshot(user) == before


def test_an_earlier_installs_unanchored_researcher_matcher_is_replaced(home):
    user = Path(os.environ["HOME"])
    assert install("--skip-venv", "--no-demo").returncode == 0
    path = user / SETTINGS_REL
    settings = json.loads(path.read_text())
    settings["hooks"]["SubagentStart"][0]["matcher"] = "gsd-.*-researcher"  # what earlier versions wrote
    path.write_text(json.dumps(settings))

    assert install("--skip-venv", "--no-demo").returncode == 0

    groups = json.loads(path.read_text())["hooks"]["SubagentStart"]
    plugin_matcher = json.loads((ROOT / "hooks" / "hooks.json").read_text())["hooks"]["SubagentStart"][0]["matcher"]
    assert [g["matcher"] for g in groups] == [plugin_matcher]


HANDLED_SHAPES = {
    "hooks null": '{"hooks": null}\n',
    "hooks empty list": '{"hooks": []}\n',
    "hooks empty object": '{"hooks": {}, "model": "opus"}\n',
    "event null": '{"hooks": {"PreToolUse": null, "Stop": "left as it is"}}\n',
    "odd groups": '{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": null}, "junk", 3]}}\n',
    "permissions null": '{"permissions": null}\n',
    "permissions empty list": '{"permissions": []}\n',
    "allow null": '{"permissions": {"allow": null, "deny": ["Read(./.env)"]}}\n',
    "allow a single string": '{"permissions": {"allow": "Bash(ls:*)"}}\n',
    "allow holding ours already": '{"permissions": {"allow": ["Bash(researcher:*)"]}}\n',
    "empty file": "",
    "whitespace only": "  \n",
    "empty object": "{}",
    "unicode, nesting, numbers": '{"env": {"GRÜSS": "dich ✓", "N": 1.5e3}, "x": [[{"y": null}]]}\n',
}


@pytest.mark.parametrize("text", list(HANDLED_SHAPES.values()), ids=list(HANDLED_SHAPES))
def test_valid_settings_shapes_are_merged_and_restored_exactly(home, text):
    user = Path(os.environ["HOME"])
    path = user / SETTINGS_REL
    path.parent.mkdir()
    path.write_text(text)
    path.chmod(0o640)
    before = snapshot(user)

    first = install("--skip-venv", "--no-demo")
    assert first.returncode == 0, first.stderr
    merged = json.loads(path.read_text())
    assert_registered(user, merged)
    original = json.loads(text) if text.strip() else {}
    for key, value in original.items():  # the user's own settings are all still there
        if key not in ("hooks", "permissions"):
            assert merged[key] == value
    if text.startswith('{"permissions": {"allow": "'):
        assert merged["permissions"]["allow"][0] == "Bash(ls:*)"
    if "deny" in text:
        assert merged["permissions"]["deny"] == ["Read(./.env)"]
    if '"Stop"' in text:
        assert merged["hooks"]["Stop"] == "left as it is"
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    after_first = snapshot(user)
    assert install("--skip-venv", "--no-demo").returncode == 0
    assert snapshot(user) == after_first

    removed = install("--uninstall")
    assert removed.returncode == 0 and "exactly as it was" in removed.stderr, removed.stderr
    assert snapshot(user) == before
    for proc in (first, removed):
        assert_no_traceback(proc)


def test_a_shape_merged_into_keeps_the_users_later_edits_on_uninstall(home):
    user = Path(os.environ["HOME"])
    path = user / SETTINGS_REL
    path.parent.mkdir()
    path.write_text('{"hooks": null, "permissions": {"allow": "Bash(ls:*)"}}')
    assert install("--skip-venv", "--no-demo").returncode == 0
    settings = json.loads(path.read_text())
    settings["theme"] = "dark"
    path.write_text(json.dumps(settings))

    assert install("--uninstall").returncode == 0

    assert json.loads(path.read_text()) == {"hooks": None, "permissions": {"allow": "Bash(ls:*)"}, "theme": "dark"}


REFUSED_SHAPES = {
    "a list": ("[]", "holds a list"),
    "null": ("null", "holds null"),
    "a string": ('"opus"', "holds a string"),
    "hooks a string": ('{"hooks": "none"}', '"hooks" is a string'),
    "hooks a list of groups": ('{"hooks": [{"matcher": "Bash", "hooks": []}]}', '"hooks" is a list'),
    "event an object": ('{"hooks": {"PreToolUse": {"matcher": "Bash"}}}', '"hooks.PreToolUse" is an object'),
    "permissions a string": ('{"permissions": "all"}', '"permissions" is a string'),
    "permissions true": ('{"permissions": true}', '"permissions" is a boolean'),
    "allow an object": ('{"permissions": {"allow": {"Bash": true}}}', '"permissions.allow" is an object'),
    "allow a number": ('{"permissions": {"allow": 5}}', '"permissions.allow" is a number'),
}


@pytest.mark.parametrize("text,reason", list(REFUSED_SHAPES.values()), ids=list(REFUSED_SHAPES))
def test_shapes_that_cannot_be_merged_are_refused_before_any_change(home, text, reason):
    user = Path(os.environ["HOME"])
    path = user / SETTINGS_REL
    path.parent.mkdir()
    path.write_text(text)
    before = snapshot(user)

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 1
    assert f"cannot merge into {path}: " in proc.stderr and reason in proc.stderr, proc.stderr
    assert "Nothing was changed" in proc.stderr
    assert_no_traceback(proc)
    assert snapshot(user) == before  # nothing copied, no manifest, no link


@pytest.mark.parametrize("raw", [b'\xef\xbb\xbf{"model": "opus"}', b'{"a": NaN}', b'{"a": 1e999}', b"\xff\xfe{}",
                                 b'{"a": 1,}'], ids=["bom", "nan", "infinity", "utf-16", "trailing-comma"])
def test_not_plain_json_variants_are_left_untouched(home, raw):
    path = Path(os.environ["HOME"]) / SETTINGS_REL
    path.parent.mkdir()
    path.write_bytes(raw)

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 0 and "left untouched" in proc.stderr, proc.stderr
    assert path.read_bytes() == raw
    assert_no_traceback(proc)
    assert install("--uninstall").returncode == 0
    assert path.read_bytes() == raw


def test_registrations_of_an_earlier_version_are_recognised(user_home):
    """Earlier installers wrote `"<run>" session-start` (double-quoted): no second copy, and uninstall removes it."""
    path = user_home / SETTINGS_REL
    run = user_home / RUN_REL
    old = json.loads(USER_SETTINGS)
    old["hooks"]["SessionStart"] = [{"matcher": "startup|resume|clear|compact", "hooks": [
        {"type": "command", "command": f'"{run}" session-start', "timeout": 5}]}]
    path.write_text(json.dumps(old))

    assert install("--skip-venv", "--no-demo").returncode == 0
    starts = json.loads(path.read_text())["hooks"]["SessionStart"]
    assert [h["command"] for g in starts for h in g["hooks"]] == [f'"{run}" session-start']

    assert install("--uninstall").returncode == 0
    assert our_commands(json.loads(path.read_text())) == []


def test_a_failure_while_copying_rolls_everything_back(user_home):
    blocker = user_home / ".claude" / "skills" / "web-search"  # the user's file where a skill folder goes
    blocker.parent.mkdir()
    blocker.write_text("mine\n")
    before = snapshot(user_home)

    proc = install("--skip-venv", "--no-demo")

    assert proc.returncode == 1 and "install failed" in proc.stderr and "every change was rolled back" in proc.stderr
    assert f"{blocker} is not a directory" in proc.stderr, proc.stderr
    assert_no_traceback(proc)
    assert snapshot(user_home) == before  # no copied file, no link, no manifest, no backup, no journal


def test_a_failure_after_settings_and_project_were_written_rolls_them_back(dotfiles_settings, tmp_path):
    user, target = dotfiles_settings
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text(GSD_CONFIG)
    data = user / ".local" / "share" / "gsd-research"
    (data / "install-manifest.json").mkdir(parents=True)  # the last step, writing the manifest, fails
    before, project_before = snapshot(user), snapshot(project)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(project))

    assert proc.returncode == 1 and "every change was rolled back" in proc.stderr, proc.stderr
    assert "registered hooks and permissions" in proc.stderr and "wired global:" in proc.stderr  # got that far
    assert_no_traceback(proc)
    assert snapshot(user) == before and snapshot(project) == project_before  # bytes, modes, mtimes, the link


def test_an_install_killed_midway_is_rolled_back_by_the_next_run(user_home, tmp_path):
    import signal
    import time

    checkout = copy_checkout(tmp_path / "checkout")
    fifo = checkout / "agents" / "zz-blocks.md"
    os.mkfifo(fifo)  # reading it blocks: the run stops in the middle of copying, and is killed there
    before = snapshot(user_home)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "CLAUDE_CONFIG_DIR", "GSD_RESEARCH_BIN_DIR")}
    env["GSD_RESEARCH_VENV"] = sys.prefix  # the copy has no .venv of its own
    proc = subprocess.Popen(["bash", str(checkout / "install.sh"), "--skip-venv", "--no-demo"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    journal = user_home / ".local" / "share" / "gsd-research" / "install-journal.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (user_home / ".claude" / "agents" / "research-scout.md").exists():
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    out = proc.communicate()
    assert journal.is_file() and (user_home / ".claude" / "hooks" / "gsd-research" / "run").is_file(), out
    assert not (user_home / ".local" / "share" / "gsd-research" / "install-manifest.json").exists()

    again = install("--uninstall", script=checkout / "install.sh")

    assert again.returncode == 0 and "rolled back an install that was interrupted" in again.stderr
    assert snapshot(user_home) == before


# -- the Python environment: from the pinned lock; a failed install removes what it created -------------


FAKE_UV = """#!/bin/sh
# uv as install.sh calls it, without the network: `uv venv DIR` makes DIR/bin/python, `uv pip install`
# logs its arguments (and fails when they contain $FAKE_UV_FAIL, as a hash mismatch would).
echo "$*" >> "$FAKE_UV_LOG"
case "$1" in
  venv) for a in "$@"; do d=$a; done; mkdir -p "$d/bin" && ln -s "$FAKE_UV_PYTHON" "$d/bin/python" ;;
  pip) if [ -n "${FAKE_UV_FAIL:-}" ]; then case "$*" in *"$FAKE_UV_FAIL"*)
         echo "error: hash mismatch for click==8.1.7" >&2; exit 1 ;; esac; fi ;;
esac
"""


@pytest.fixture
def fake_uv(tmp_path) -> tuple[dict, Path]:
    import shutil

    bindir = tmp_path / "fake-bin"
    bindir.mkdir()
    (bindir / "uv").write_text(FAKE_UV)
    (bindir / "uv").chmod(0o755)
    log = tmp_path / "uv.log"
    python = shutil.which("python3") or sys.executable
    return {"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "FAKE_UV_LOG": str(log),
            "FAKE_UV_PYTHON": python}, log


def test_the_environment_is_installed_from_the_pinned_lock_then_the_package_without_deps(user_home, tmp_path, fake_uv):
    env, log = fake_uv
    checkout = copy_checkout(tmp_path / "checkout")
    before = snapshot(user_home)

    proc = install("--no-demo", env=env, script=checkout / "install.sh")

    assert proc.returncode == 0, proc.stderr
    venv = user_home / ".local" / "share" / "gsd-research" / "venv"
    calls = log.read_text().splitlines()
    assert calls[0] == f"venv -q {venv}"
    assert calls[1] == f"pip install -q --python {venv}/bin/python --require-hashes -r {checkout}/requirements.lock"
    assert calls[2] == f"pip install -q --python {venv}/bin/python --no-deps {checkout}"
    assert install("--uninstall", script=checkout / "install.sh").returncode == 0
    assert snapshot(user_home) == before  # the venv and ~/.local/share, ~/.local it created are gone


def test_a_failed_dependency_install_removes_the_environment_it_created(user_home, tmp_path, fake_uv):
    env, log = fake_uv
    checkout = copy_checkout(tmp_path / "checkout")
    before = snapshot(user_home)

    proc = install("--no-demo", env={**env, "FAKE_UV_FAIL": "--require-hashes"}, script=checkout / "install.sh")

    assert proc.returncode != 0 and "hash mismatch" in proc.stderr
    assert "the Python environment this run created was removed" in proc.stderr
    assert snapshot(user_home) == before


def test_a_failed_file_step_removes_the_environment_it_created(user_home, tmp_path, fake_uv):
    env, _ = fake_uv
    checkout = copy_checkout(tmp_path / "checkout")
    (user_home / ".claude" / "skills").write_text("not a folder\n")
    before = snapshot(user_home)

    proc = install("--no-demo", env=env, script=checkout / "install.sh")

    assert proc.returncode == 1 and "every change was rolled back" in proc.stderr, proc.stderr
    assert snapshot(user_home) == before


def test_a_missing_lock_stops_before_anything_is_created(user_home, tmp_path, fake_uv):
    env, log = fake_uv
    checkout = copy_checkout(tmp_path / "checkout")
    (checkout / "requirements.lock").unlink()
    before = snapshot(user_home)

    proc = install("--no-demo", env=env, script=checkout / "install.sh")

    assert proc.returncode == 1 and "requirements.lock is missing" in proc.stderr
    assert not log.exists() and snapshot(user_home) == before


# -- GSD projects: what today's GSD reads (gsd-sdk query agent-skills) ------------------------------------

def gsd_agent_skills(project: Path, agent: str, home: Path) -> list[str]:
    """The SKILL.md files `gsd-sdk query agent-skills AGENT` injects (sdk/src/query/skills.ts, 2026-05):
    a string or list under agent_skills[AGENT]; `global:<name>` ([A-Za-z0-9_-]+) is <homedir>/.claude/skills/
    <name>/SKILL.md, whatever CLAUDE_CONFIG_DIR says, and must stay inside that folder; a missing one is skipped."""
    import re

    raw = (json.loads((project / ".planning" / "config.json").read_text()).get("agent_skills") or {}).get(agent)
    entries = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    base = home / ".claude" / "skills"
    found = []
    for entry in entries:
        if isinstance(entry, str) and entry.startswith("global:"):
            name = entry[len("global:"):]
            skill = base / name / "SKILL.md"
            if re.fullmatch(r"[a-zA-Z0-9_-]+", name) and skill.exists() and \
                    skill.resolve().is_relative_to(base.resolve()):
                found.append(str(skill))
        elif isinstance(entry, str) and (project / entry / "SKILL.md").exists():
            found.append(str(project / entry / "SKILL.md"))
    return found


@pytest.fixture
def gsd_project(tmp_path) -> Path:
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text(GSD_CONFIG)
    return project


OUR_SKILLS = ["research-tools"]  # the one short skill GSD researchers get (installer/gsd_config.SKILL)


def test_gsd_reads_the_wired_skills_even_with_another_claude_config_dir(user_home, gsd_project, tmp_path):
    other = tmp_path / "claude-config"
    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_project), env={"CLAUDE_CONFIG_DIR": str(other)})
    assert proc.returncode == 0, proc.stderr

    assert (other / "agents" / "research-scout.md").is_file()
    for agent in ("gsd-phase-researcher", "gsd-project-researcher"):
        assert gsd_agent_skills(gsd_project, agent, user_home) == [
            str(user_home / ".claude" / "skills" / n / "SKILL.md") for n in OUR_SKILLS]
    assert install("--uninstall", env={"CLAUDE_CONFIG_DIR": str(other)}).returncode == 0
    assert not (user_home / ".claude" / "skills").exists()
    assert (gsd_project / ".planning" / "config.json").read_text() == GSD_CONFIG


def test_plugin_route_gsd_project_puts_only_the_skills_into_claude(user_home, gsd_project):
    before = snapshot(user_home)

    assert install("--skip-venv", "--no-demo", "--no-claude", "--gsd-project", str(gsd_project)).returncode == 0

    added = sorted(set(snapshot(user_home)) - set(before))
    assert [p for p in added if "/.claude/" in p and "/.claude/skills" not in p] == []
    assert (user_home / SETTINGS_REL).read_text() == USER_SETTINGS
    assert len(gsd_agent_skills(gsd_project, "gsd-phase-researcher", user_home)) == len(OUR_SKILLS)
    assert install("--uninstall").returncode == 0
    assert snapshot(user_home) == before


GSD_SHAPES = {
    "agent_skills null": '{"mode": "yolo", "agent_skills": null}\n',
    "agent_skills empty list": '{"agent_skills": []}\n',
    "no agent_skills": '{"mode": "yolo"}\n',
    "a researcher's entry a string": '{"agent_skills": {"gsd-phase-researcher": "skills/house-rules"}}\n',
    "a researcher's entry null": '{"agent_skills": {"gsd-project-researcher": null}}\n',
}


@pytest.mark.parametrize("text", list(GSD_SHAPES.values()), ids=list(GSD_SHAPES))
def test_gsd_config_shapes_are_wired_and_restored_exactly(user_home, gsd_project, text):
    config = gsd_project / ".planning" / "config.json"
    config.write_text(text)
    (gsd_project / "skills" / "house-rules").mkdir(parents=True)
    (gsd_project / "skills" / "house-rules" / "SKILL.md").write_text("# house rules\n")
    before = snapshot(gsd_project)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_project))

    assert proc.returncode == 0, proc.stderr
    ours = [str(user_home / ".claude" / "skills" / n / "SKILL.md") for n in OUR_SKILLS]
    theirs = [str(gsd_project / "skills" / "house-rules" / "SKILL.md")] if "house-rules" in text else []
    assert gsd_agent_skills(gsd_project, "gsd-phase-researcher", user_home) == theirs + ours
    assert gsd_agent_skills(gsd_project, "gsd-project-researcher", user_home) == ours
    assert json.loads(config.read_text()).get("mode") == json.loads(text).get("mode")
    assert install("--uninstall").returncode == 0
    assert snapshot(gsd_project) == before


@pytest.mark.parametrize("text,reason", [
    ('{"agent_skills": ["global:x"]}', '"agent_skills" is a list'),
    ('{"agent_skills": {"gsd-phase-researcher": {"a": 1}}}', '"agent_skills.gsd-phase-researcher" is an object'),
    ("[1, 2]", "holds a list"),
    ('{"mode": "yolo",}', "is not plain JSON"),
], ids=["agent_skills a list", "entry an object", "not an object", "trailing comma"])
def test_gsd_config_shapes_that_cannot_be_wired_are_refused_before_any_change(user_home, gsd_project, text, reason):
    config = gsd_project / ".planning" / "config.json"
    config.write_text(text)
    before, project_before = snapshot(user_home), snapshot(gsd_project)

    proc = install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_project))

    assert proc.returncode == 1 and reason in proc.stderr and "nothing was changed" in proc.stderr, proc.stderr
    assert_no_traceback(proc)
    assert snapshot(user_home) == before and snapshot(gsd_project) == project_before


def test_a_symlinked_gsd_config_stays_a_symlink(user_home, gsd_project, tmp_path):
    config = gsd_project / ".planning" / "config.json"
    shared = tmp_path / "shared-config.json"
    shared.write_text(GSD_CONFIG)
    shared.chmod(0o600)
    config.unlink()
    config.symlink_to(shared)

    assert install("--skip-venv", "--no-demo", "--gsd-project", str(gsd_project)).returncode == 0
    assert config.is_symlink() and oct(shared.stat().st_mode & 0o777) == oct(0o600)
    assert "global:research-tools" in json.loads(shared.read_text())["agent_skills"]["gsd-phase-researcher"]
    assert install("--uninstall").returncode == 0
    assert config.is_symlink() and shared.read_text() == GSD_CONFIG


def test_the_hooks_whole_tree_is_installed_and_removed(user_home, tmp_path):
    checkout = copy_checkout(tmp_path / "checkout")
    modules = checkout / "hooks" / "gsd_research_hooks"  # hooks/run's per-event modules live in a package
    modules.mkdir(exist_ok=True)
    (modules / "subagent_start_extra.py").write_text("STRATEGY = 'x'\n")
    before = snapshot(user_home)

    proc = install("--skip-venv", "--no-demo", script=checkout / "install.sh", env={"GSD_RESEARCH_VENV": sys.prefix})

    assert proc.returncode == 0, proc.stderr
    hooks = user_home / ".claude" / "hooks" / "gsd-research"
    assert (hooks / "gsd_research_hooks" / "subagent_start_extra.py").read_text() == "STRATEGY = 'x'\n"
    assert (hooks / "run").is_file() and not (hooks / "hooks.json").exists()
    assert install("--uninstall", script=checkout / "install.sh").returncode == 0
    assert snapshot(user_home) == before
