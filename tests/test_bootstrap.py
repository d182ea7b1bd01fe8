"""bootstrap/ in process, and the decisions that need no build: the lookup order, the safety and readiness
verdicts, the free-space estimate, garbage collection, plugin roots Claude Code leaves off PATH."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from bootstrap import locate, progress, verdict
from bootstrap.launch import command_of
from bootstrap.store import collect_garbage, swap

from tests.conftest import ROOT


def make_venv(path, python="/usr/bin/python3"):
    """A virtual environment's shape: bin/python (a link to `python`, or a script when python is text),
    pyvenv.cfg and site-packages holding the package."""
    (path / "bin").mkdir(parents=True)
    if python.startswith("/"):
        (path / "bin" / "python").symlink_to(python)
    else:
        (path / "bin" / "python").write_text(python)
        (path / "bin" / "python").chmod(0o755)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "gsd_research").mkdir()
    for folder in (path, path / "bin", path / "lib", site.parent, site):
        folder.chmod(0o755)
    return path


@pytest.mark.parametrize("order", [("explicit", "root", "xdg"), ("root", "xdg"), ("xdg",)])
def test_the_first_environment_in_the_lookup_order_decides(tmp_path, monkeypatch, order):
    places = {"explicit": tmp_path / "explicit", "root": tmp_path / "root" / ".venv",
              "xdg": tmp_path / "xdg" / "gsd-research" / "venv"}
    for name in order:
        make_venv(places[name])
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GSD_RESEARCH_VENV", str(places["explicit"]))

    assert locate.first_venv(str(tmp_path / "root")) == str(places[order[0]])


@pytest.mark.parametrize("part", ["", "bin", "bin/python", "pyvenv.cfg", "lib", "lib/python3.11",
                                  "lib/python3.11/site-packages"])
def test_an_environment_others_can_write_into_is_unsafe(tmp_path, part):
    venv = make_venv(tmp_path / "venv", python="#!/bin/sh\nexit 0\n")
    (venv / part).chmod((venv / part).stat().st_mode | 0o020)

    problem = verdict.unsafe_env(str(venv))

    assert str(venv / part).rstrip("/") in problem and "written by other users" in problem


def test_a_private_environment_on_a_system_interpreter_is_safe(tmp_path):
    assert verdict.unsafe_env(str(make_venv(tmp_path / "venv"))) == ""


@pytest.mark.parametrize("marker, expected", [
    (None, "incomplete"),
    ({"lock_sha256": "b" * 64}, "outdated"),
    ({"lock_sha256": "a" * 64, "python": "/usr/bin/python3.0", "python_version": "3.0"}, "interpreter"),
    ({"lock_sha256": "a" * 64, "python": "REAL", "python_version": "3.11.7"}, ""),
])
def test_readiness_is_the_markers_lock_and_interpreter(tmp_path, marker, expected):
    venv = make_venv(tmp_path / "venv")
    if marker is not None:
        marker = {k: os.path.realpath("/usr/bin/python3") if v == "REAL" else v for k, v in marker.items()}
        (venv / locate.READY_MARKER).write_text(json.dumps(marker))

    assert verdict.marker_problem(str(venv), "a" * 64) == expected


@pytest.mark.parametrize("text", ['{"lock_sha256": 5}', "[1, 2]", "null", '{"python": []}', "{", "",
                                  '{"lock_sha256": "%s", "python": [], "python_version": 3}' % ("a" * 64)])
def test_a_marker_with_wrong_types_is_not_ready(tmp_path, text):
    venv = make_venv(tmp_path / "venv")
    (venv / locate.READY_MARKER).write_text(text)

    assert verdict.marker_problem(str(venv), "a" * 64) in ("incomplete", "interpreter")


@pytest.mark.parametrize("fields", [
    {"state": "failed", "finished_at": "yesterday", "error": "x"},
    {"state": "failed", "finished_at": 5, "error": 5},
    {"state": "building", "started_at": "x", "tool": "pip"},
    {"state": "building", "tool": ["pip"], "history": {"pip": "fast"}},
    {"state": "building", "history": []},
    {"state": "ready", "env": "../../../tmp", "lock_sha256": 5, "timings": "x"},
])
def test_a_state_file_with_wrong_field_types_leads_to_a_build(tmp_path, fields):
    """Read as if missing: a build is due now (not a 'failed' waiting for its retry, not 'ready')."""
    root, data = tmp_path / "root", tmp_path / "data"
    root.mkdir()
    data.mkdir(mode=0o700)
    (root / locate.LOCK_FILE).write_text("tinydep==1.0\n")
    state = {"lock_sha256": locate.lock_digest(str(root)), **fields}
    (data / locate.STATE_FILE).write_text(json.dumps(state))

    status = verdict.plugin_status(str(root), str(data))

    assert status.state == "missing" or (status.state == "failed" and status.info["retry_due"]), status


@pytest.mark.parametrize("args, word", [
    (["docs", "react"], "docs"), (["--max-tokens", "500", "docs"], "docs"), (["--json", "search"], "search"),
    (["--", "--odd"], "--odd"), (["--version"], None), ([], None)])
def test_the_command_word_skips_options_and_their_values(args, word):
    assert command_of(args) == word


def test_the_free_space_estimate_is_close_to_the_real_environment():
    """The real lock's environment measured 594 MB (`du -sm` of a plugin build, CPython 3.11, see progress);
    the estimate keeps a modest margin, not a third more."""
    needed = progress.needed_bytes(str(ROOT)) >> 20
    assert progress.locked_count(str(ROOT)) > 100
    assert 594 <= needed <= 1.12 * 594, needed


def fake_env(data, name: str, digest: str, used_days_ago: float | None, now: float):
    env = data / "envs" / name
    env.mkdir(parents=True)
    (env / ".gsd-research-ready").write_text(f'{{"lock_sha256": "{digest}", "built_at": {now - 30 * 86400}}}')
    if used_days_ago is not None:
        (env / ".gsd-research-used").touch()
        os.utime(env / ".gsd-research-used", (now - used_days_ago * 86400,) * 2)
    return env


def test_garbage_collection_keeps_other_locks_environments_until_unused_for_a_week(tmp_path):
    now = time.time()
    a, b, c = "a" * 64, "b" * 64, "c" * 64
    mine = fake_env(tmp_path, f"{a[:16]}-2", a, 0, now)
    replaced = fake_env(tmp_path, f"{a[:16]}-1", a, 0, now)
    recent = fake_env(tmp_path, f"{b[:16]}-1", b, 6.9, now)  # an old session's, used within the week
    stale = fake_env(tmp_path, f"{c[:16]}-1", c, 7.1, now)
    dead = tmp_path / "envs" / f"{a[:16]}-0"  # a build attempt that never completed
    dead.mkdir()
    for env, digest in ((mine, a), (recent, b), (stale, c)):
        swap(str(tmp_path), str(env), digest)

    collect_garbage(str(tmp_path), keep={str(mine), str(replaced)}, now=now)

    assert sorted(p.name for p in (tmp_path / "envs").iterdir()) == sorted([mine.name, replaced.name, recent.name])
    assert sorted(p.name for p in (tmp_path / "current").iterdir()) == [a[:16], b[:16]]


def run_hook(event: str, payload: dict, root: str, tmp_path) -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GSD_RESEARCH_HOME": str(tmp_path / "gsd"),
           "CLAUDE_PLUGIN_ROOT": root, "CLAUDE_PLUGIN_DATA": str(tmp_path / "data"),
           "GSD_RESEARCH_VENV": str(ROOT / ".venv")}  # an environment the launchers would run on: ready
    proc = subprocess.run([str(ROOT / "hooks" / "run"), event], input=json.dumps(payload), capture_output=True,
                          text=True, env=env, timeout=30)
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("name", ["it's", 'say "hi"', "a$b", "tick`", "back\\slash", "new\nline", "co:lon"])
def test_a_plugin_path_the_client_leaves_off_path_is_said_with_the_full_launcher_path(tmp_path, name):
    root = str(tmp_path / name / "gsd-research")
    start = {"session_id": "s", "hook_event_name": "SessionStart", "source": "startup"}
    agent = {"session_id": "s", "hook_event_name": "SubagentStart", "agent_type": "gsd-phase-researcher"}

    session, subagent = run_hook("session-start", start, root, tmp_path), run_hook("subagent-start", agent, root,
                                                                                    tmp_path)

    for text in (session, subagent):
        assert "off PATH" in text and "not found" in text, text
        quoted = shlex.quote(f"{root}/bin/gsd-research")
        assert quoted in text and shlex.split(quoted) == [f"{root}/bin/gsd-research"]
        assert shlex.quote(f"{root}/bin/researcher") in text
    assert "available through Bash by its full path only" in session


@pytest.mark.parametrize("name", ["semi;colon", "amp&", "pipe|", "lt<", "gt>", "par(en)"])
def test_other_metacharacters_keep_the_bare_commands_and_offer_the_full_path(tmp_path, name):
    root = str(tmp_path / name / "gsd-research")
    start = {"session_id": "s", "hook_event_name": "SessionStart", "source": "startup"}
    agent = {"session_id": "s", "hook_event_name": "SubagentStart", "agent_type": "gsd-phase-researcher"}

    session, subagent = run_hook("session-start", start, root, tmp_path), run_hook("subagent-start", agent, root,
                                                                                    tmp_path)

    for text in (session, subagent):
        assert "off PATH" not in text and "If `gsd-research` is not found" in text, text
        assert shlex.quote(f"{root}/bin/gsd-research") in text
    assert session.startswith("gsd-research is available through Bash (")


def test_a_plain_plugin_path_keeps_the_bare_commands(tmp_path):
    text = run_hook("session-start", {"session_id": "s", "hook_event_name": "SessionStart"},
                    str(tmp_path / "plain dir-1.0_x" / "gsd-research"), tmp_path)
    assert text.startswith("gsd-research is available through Bash (gsd-research docs") and "off PATH" not in text


def test_an_installer_step_that_times_out_is_stopped_with_the_processes_it_started(tmp_path, monkeypatch):
    """`pip --python` runs pip again under the new environment's interpreter: a stalled step must not leave that
    second process writing into an environment the build has already given up."""
    from bootstrap import build

    monkeypatch.setattr(build, "STEP_TIMEOUT", 2)  # room for the step to start its second process
    pid_file = tmp_path / "grandchild.pid"
    spawn = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
             f"open({str(pid_file)!r}, 'w').write(str(p.pid)); p.wait()")
    (tmp_path / "data").mkdir()
    with open(tmp_path / "build.log", "w") as log:
        job = build.Build(str(tmp_path), str(tmp_path / "data"), log)

        ok = job.run("install", "/usr/bin/python3", "-c", spawn)

    stat = Path(f"/proc/{pid_file.read_text()}/stat")
    assert ok is False
    assert _ends(stat), stat.read_text()


def _ends(stat: Path, within: float = 10) -> bool:
    """The process is gone, or dead and unreaped, within `within` s (a killed process on a loaded machine shows
    as running until it is scheduled to die)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False
