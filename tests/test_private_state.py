"""State is private: under a permissive umask, every folder the commands create is 0700 and every file 0600,
GSD_RESEARCH_HOME included, whichever command (or background worker, or Chroma) wrote it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import TEST_CONFIG, assert_no_traceback


def exposed(root: Path) -> list[str]:
    """Everything under `root` (itself included) that the group or others may read, write or enter."""
    found = []
    for path in [root, *root.rglob("*")]:
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:  # gone since it was listed (SQLite's -wal, when a background writer closes)
            continue
        if stat.S_ISLNK(mode):
            continue
        if stat.S_IMODE(mode) & 0o077:
            found.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(root.parent)}")
    return found


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def fresh_home(tmp_path, monkeypatch, umask_022) -> Path:
    """A GSD_RESEARCH_HOME that does not exist yet (the commands create it), configured through the env."""
    home = tmp_path / "state" / "gsd-home"
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(home))
    return home


def _config(home: Path, text: str = TEST_CONFIG) -> None:
    """config.yaml written the way a user would, under the permissive umask (the commands must cope)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(text)


def test_a_new_home_is_created_private(run_bin, fresh_home, fake):
    result = run_bin("gsd-research", "docs", "react", "hooks")

    assert result.code == 0, result.stdout
    assert stat.S_IMODE(fresh_home.stat().st_mode) == 0o700
    assert exposed(fresh_home) == []


def test_an_existing_open_home_is_closed(cli, fresh_home, fake):
    _config(fresh_home)
    assert stat.S_IMODE(fresh_home.stat().st_mode) == 0o755  # as mkdir made it under umask 022

    assert cli("docs", "react", "hooks").code == 0

    assert stat.S_IMODE(fresh_home.stat().st_mode) == 0o700


def test_every_command_leaves_nothing_readable_by_others(cli, fresh_home, fake, tmp_path, monkeypatch):
    """In-process through both CLI edges (which set the private umask); the deep worker is a real process."""
    from tests.researcher_fixtures import kb, seed_model

    seed_model()
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-private-state")
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-private-state")
    _config(fresh_home, TEST_CONFIG + "deep:\n  poll_interval: 0.05\n  idle_exit: 0.5\n  autostart: true\n")
    os.chmod(fresh_home, 0o755)
    (fresh_home / "config.yaml").chmod(0o644)  # a hand-written config: the commands leave it to its owner
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\nThe widget toolkit needs Python 3.10 and caches its builds in a folder.\n")
    docs = tmp_path / "kb-docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nInstall the widget toolkit with pip.\n")

    calls = [
        (cli, "docs", "react", "hooks"),
        (cli, "summarize", str(notes)),
        (cli, "fetch", fake.url + "/pages/article"),
        (cli, "search", "widget toolkit"),
        (cli, "deep", "--blocking", "widget toolkit history"),
        (cli, "cache", "stats"),
        (kb, "repo", "add", "kb", str(docs), "--json"),
        (kb, "index", "kb", "--json"),
    ]
    for run, *args in calls:
        result = run(*args)
        assert result.code == 0, (args, result.stdout[-500:], result.stderr[-500:])
        assert_no_traceback(result)
    queued = cli("deep", "--async", "widget toolkit roadmap").json  # the worker's files too
    waited = cli("jobs", "wait", queued["conversation_id"], "--timeout", "60")
    assert waited.json.get("status") == "completed", waited.stdout[-500:]

    found = [f for f in exposed(fresh_home) if not f.endswith("config.yaml")]
    assert (fresh_home / "repositories").is_dir() and (fresh_home / "cache" / "http_cache.sqlite").is_file()
    assert any((fresh_home / "conversation-logs").iterdir())
    assert found == []


def test_the_plugin_data_folder_is_closed_too(cli, fresh_home, tmp_path, monkeypatch):
    data = tmp_path / "plugin-data"
    data.mkdir(mode=0o755)
    monkeypatch.setenv("CLAUDE_PLUGIN_DATA", str(data))

    assert cli("config", "path").code == 0

    assert stat.S_IMODE(data.stat().st_mode) == 0o700


def test_a_home_reached_through_a_symlink_is_closed_at_its_target(cli, tmp_path, monkeypatch, umask_022):
    target = tmp_path / "real-home"
    target.mkdir()
    link = tmp_path / "linked-home"
    link.symlink_to(target)
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(link))

    assert cli("config", "set", "cache.ttl.docs", "60").code == 0

    assert stat.S_IMODE(target.stat().st_mode) == 0o700 and exposed(target) == []


def test_the_hook_state_file_is_private(fresh_home):
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    fresh_home.mkdir(parents=True)
    jobs = fresh_home / "conversation-logs" / "job-1"
    jobs.mkdir(parents=True)
    (jobs / "status.json").write_text(json.dumps({"status": "completed", "query": "q", "finished_at": "x"}))
    proc = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "hooks" / "entry.py"),
                           "user-prompt-submit"], input="{}", capture_output=True, text=True, timeout=30,
                          env=dict(os.environ))

    state = fresh_home / "hooks-state.json"
    assert proc.returncode == 0 and state.is_file(), proc.stdout + proc.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o600


def test_in_process_calls_restore_the_callers_umask(cli, umask_022):
    cli("config", "path")

    current = os.umask(0o022)
    assert current == 0o022


# -- only our own folders are closed; a folder someone else controls is refused ---------------------------

def test_a_shared_sticky_folder_is_never_chmodded_and_is_refused_as_a_home(cli, tmp_path, monkeypatch):
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(shared))

    for args in (("--version",), ("config", "path"), ("docs", "react", "hooks")):
        result = cli(*args)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o1777, args
    assert result.json["error"]["code"] == "STATE_UNSAFE" and result.code == 1
    assert "written by others" in result.json["error"]["message"] and result.json["error"]["suggestions"]
    assert_no_traceback(result)


def test_a_setgid_team_folder_keeps_its_bits(cli, tmp_path, monkeypatch):
    team = tmp_path / "team"
    team.mkdir()
    os.chmod(team, 0o2750)
    (team / "config.yaml").write_text(TEST_CONFIG)
    os.chmod(team / "config.yaml", 0o640)
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(team))

    assert cli("config", "path").code == 0

    assert stat.S_IMODE(team.stat().st_mode) == 0o2750


def test_a_folder_that_is_not_ours_keeps_its_mode_and_gets_private_files(cli, tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    os.chmod(project, 0o755)
    (project / "README.md").write_text("A project folder.\n")
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(project))

    assert cli("config", "set", "cache.ttl.docs", "60").code == 0

    assert stat.S_IMODE(project.stat().st_mode) == 0o755
    assert stat.S_IMODE((project / "config.yaml").stat().st_mode) == 0o600


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("docs", "--help"), ("search", "-h")])
def test_version_and_help_touch_no_folder(cli, tmp_path, monkeypatch, args):
    empty = tmp_path / "empty-home"
    empty.mkdir()
    os.chmod(empty, 0o755)
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(empty))

    assert cli(*args).code == 0

    assert stat.S_IMODE(empty.stat().st_mode) == 0o755 and list(empty.iterdir()) == []


needs_root = pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")


@needs_root
@pytest.mark.parametrize("owned", ["home", "config"])
def test_a_home_or_config_of_another_user_is_refused_before_it_is_read(cli, tmp_path, monkeypatch, fake, owned):
    other = tmp_path / "other-home"
    other.mkdir()
    os.chmod(other, 0o755)
    (other / "config.yaml").write_text(f"providers:\n  context7:\n    base_url: {fake.url}/attacker\n")
    os.chmod(other / "config.yaml", 0o644)
    (other / "logs").mkdir()
    victim = tmp_path / "root-file"
    victim.write_text("precious\n")
    (other / "logs" / "errors.log").symlink_to(victim)
    os.chown(other if owned == "home" else other / "config.yaml", 65534, 65534)
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(other))
    monkeypatch.delenv("CONTEXT7_API_URL")

    result = cli("docs", "react", "hooks")

    assert result.json["error"]["code"] == "STATE_UNSAFE" and "another user" in result.json["error"]["message"]
    assert fake.hits("/attacker") == [] and victim.read_text() == "precious\n"
    assert stat.S_IMODE(other.stat().st_mode) == (0o755 if owned == "home" else 0o700)  # never another's folder


def test_a_config_others_can_write_is_refused(cli, fresh_home):
    _config(fresh_home)
    os.chmod(fresh_home / "config.yaml", 0o666)

    result = cli("config", "show")

    assert result.json["error"]["code"] == "STATE_UNSAFE" and "config" in result.json["error"]["message"]


@pytest.mark.parametrize("log", ["errors.log", "worker.log", "deep.log"])
def test_a_symlink_planted_as_a_log_is_replaced_never_followed(fresh_home, tmp_path, log):
    from gsd_research.core.private import open_private

    fresh_home.mkdir(parents=True)
    (fresh_home / "logs").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (fresh_home / "logs" / log).symlink_to(victim)

    fd = open_private(fresh_home / "logs" / log)
    os.write(fd, b"log line\n")
    os.close(fd)

    assert victim.read_text() == "precious\n"
    assert not (fresh_home / "logs" / log).is_symlink()
    assert (fresh_home / "logs" / log).read_text() == "log line\n"


def test_the_internal_error_log_and_the_worker_log_never_follow_a_symlink(cli, home, tmp_path, monkeypatch):
    from gsd_research.core.internal_errors import log_internal_error
    from gsd_research.deep import queue

    (home / "logs").mkdir(exist_ok=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    for name in ("errors.log", "worker.log"):
        (home / "logs" / name).symlink_to(victim)
    spawned = []
    monkeypatch.setattr("subprocess.Popen", lambda *a, **k: spawned.append(k["stdout"].name) or type(
        "P", (), {"pid": 1})())

    log_internal_error(RuntimeError("boom"))
    queue.spawn_worker()

    assert victim.read_text() == "precious\n"
    assert "RuntimeError: boom" in (home / "logs" / "errors.log").read_text()
    assert not (home / "logs" / "worker.log").is_symlink() and spawned
