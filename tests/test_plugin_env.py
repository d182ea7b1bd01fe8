"""The plugin's own Python environment under ${CLAUDE_PLUGIN_DATA}: built from the lock on first use, found by
the launchers, rebuilt once when the lock changes, never used half-built, failures reported with the fix, and
SessionStart telling the truth about it. Real builds (venv + pip) against a local wheelhouse (see
plugin_env_fixtures); the full lock from PyPI is the end-to-end test's job."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugin_env_fixtures import SESSION, TinyPlugin, age, context, envelope, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def plugin(tmp_path) -> TinyPlugin:
    return TinyPlugin(tmp_path)


def out_python_version(env: Path) -> list[str]:
    probe = "import sys; print(sys.version_info[0], sys.version_info[1])"
    return subprocess.run([str(env / "bin" / "python"), "-c", probe], capture_output=True, text=True).stdout.split()


# -- first use, second use ---------------------------------------------------------------------------
def test_first_call_builds_the_environment_from_the_lock_then_runs(plugin):
    out = envelope(plugin.launch("--version"))

    env = plugin.current()
    assert out == {"success": True, "command": "version", "tinydep": "1.0",
                   "package_file": str(plugin.root / "lib" / "gsd_research" / "cli.py"),
                   "python": str(env / "bin" / "python")}  # the environment itself, not the venv link
    state = plugin.state()
    assert state["state"] == "ready" and state["tool"] == "pip" and state["lock_sha256"] == plugin.digest()
    assert os.readlink(plugin.link()) == f"../envs/{state['env']}" and env.name == state["env"]
    assert state["env"].startswith(plugin.digest()[:16] + "-")
    marker = json.loads((plugin.link() / ".gsd-research-ready").read_text())
    assert marker["lock_sha256"] == plugin.digest()
    assert marker["python"] == os.path.realpath(env / "bin" / "python")
    assert marker["python_version"].split(".")[:2] == out_python_version(env)
    assert json.loads((plugin.data / "plugin-roots.json").read_text()) == {"roots": [str(plugin.root)]}
    assert not list(env.glob("lib/python3*/site-packages/pip"))  # the base Python's pip installed: no ensurepip
    assert (plugin.data.stat().st_mode & 0o777) == 0o700
    assert ((plugin.data / "gsd-research-env.json").stat().st_mode & 0o777) == 0o600


def test_second_call_uses_the_environment_without_any_build(ready_plugin):
    plugin = ready_plugin
    marker = plugin.link() / ".gsd-research-ready"
    built = (marker.stat().st_mtime_ns, (plugin.data / "build.log").stat().st_mtime_ns)

    out = envelope(plugin.launch("docs", "react", "hooks", prog="researcher"))

    assert out["tinydep"] == "1.0" and out["command"] == ["docs"]
    assert (marker.stat().st_mtime_ns, (plugin.data / "build.log").stat().st_mtime_ns) == built


def test_the_launcher_finds_the_data_directory_without_the_sessionstart_export(ready_plugin):
    plugin = ready_plugin

    out = envelope(plugin.launch("--version", GSD_RESEARCH_PLUGIN_DATA=None))

    assert out["python"] == str(plugin.current() / "bin" / "python")


# -- while it builds ---------------------------------------------------------------------------------
def test_a_call_during_the_build_answers_preparing_with_progress_and_eta(plugin):
    proc = plugin.launch("docs", "react", "hooks", GSD_RESEARCH_ENV_WAIT="0.5")

    assert proc.returncode == 6
    err = envelope(proc)
    assert err["success"] is False and err["command"] == "docs"
    assert err["error"]["code"] == "ENVIRONMENT_PREPARING"
    assert "first use after installing the plugin" in err["error"]["message"]
    assert 0 <= err["metadata"]["progress_percent"] < 100 and err["metadata"]["eta_seconds"] >= 3
    assert f"again in about {err['metadata']['eta_seconds']} s" in err["error"]["suggestions"][0]
    wait_until(lambda: plugin.state().get("state") == "ready")  # the build went on without the caller
    assert envelope(plugin.launch("--version"))["tinydep"] == "1.0"


def test_sigterm_while_waiting_for_the_build_still_answers_one_envelope(plugin):
    proc = subprocess.Popen([str(plugin.root / "bin" / "gsd-research"), "docs", "react", "hooks"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**plugin.env(), "GSD_RESEARCH_ENV_WAIT": "60"})
    wait_until(lambda: plugin.state().get("state") == "building")

    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)

    assert proc.returncode == 143 and json.loads(out)["error"]["code"] == "ENVIRONMENT_PREPARING", out


def test_concurrent_first_calls_build_once_and_all_succeed(plugin):
    procs = [subprocess.Popen([str(plugin.root / "bin" / "gsd-research"), "--version"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=plugin.env()) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]

    assert [json.loads(o)["tinydep"] for o, _ in outs] == ["1.0"] * 3
    assert (plugin.data / "build.log").read_text().count(" -m venv ") == 1
    assert plugin.envs() == [plugin.current().name]


# -- half-done, failed ------------------------------------------------------------------------------
def test_a_build_killed_half_way_is_never_used_and_is_redone(plugin):
    builder = plugin.builder()
    wait_until(lambda: any((plugin.data / "envs").glob("*/bin/python")), timeout=60)
    half = next((plugin.data / "envs").glob("*/bin/python")).parent.parent
    os.killpg(builder.pid, signal.SIGKILL)  # the builder and its venv/pip children, mid-build
    builder.wait()
    assert not plugin.link().exists() and not (half / ".gsd-research-ready").exists()
    assert plugin.state()["state"] == "building"  # what it last wrote: the lock says otherwise

    out = envelope(plugin.launch("--version"))

    assert out["tinydep"] == "1.0"
    assert plugin.state()["state"] == "ready" and plugin.envs() == [plugin.current().name] != [half.name]


def test_a_failed_build_is_reported_with_the_fix_and_not_retried_at_once(plugin):
    plugin.use_version("1.0", bad_hash=True)

    proc = plugin.launch("docs", "react", "hooks")

    assert proc.returncode == 3
    err = envelope(proc)["error"]
    assert err["code"] == "ENVIRONMENT_BUILD_FAILED"
    assert "pip could not install the locked packages" in err["message"] and "HASHES" in err["message"].upper()
    assert str(plugin.data / "build.log") in err["message"]
    fix = err["suggestions"][0].split(": ", 1)[1]
    assert shlex.split(fix) == ["python3", str(plugin.root / "bootstrap"), "build", str(plugin.root), str(plugin.data)]
    assert not plugin.link().exists() and plugin.envs() == []
    failed_at = plugin.state()["finished_at"]
    again = plugin.launch("--version")
    assert again.returncode == 3 and envelope(again)["error"]["code"] == "ENVIRONMENT_BUILD_FAILED"
    assert plugin.state()["state"] == "failed" and plugin.state()["finished_at"] == failed_at  # not rebuilt


def test_a_plugin_without_its_lock_is_a_clear_failure(plugin):
    (plugin.root / "requirements.lock").unlink()

    proc = plugin.launch("--version")

    assert proc.returncode == 3
    assert "the plugin has no requirements.lock" in envelope(proc)["error"]["message"]


# -- plugin updates ----------------------------------------------------------------------------------


def test_a_changed_lock_rebuilds_once_and_old_environments_are_collected_once_unused(ready_plugin):
    plugin = ready_plugin
    first = plugin.current()

    plugin.use_version("2.0")  # a plugin update changing the lock
    assert envelope(plugin.launch("--version"))["tinydep"] == "2.0"
    second = plugin.current().name
    log = (plugin.data / "build.log").stat().st_mtime_ns
    assert envelope(plugin.launch("--version"))["tinydep"] == "2.0"

    assert (plugin.data / "build.log").stat().st_mtime_ns == log  # once
    assert plugin.envs() == sorted([first.name, second])  # the old version's (a session may still use it)
    age(first, 8)  # the old version unused for a week and more
    plugin.use_version("3.0")
    assert envelope(plugin.launch("--version"))["tinydep"] == "3.0"
    wait_until(lambda: plugin.envs() == sorted([second, plugin.current().name]), timeout=30)  # after the swap
    assert sorted(p.name for p in (plugin.data / "current").iterdir()) == sorted([second[:16], plugin.digest()[:16]])


def test_two_versions_side_by_side_build_once_each_and_never_again(ready_plugin, tmp_path):
    """After an update, an old session (lock A, built) and a new one (lock B) share the data directory: each runs
    on the environment of its own lock, built once; calls alternating between them build nothing more."""
    plugin = ready_plugin
    cache = plugin.data.parents[1] / "cache" / "gsd-research" / "research"  # the client's layout: one data dir
    old, new = plugin.copy(cache / "0.1.0"), plugin.copy(cache / "0.1.1")
    new.use_version("2.0")
    builds = [plugin.state()["started_at"]]  # lock A's build
    for p, version in ((new, "2.0"), (old, "1.0"), (new, "2.0"), (old, "1.0"), (new, "2.0")):
        assert envelope(p.launch("--version"))["tinydep"] == version
        builds.append(plugin.state().get("started_at"))
    assert len(set(builds)) == 2  # one build per lock
    assert plugin.envs() == sorted([old.current().name, new.current().name])


def test_each_version_runs_its_own_code_and_so_do_its_workers(ready_plugin, tmp_path):
    """Two plugin roots with the same lock share one environment; each launcher (and a `python -m` child it
    starts, as a detached deep worker) imports its own root's gsd_research."""
    cache = ready_plugin.data.parents[1] / "cache" / "gsd-research" / "research"
    plugin, other = ready_plugin.copy(cache / "0.1.0"), ready_plugin.copy(cache / "0.1.1")
    for p in (plugin, other, plugin):
        out = envelope(p.launch("--version"))
        assert out["package_file"] == str(p.root / "lib" / "gsd_research" / "cli.py")
    go = tmp_path / "go"
    worker = subprocess.Popen([str(plugin.root / "bin" / "gsd-research"), "child", str(go)], stdout=subprocess.PIPE,
                              text=True, env=plugin.env())
    try:
        assert "holding" in worker.stdout.readline()
        assert envelope(other.launch("--version"))["tinydep"] == "1.0"  # the other version called meanwhile
    finally:
        go.write_text("")
    child = json.loads(worker.communicate(timeout=60)[0])
    assert child["child_file"] == str(plugin.root / "lib" / "gsd_research" / "cli.py")
    assert len(plugin.envs()) == 1


def test_an_update_with_the_same_lock_moves_the_package_without_a_rebuild(ready_plugin, tmp_path):
    plugin = ready_plugin
    log = (plugin.data / "build.log").stat().st_mtime_ns
    new_root = tmp_path / "plugin-0.2.0"
    shutil.copytree(plugin.root, new_root)
    shutil.rmtree(plugin.root)  # the client removes the old version's directory

    proc = subprocess.run([str(new_root / "bin" / "gsd-research"), "--version"], capture_output=True, text=True,
                          env=plugin.env(), timeout=60)

    assert envelope(proc)["package_file"] == str(new_root / "lib" / "gsd_research" / "cli.py")
    assert (plugin.data / "build.log").stat().st_mtime_ns == log
    child = subprocess.run([str(new_root / "bin" / "gsd-research"), "child"], capture_output=True, text=True,
                           env=plugin.env(), timeout=60)
    assert json.loads(child.stdout.splitlines()[-1])["child_file"] == str(new_root / "lib" / "gsd_research" / "cli.py")  # `python -m` too


# -- SessionStart and SubagentStart tell the truth -----------------------------------------------------
def test_session_start_starts_the_build_exports_the_data_dir_and_says_it_is_being_prepared(plugin, tmp_path):
    env_file = tmp_path / "session-env.sh"
    env_file.write_text("")

    text = context(plugin.hook("session-start", SESSION, CLAUDE_ENV_FILE=str(env_file)))

    assert plugin.state().get("state") != "ready"  # the build runs in the background, not in the hook
    assert text.startswith("gsd-research is being prepared: its Python environment is being built (first use after "
                           "installing the plugin; about 90 s left)")
    assert "ENVIRONMENT_PREPARING" in text and "is available" not in text
    assert env_file.read_text() == ("export GSD_RESEARCH_SESSION=s-1\n"
                                    f"export GSD_RESEARCH_PLUGIN_DATA={shlex.quote(str(plugin.data))}\n")
    wait_until(lambda: plugin.state().get("state") == "ready")
    prompt = {**SESSION, "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    notice = context(plugin.hook("user-prompt-submit", prompt))
    assert "gsd-research is ready now" in notice
    assert plugin.hook("user-prompt-submit", prompt).stdout == ""  # said once
    ready = context(plugin.hook("session-start", {**SESSION, "session_id": "s-2"}))
    assert ready.startswith("gsd-research is available through Bash") and "docs ready" in ready


def test_session_start_reports_a_failed_build_with_the_fix_never_available(plugin):
    plugin.use_version("1.0", bad_hash=True)
    assert plugin.launch("--version").returncode == 3

    text = context(plugin.hook("session-start", SESSION))

    assert text.startswith("gsd-research is NOT available: building its Python environment failed")
    assert "ENVIRONMENT_BUILD_FAILED" in text and "bootstrap' build" in text and "available through" not in text


def test_subagent_start_says_when_the_tools_are_not_there(plugin):
    plugin.use_version("1.0", bad_hash=True)
    assert plugin.launch("--version").returncode == 3
    event = {**SESSION, "hook_event_name": "SubagentStart", "agent_id": "a1", "agent_type": "gsd-phase-researcher"}

    text = context(plugin.hook("subagent-start", event))

    assert "NOT available" in text and "Research with your usual tools" in text
    assert "gsd-research docs LIB" not in text


# -- the installer -----------------------------------------------------------------------------------
BUILD_WITH_BASE = ("import sys; sys.path.insert(0, sys.argv[1]); import bootstrap.build as b; "
                   "b.base_python = lambda: (sys.argv[2], ''); sys.exit(b.build(sys.argv[1], sys.argv[3]))")


def test_a_base_python_without_pip_builds_with_the_environments_own_pip(plugin, tmp_path):
    """The venv then gets pip from ensurepip (with a pip >= 22.3 the base's own installs: see the first call)."""
    base = tmp_path / "no-pip"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(base)], check=True)

    build = subprocess.run([sys.executable, "-I", "-S", "-B", "-c", BUILD_WITH_BASE, str(plugin.root),
                            str(base / "bin" / "python"), str(plugin.data)], capture_output=True, text=True,
                           env=plugin.env(), timeout=120)

    assert build.returncode == 0, (plugin.data / "build.log").read_text()
    assert envelope(plugin.launch("--version"))["tinydep"] == "1.0"
    assert list(plugin.current().glob("lib/python3*/site-packages/pip"))


def test_a_pip_set_for_user_installs_still_builds_into_the_environment(plugin):
    """PIP_USER (or `user = true` in pip.conf) would send the packages to ~/.local, or fail in a venv."""
    out = envelope(plugin.launch("--version", PIP_USER="1"))

    assert out["tinydep"] == "1.0"
    assert not (plugin.base / "claude-home" / ".local").exists()


# -- the uv route --------------------------------------------------------------------------------------
def test_a_failing_uv_falls_back_to_venv_and_pip(plugin, tmp_path):
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    (fake_bin / "uv").write_text("#!/bin/sh\necho 'uv: invalid peer certificate' >&2\nexit 2\n")
    (fake_bin / "uv").chmod(0o755)

    out = envelope(plugin.launch("--version", PATH=f"{fake_bin}:/usr/bin:/bin"))

    assert out["tinydep"] == "1.0" and plugin.state()["tool"] == "pip"
    assert "uv failed: building with venv + pip instead" in (plugin.data / "build.log").read_text()


def test_uv_builds_when_present(plugin, tmp_path):
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if not uv:
        pytest.skip("uv is not installed in the test environment (requirements-dev.lock has it)")
    fake_bin = tmp_path / "uv-bin"
    fake_bin.mkdir()
    (fake_bin / "uv").symlink_to(uv)

    config = tmp_path / "uv.toml"  # uv's --no-index has no variable of its own: a config file says it
    config.write_text(f'no-index = true\nfind-links = ["{plugin.wheelhouse}"]\n')

    out = envelope(plugin.launch("--version", PATH=f"{fake_bin}:/usr/bin:/bin", UV_CONFIG_FILE=str(config),
                                 UV_CACHE_DIR=str(tmp_path / "uv-cache")))

    assert out["tinydep"] == "1.0" and plugin.state()["tool"] == "uv"


def test_the_data_directory_of_another_plugin_is_not_taken(plugin, tmp_path):
    """The launcher's fallback lookup only takes a directory holding gsd-research's own state file."""
    other = plugin.data.parent / "research-tools-elsewhere"
    (other / "venv" / "bin").mkdir(parents=True)
    (other / "venv" / "bin" / "python").symlink_to("/usr/bin/python3")

    proc = plugin.launch("--version", GSD_RESEARCH_PLUGIN_DATA=None)

    assert proc.returncode == 3 and envelope(proc)["error"]["code"] == "ENVIRONMENT_MISSING"
