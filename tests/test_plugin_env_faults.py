"""The plugin's own environment under faults: the interpreter changing under it, damage, builds killed or
outrun by a plugin update, unreadable or hostile state, hostile paths in the fixes it suggests, a full disk,
data directories of other users and of a second install, and what the hooks and launchers say meanwhile (the
same thing). Real builds against the local wheelhouse of plugin_env_fixtures."""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.plugin_env_fixtures import SESSION, TinyPlugin, age, context, envelope, wait_until

pytestmark = pytest.mark.slow

PROMPT = {**SESSION, "hook_event_name": "UserPromptSubmit", "prompt": "go"}
SUBAGENT = {**SESSION, "hook_event_name": "SubagentStart", "agent_id": "a1", "agent_type": "gsd-phase-researcher"}
HOSTILE = 'pl "q" \'s\' $(touch pwned_dollar) `touch pwned_tick` x'


@pytest.fixture
def plugin(tmp_path) -> TinyPlugin:
    return TinyPlugin(tmp_path)


def other_minor_python() -> str | None:
    """An installed Python of another minor version than the system python3 the builds use."""
    system = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[1])"],
                            capture_output=True, text=True).stdout.strip()
    patterns = ("/usr/bin/python3.1[0-9]", "/usr/local/bin/python3.1[0-9]", "/root/.pyenv/versions/3.1*/bin/python3.1?",
                os.path.expanduser("~/.pyenv/versions/3.1*/bin/python3.1?"))
    for path in sorted({p for pattern in patterns for p in glob.glob(pattern)}):
        if not path.endswith(f"python3.{system}") and os.access(path, os.X_OK):
            return path
    return None


def processes_under(path: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-af", str(path)], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


# -- 1. the interpreter changed, the environment damaged ---------------------------------------------
def test_an_interpreter_upgrade_under_a_ready_environment_rebuilds_it(request):
    """A Python upgrade leaves the venv's python pointing at another minor version: not ready, rebuilt."""
    newer = other_minor_python()
    if newer is None:
        pytest.skip("no Python of another minor version installed")
    plugin = request.getfixturevalue("ready_plugin")
    env = plugin.current()
    for name in ("python3",):
        (env / "bin" / name).unlink()
        (env / "bin" / name).symlink_to(newer)
    cfg = env / "pyvenv.cfg"
    cfg.write_text(cfg.read_text().replace("home = /usr/bin", f"home = {os.path.dirname(newer)}"))

    text = context(plugin.hook("session-start", SESSION))
    assert "is being prepared" in text and "the Python it was built with changed" in text, text
    out = envelope(plugin.launch("--version"))

    assert out["tinydep"] == "1.0" and plugin.current() != env
    assert plugin.state()["state"] == "ready"


def test_an_import_error_in_a_ready_environment_rebuilds_it_not_environment_missing(ready_plugin):
    plugin = ready_plugin
    env = plugin.current()
    shutil.rmtree(next(env.glob("lib/python3*/site-packages/tinydep")))  # damaged: a package gone

    proc = plugin.launch("docs", "react")

    out = envelope(proc)
    assert out["success"] is True and out["tinydep"] == "1.0", out
    assert plugin.current() != env
    assert (env / ".gsd-research-ready.broken").exists() or not env.exists()


def test_an_import_error_the_environment_is_not_to_blame_for_is_not_rebuilt_forever(ready_plugin):
    plugin = ready_plugin
    env = plugin.current()
    (plugin.root / "lib" / "gsd_research" / "cli.py").write_text("import no_such_module_here\n")

    proc = plugin.launch("docs", "react")

    assert proc.returncode == 3
    assert "no_such_module_here" in envelope(proc)["error"]["message"]
    assert plugin.current() == env and (env / ".gsd-research-ready").exists()


def test_a_ready_environment_missing_its_python_is_rebuilt(ready_plugin):
    plugin = ready_plugin
    env = plugin.current()
    for name in ("python", "python3"):
        (env / "bin" / name).unlink()

    assert envelope(plugin.launch("--version"))["tinydep"] == "1.0"
    assert plugin.current() != env


# -- 2, 3. the hooks say what a launcher would do --------------------------------------------------------
def test_after_the_build_was_killed_the_hooks_say_it_is_being_prepared_and_restart_it(plugin):
    assert "is being prepared" in context(plugin.hook("session-start", SESSION))
    wait_until(lambda: plugin.state().get("state") == "building", timeout=30)
    os.killpg(plugin.state()["pid"], signal.SIGKILL)  # the machine slept, OOM, a logout ...
    wait_until(lambda: not processes_under(plugin.data), timeout=30)

    notice = plugin.hook("user-prompt-submit", PROMPT)
    agent = context(plugin.hook("subagent-start", SUBAGENT))

    assert "NOT available" not in notice.stdout and "ENVIRONMENT_MISSING" not in notice.stdout, notice.stdout
    assert "gsd-research docs LIB" in agent and "being prepared" in agent and "NOT available" not in agent
    wait_until(lambda: plugin.state().get("state") == "ready")  # restarted by the hooks, no call needed
    assert "gsd-research is ready now" in context(plugin.hook("user-prompt-submit", PROMPT))


def test_an_update_during_the_old_versions_build_gets_its_own_eta_and_its_own_build(plugin, tmp_path):
    new = plugin.copy(tmp_path / "plugin root 2")
    new.use_version("2.0")
    plugin.hook("session-start", SESSION)
    wait_until(lambda: plugin.state().get("state") == "building", timeout=30)

    text = context(new.hook("session-start", {**SESSION, "session_id": "s-new"}))

    eta = int(text.split("about ", 1)[1].split(" s left", 1)[0])
    assert "is being prepared" in text and eta >= 90  # the old build's rest plus a whole build of its own
    wait_until(lambda: plugin.state().get("state") == "ready" and plugin.state()["lock_sha256"] == plugin.digest())
    notice = new.hook("user-prompt-submit", {**PROMPT, "session_id": "s-new"})
    assert "NOT available" not in notice.stdout and "ENVIRONMENT_MISSING" not in notice.stdout, notice.stdout
    assert envelope(new.launch("--version"))["tinydep"] == "2.0"


@pytest.mark.parametrize("fault", ["no lock", "data dir cannot be created", "data dir writable by others",
                                   "ready, then writable by others"])
def test_session_start_and_the_launcher_report_the_same_failure(request, tmp_path, fault):
    plugin = request.getfixturevalue("ready_plugin" if fault.startswith("ready") else "plugin")
    if fault == "no lock":
        (plugin.root / "requirements.lock").unlink()
    elif "writable by others" in fault:
        plugin.data.mkdir(parents=True, exist_ok=True)
        plugin.data.chmod(0o1777)  # a tmpfs mounted with its default mode, say
    else:
        (tmp_path / "a-file").write_text("")
        plugin.data = tmp_path / "a-file" / "data"  # makedirs fails (ENOTDIR), as on a read-only disk

    text = context(plugin.hook("session-start", SESSION))
    proc = plugin.launch("docs", "react", GSD_RESEARCH_ENV_WAIT="5")

    err = envelope(proc)["error"]
    assert proc.returncode == 3 and err["code"] == "ENVIRONMENT_BUILD_FAILED"
    assert text.startswith("gsd-research is NOT available") and "ENVIRONMENT_BUILD_FAILED" in text, text
    assert "ENVIRONMENT_MISSING" not in text
    if "writable by others" in fault:
        assert "can be written by other users" in err["message"] and "chmod go-w" in text
        assert (plugin.data / "envs").exists() == fault.startswith("ready")


def test_an_environment_found_before_the_plugins_own_decides_in_the_hooks_too(plugin):
    """GSD_RESEARCH_VENV (or .venv, or install.sh's) comes first for the launchers: an unsafe data directory they
    never look at must not make SessionStart say 'NOT available'."""
    plugin.data.mkdir(parents=True)
    plugin.data.chmod(0o777)
    venv = str(ROOT / ".venv")

    text = context(plugin.hook("session-start", SESSION, GSD_RESEARCH_VENV=venv))
    out = envelope(plugin.launch("--version", GSD_RESEARCH_VENV=venv))

    assert text.startswith("gsd-research is available through Bash"), text
    assert out["success"] is True and out["command"] == "version"


# -- 4. a running process keeps its environment ----------------------------------------------------------
def test_a_running_process_keeps_its_environment_through_two_rebuilds(ready_plugin, tmp_path):
    plugin = ready_plugin
    first = plugin.current()
    go = tmp_path / "go"
    holder = subprocess.Popen([str(plugin.root / "bin" / "gsd-research"), "hold", str(go)], stdout=subprocess.PIPE,
                              text=True, env=plugin.env())
    try:
        assert "holding" in holder.stdout.readline()
        plugin.use_version("2.0")
        assert envelope(plugin.launch("--version"))["tinydep"] == "2.0"
        plugin.use_version("3.0")
        assert envelope(plugin.launch("--version"))["tinydep"] == "3.0"
        assert first.exists()  # two generations back, but in use
    finally:
        go.write_text("")  # the holder never outlives the test
    late = json.loads(holder.communicate(timeout=30)[0])

    assert late == {"success": True, "late": "1.0", "prefix": str(first)}
    age(first, 8)  # unused for more than a week
    plugin.use_version("4.0")
    assert envelope(plugin.launch("--version"))["tinydep"] == "4.0"
    wait_until(lambda: not first.exists(), timeout=30)  # no longer in use: collected (after the swap)


# -- 5. state files with the wrong types -------------------------------------------------------------------
def test_a_state_file_with_wrong_field_types_is_as_if_missing(plugin):
    """End to end for one state file (the other wrong types: test_bootstrap's
    test_a_state_file_with_wrong_field_types_leads_to_a_build, in process)."""
    fields = {"state": "ready", "env": "../../../tmp", "lock_sha256": 5, "timings": "x"}
    plugin.data.mkdir(parents=True)
    (plugin.data / "gsd-research-env.json").write_text(json.dumps({"lock_sha256": plugin.digest(), **fields}))

    text = context(plugin.hook("session-start", SESSION))
    out = envelope(plugin.launch("--version"))

    assert "is being prepared" in text
    assert out["tinydep"] == "1.0"  # healed: built, not stuck on a 'failed' it cannot read


@pytest.mark.parametrize("fields", [
    {"started_at": "x", "tool": "pip"},
    {"started_at": 1.0, "tool": ["pip"], "history": {"pip": "fast"}},
    {"history": [], "env": 5},
    {"started_at": float("inf"), "history": {"pip": -1, "conda": 3}, "step": 7},
])
def test_a_running_builds_state_with_wrong_field_types_still_gives_progress(plugin, fields):
    """While a build holds the lock its state is read for the progress: wrong types must not crash that."""
    plugin.data.mkdir(parents=True)
    (plugin.data / "gsd-research-env.json").write_text(
        json.dumps({"state": "building", "lock_sha256": plugin.digest(), **fields}).replace("Infinity", "1e999"))
    fd = os.open(plugin.data / "build.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = plugin.launch("docs", "x", GSD_RESEARCH_ENV_WAIT="0")  # one look at the build, no wait
        text = context(plugin.hook("session-start", SESSION))
    finally:
        os.close(fd)

    assert proc.returncode == 6 and envelope(proc)["error"]["code"] == "ENVIRONMENT_PREPARING"
    assert text.startswith("gsd-research is being prepared") and "about " in text


def test_a_marker_with_wrong_types_means_not_ready(ready_plugin):
    """End to end for one marker (the other wrong types: test_bootstrap's
    test_a_marker_with_wrong_types_is_not_ready, in process)."""
    plugin = ready_plugin
    env = plugin.current()
    (env / ".gsd-research-ready").write_text("[1, 2]")

    assert envelope(plugin.launch("--version"))["tinydep"] == "1.0"
    assert plugin.current() != env


# -- 6. fixes are safe to paste ----------------------------------------------------------------------------
def test_the_suggested_fix_quotes_hostile_paths_and_runs_as_is(tmp_path):
    """Once the cause is fixed, the fix pasted into a shell builds the environment the launcher then runs on."""
    base = tmp_path / "base"
    base.mkdir()
    plugin = TinyPlugin(base)
    plugin.root = plugin.root.rename(base / HOSTILE)
    plugin.data = base / "claude-home" / ".claude" / "plugins" / "data" / 'research-ü $(touch pwned_data) "d"'
    plugin.use_version("1.0", bad_hash=True)

    err = envelope(plugin.launch("--version"))["error"]
    text = context(plugin.hook("session-start", SESSION))
    fix = err["suggestions"][0].split(": ", 1)[1]
    assert fix in text

    plugin.use_version("1.0")  # the cause fixed; now paste the fix into a shell
    work = tmp_path / "cwd"
    work.mkdir()
    proc = subprocess.run(["bash", "-c", fix], capture_output=True, text=True, env=plugin.env(), cwd=work, timeout=120)

    assert os.listdir(work) == [] and not list(base.glob("pwned*"))
    assert proc.returncode == 0 and json.loads(proc.stdout)["state"] == "ready", proc.stderr
    assert envelope(plugin.launch("--version"))["tinydep"] == "1.0"
    assert shlex.split(err["suggestions"][1].split(": ", 1)[1]) == ["bash", str(plugin.root / "install.sh")]


# -- 8. a full disk ----------------------------------------------------------------------------------------
def in_namespace(plugin: TinyPlugin, size: str, script: str, fill: bool = False) -> str:
    """Run `script` (sh, $DATA set) with <data> on a tmpfs of `size` in a private mount namespace (root)."""
    plugin.data.mkdir(parents=True, exist_ok=True)
    setup = f'mount -t tmpfs -o size={size},mode=0700 tmpfs "$DATA" || exit 99\n'
    if fill:
        setup += 'dd if=/dev/zero of="$DATA/filler" bs=64k 2>/dev/null; true\n'
    proc = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", setup + script],
                          capture_output=True, text=True, env=plugin.env(DATA=str(plugin.data)), timeout=240)
    if proc.returncode == 99 or "unshare:" in proc.stderr:
        pytest.skip(f"no private mount namespace here: {proc.stderr.strip()[:200]}")
    return proc.stdout


def hook_and_launch(plugin: TinyPlugin) -> str:
    root = shlex.quote(str(plugin.root))
    return (f"echo '{json.dumps(SESSION)}' | CLAUDE_PLUGIN_ROOT={root} CLAUDE_PLUGIN_DATA=\"$DATA\" {root}/hooks/run "
            f"session-start\necho ===\nGSD_RESEARCH_ENV_WAIT=60 {root}/bin/gsd-research --version; echo \"rc=$?\"\n"
            "echo ===\nsleep 1; ls -a \"$DATA\"\n")


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_no_free_space_is_said_at_once_by_the_hook_and_the_launcher(plugin):
    hook, launch, listing = in_namespace(plugin, "1m", hook_and_launch(plugin), fill=True).split("===\n")

    text = json.loads(hook)["hookSpecificOutput"]["additionalContext"]
    err = json.loads(launch.splitlines()[0])["error"]
    assert "NOT available" in text and "disk space" in text and "ENVIRONMENT_BUILD_FAILED" in text, text
    assert err["code"] == "ENVIRONMENT_BUILD_FAILED" and "disk space" in err["message"]
    assert ".tmp" not in listing


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
def test_a_disk_filling_up_during_the_build_is_reported_as_such(plugin):
    plugin.use_version("1.0", padding=(400, 100_000))  # ~40 MB installed: more than the tmpfs holds
    # 36 MB: room enough to start (the estimate for one package is 28 MB), not for the 40 MB it installs
    _hook, launch, listing = in_namespace(plugin, "36m", hook_and_launch(plugin)).split("===\n")

    err = json.loads(launch.splitlines()[0])["error"]
    assert err["code"] == "ENVIRONMENT_BUILD_FAILED"
    assert "is full" in err["message"] and "free some space" in err["message"], err["message"]
    assert "python3-venv" not in err["message"]
    assert ".tmp" not in listing and "envs" in listing


# -- 9. a killed builder's installer ---------------------------------------------------------------------
def test_a_killed_builders_installer_is_stopped_and_never_writes_into_the_new_build(plugin):
    plugin.use_version("1.0", padding=(3000, 2000))  # pip takes a few seconds
    builder = plugin.builder()
    wait_until(lambda: any((plugin.data / "envs").glob("*/lib/python3*/site-packages/tinydep/data/f1*")), timeout=90)
    first = plugin.state()["env"]
    os.kill(builder.pid, signal.SIGKILL)  # the builder alone: its pip goes on
    builder.wait()
    assert processes_under(plugin.data / "envs" / first)

    out = envelope(plugin.launch("--version"))

    assert out["tinydep"] == "1.0"
    assert processes_under(plugin.data / "envs" / first) == []
    assert not (plugin.data / "envs" / first).exists() and plugin.current().name != first
    files = list(plugin.current().glob("lib/python3*/site-packages/tinydep/data/*"))
    assert len(files) == 3000


# -- 10, 11. hooks on an old Python, an env file that is not a file -------------------------------------
def test_hooks_on_python_3_6_exit_0_silently(plugin, tmp_path):
    old = next(iter(glob.glob("/root/.pyenv/versions/3.6*/bin/python3.6")
                    + glob.glob(os.path.expanduser("~/.pyenv/versions/3.6*/bin/python3.6"))), None)
    if old is None:
        pytest.skip("no Python 3.6 installed")

    for event in ("session-start", "user-prompt-submit", "subagent-start"):  # as hooks/run would, on a 3.6 system
        proc = subprocess.run([old, "-I", "-S", "-B", str(plugin.root / "hooks" / "entry.py"), event],
                              input=json.dumps(SUBAGENT), capture_output=True, text=True, env=plugin.env(), timeout=10)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink", "/dev/full", "not there yet"])
def test_session_start_is_quick_whatever_the_env_file_is(ready_plugin, tmp_path, kind):
    plugin = ready_plugin  # ready: the hook starts no build
    target = tmp_path / "target.sh"
    target.write_text("# the user's file\n")
    path = tmp_path / "env-file"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        path.symlink_to(target)
    elif kind == "/dev/full":
        path = Path(kind)

    text = context(plugin.hook("session-start", SESSION, CLAUDE_ENV_FILE=str(path)))  # within its timeout

    assert "gsd-research" in text
    export = f"export GSD_RESEARCH_SESSION=s-1\nexport GSD_RESEARCH_PLUGIN_DATA={shlex.quote(str(plugin.data))}\n"
    if kind == "symlink":
        assert target.read_text() == f"# the user's file\n{export}"
    if kind == "not there yet":
        assert path.read_text() == export


# -- 12. whose data directory ---------------------------------------------------------------------------
def test_a_data_directory_of_another_user_is_never_run(plugin, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("making a directory of another user needs root")
    evil = plugin.data.parent / "research-aaa-evil"
    (evil / "venv" / "bin").mkdir(parents=True)
    pwned = tmp_path / "pwned"
    (evil / "venv" / "bin" / "python").write_text(f"#!/bin/sh\ntouch {shlex.quote(str(pwned))}\n")
    (evil / "venv" / "bin" / "python").chmod(0o755)
    (evil / "gsd-research-env.json").write_text("{}")
    for path in [evil, *evil.rglob("*")]:
        os.lchown(path, 65534, 65534)

    for data in (None, str(evil)):
        proc = plugin.launch("--version", GSD_RESEARCH_PLUGIN_DATA=data, GSD_RESEARCH_ENV_WAIT="1")
        assert not pwned.exists()
        assert envelope(proc)["success"] is False


def test_two_installs_side_by_side_keep_their_own_environments(tmp_path):
    a, b = TinyPlugin(tmp_path / "a"), TinyPlugin(tmp_path / "b")
    home = tmp_path / "home"
    b.wheelhouse = a.wheelhouse
    b.use_version("2.0")
    data = home / ".claude" / "plugins" / "data"
    a.data, b.data = data / "research-a", data / "research-b"
    common = {"HOME": str(home), "PIP_FIND_LINKS": str(a.wheelhouse), "PATH": f"{a.root / 'bin'}:/usr/bin:/bin"}
    for p in (a, b):  # one session: both plugins' SessionStart; the Bash tool keeps the last export (b's)
        context(p.hook("session-start", SESSION, **common))
    wait_until(lambda: a.state().get("state") == "ready" and b.state().get("state") == "ready")
    b_env = b.current()

    for _ in range(2):
        for p, version in ((a, "1.0"), (b, "2.0")):
            proc = subprocess.run([str(p.root / "bin" / "gsd-research"), "--version"], capture_output=True, text=True,
                                  env=a.env(**common, GSD_RESEARCH_PLUGIN_DATA=str(b.data)), timeout=120)
            assert envelope(proc)["tinydep"] == version
        proc = subprocess.run([str(b.root / "bin" / "gsd-research"), "--version"], capture_output=True, text=True,
                              env=a.env(**common, GSD_RESEARCH_PLUGIN_DATA=None), timeout=120)
        assert envelope(proc)["tinydep"] == "2.0"

    assert b.current() == b_env and b.envs() == [b_env.name]  # never rebuilt with a's lock
    assert a.envs() == [a.current().name]


@pytest.mark.parametrize("where", ["envs", "site-packages", "bin"])
def test_an_environment_others_can_write_into_is_never_run(ready_plugin, tmp_path, where):
    """Another user able to write into envs/, the environment's site-packages or its bin/ could plant a .pth or
    an interpreter that runs in every call: the launcher refuses before running either, and says what the hooks
    say."""
    plugin = ready_plugin
    site = next(plugin.current().glob("lib/python3*/site-packages"))
    pwned = tmp_path / "pwned"
    (site / "zz_planted.pth").write_text(f"import os; open({str(pwned)!r}, 'w').close()\n")
    python = plugin.current() / "bin" / "python"
    python.unlink()
    python.write_text(f"#!/bin/sh\ntouch {shlex.quote(str(pwned))}\nexec /usr/bin/python3 \"$@\"\n")
    python.chmod(0o755)
    {"envs": plugin.data / "envs", "site-packages": site, "bin": python.parent}[where].chmod(0o777)

    proc = plugin.launch("docs", "react", GSD_RESEARCH_ENV_WAIT="5")
    text = context(plugin.hook("session-start", SESSION))

    assert not pwned.exists()
    err = envelope(proc)["error"]
    assert proc.returncode == 3 and err["code"] == "ENVIRONMENT_BUILD_FAILED", err
    assert "can be written by other users" in err["message"] and "chmod go-w" in " ".join(err["suggestions"] + [
        err["message"]])
    assert text.startswith("gsd-research is NOT available") and "ENVIRONMENT_BUILD_FAILED" in text, text
    assert "can be written by other users" in text


def test_a_data_directory_of_another_user_gets_the_hooks_verdict_from_the_launcher(plugin):
    if os.geteuid() != 0:
        pytest.skip("making a directory of another user needs root")
    plugin.data.mkdir(parents=True)
    os.chown(plugin.data, 65534, 65534)

    proc = plugin.launch("docs", "react", GSD_RESEARCH_ENV_WAIT="2")
    text = context(plugin.hook("session-start", SESSION))

    err = envelope(proc)["error"]
    assert proc.returncode == 3 and err["code"] == "ENVIRONMENT_BUILD_FAILED", err
    assert "belongs to another user (uid 65534)" in err["message"]
    assert "ENVIRONMENT_BUILD_FAILED" in text and "belongs to another user (uid 65534)" in text
    hook_fix = text.split("Tell the user the fix: ", 1)[1]
    assert all(fix[0].lower() + fix[1:] in hook_fix for fix in err["suggestions"][:-1])
