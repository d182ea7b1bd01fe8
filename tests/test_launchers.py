"""bin/gsd-research and bin/researcher: found through a symlink or the plugin's PATH, environment lookup,
and one JSON error envelope (ENVIRONMENT_MISSING, exit 3) when there is no environment."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, Result, assert_no_traceback

LAUNCHERS = ("gsd-research", "researcher")
VENV = ROOT / ".venv"


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> Result:
    full = {k: v for k, v in os.environ.items() if k != "GSD_RESEARCH_VENV"}
    full.update(env or {})
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full, cwd=cwd, timeout=60)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def bare_plugin(tmp_path) -> Path:
    """A copy of the plugin's bin/ and bootstrap/ with no environment anywhere (no .venv, empty HOME)."""
    root = tmp_path / "plugin copy"  # a space in the path on purpose
    for part in ("bin", "bootstrap"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_launcher_through_a_symlink_elsewhere_runs_the_cli(tmp_path):
    link_dir = tmp_path / "local-bin"
    link_dir.mkdir()
    (link_dir / "gsd-research").symlink_to(ROOT / "bin" / "gsd-research")

    result = run([str(link_dir / "gsd-research"), "--version"], cwd=tmp_path)

    assert result.code == 0, result.stderr
    assert result.json == {"success": True, "command": "version", "version": result.json["version"]}


def test_launcher_on_the_plugin_path_without_plugin_root(tmp_path):
    """As the Bash tool runs it: plugin bin/ appended to PATH, no CLAUDE_PLUGIN_ROOT, another cwd."""
    env = {"PATH": "/usr/bin:/bin:" + str(ROOT / "bin")}
    env.pop("CLAUDE_PLUGIN_ROOT", None)

    result = run(["gsd-research", "no-such-command"], env=env, cwd=tmp_path)

    assert result.code == 2
    assert result.json["error"]["code"] == "USAGE_ERROR"
    assert_no_traceback(result)


def test_launcher_passes_arguments_and_exit_status_through(fake, tmp_path):
    result = run([str(ROOT / "bin" / "gsd-research"), "docs", "react", "useEffect cleanup", "--max-tokens", "500"],
                 cwd=tmp_path)

    assert result.code == 0, result.stdout
    assert result.json["metadata"]["library_id"] == "/facebook/react"
    assert result.json["metadata"]["tokens_used"] <= 500


@pytest.mark.parametrize("name", LAUNCHERS)
def test_missing_environment_gives_one_json_envelope_and_exit_3(bare_plugin, tmp_path, name):
    empty_home = tmp_path / "empty-home"
    empty_home.mkdir()
    env = {"HOME": str(empty_home), "XDG_DATA_HOME": str(empty_home / "xdg")}

    result = run([str(bare_plugin / "bin" / name), "docs", "react", "hooks"], env=env, cwd=tmp_path)

    assert result.code == 3
    doc = result.json
    assert doc["success"] is False and doc["command"] == "docs"
    assert doc["error"]["code"] == "ENVIRONMENT_MISSING"
    assert shlex.split(doc["error"]["suggestions"][1].split(": ", 1)[1]) == ["bash", f"{bare_plugin}/install.sh"]
    assert result.stderr == ""
    assert_no_traceback(result)


@pytest.mark.parametrize("name", LAUNCHERS)
def test_without_bootstrap_the_shell_alone_answers_one_json_envelope(bare_plugin, tmp_path, name):
    shutil.rmtree(bare_plugin / "bootstrap")

    result = run([str(bare_plugin / "bin" / name), "--version"], env={"HOME": str(tmp_path)})

    assert result.code == 3 and result.json["error"]["code"] == "ENVIRONMENT_MISSING"
    assert name in result.json["error"]["message"]


def planted_venv(base: Path, pwned: Path) -> Path:
    """An environment whose bin/python is a script that leaves a trace when it runs."""
    venv = base / "planted"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(f"#!/bin/sh\ntouch {shlex.quote(str(pwned))}\n")
    (venv / "bin" / "python").chmod(0o755)
    return venv


@pytest.mark.parametrize("writable", ["", "bin", "bin/python"])
def test_a_planted_interpreter_others_can_write_is_refused_before_it_runs(bare_plugin, tmp_path, writable):
    pwned = tmp_path / "pwned"
    venv = planted_venv(tmp_path, pwned)
    (venv / writable).chmod((venv / writable).stat().st_mode | 0o020)

    result = run([str(bare_plugin / "bin" / "gsd-research"), "docs", "x"],
                 env={"GSD_RESEARCH_VENV": str(venv), "HOME": str(tmp_path)})

    assert result.code == 3 and result.json["error"]["code"] == "ENVIRONMENT_BUILD_FAILED"
    assert "written by other users" in result.json["error"]["message"]
    assert not pwned.exists()


def test_environment_without_the_package_is_reported_not_a_traceback(bare_plugin, tmp_path):
    fake_venv = tmp_path / "venv-without-package"
    (fake_venv / "bin").mkdir(parents=True)
    (fake_venv / "bin" / "python").symlink_to("/usr/bin/python3")

    result = run([str(bare_plugin / "bin" / "gsd-research"), "--version"],
                 env={"GSD_RESEARCH_VENV": str(fake_venv), "HOME": str(tmp_path)})

    assert result.code == 3
    assert result.json["error"]["code"] == "ENVIRONMENT_MISSING"
    assert "lacks the gsd-research package" in result.json["error"]["message"]
    assert_no_traceback(result)


def test_env_override_wins_over_the_plugin_venv(tmp_path):
    fake_venv = tmp_path / "other-venv"
    (fake_venv / "bin").mkdir(parents=True)
    (fake_venv / "bin" / "python").symlink_to("/usr/bin/python3")  # no package: proves it was chosen

    result = run([str(ROOT / "bin" / "gsd-research"), "--version"], env={"GSD_RESEARCH_VENV": str(fake_venv)})

    assert result.code == 3 and str(fake_venv) in result.json["error"]["message"]


def test_xdg_location_used_by_install_sh_is_found(bare_plugin, tmp_path):
    xdg = tmp_path / "xdg"
    (xdg / "gsd-research").mkdir(parents=True)
    (xdg / "gsd-research" / "venv").symlink_to(VENV)

    result = run([str(bare_plugin / "bin" / "gsd-research"), "--version"],
                 env={"XDG_DATA_HOME": str(xdg), "HOME": str(tmp_path)})

    assert result.code == 0 and result.json["success"] is True


@pytest.mark.parametrize("name", LAUNCHERS)
def test_each_launcher_is_a_short_script_with_no_program_inside(name):
    lines = (ROOT / "bin" / name).read_text().splitlines()

    assert len(lines) <= 30
    assert f"PROG={name}" in lines and not any("python" in line and " -c " in line for line in lines)


def test_both_launchers_are_the_same_script_but_for_their_name():
    def body(name: str) -> list[str]:
        return [line for line in (ROOT / "bin" / name).read_text().splitlines()[2:] if not line.startswith("PROG=")]

    assert body("gsd-research") == body("researcher")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="hides /usr/bin in a mount namespace: root")
def test_with_no_system_python_the_environments_own_interpreter_runs_the_launcher(tmp_path):
    if os.path.realpath(VENV / "bin" / "python").startswith(("/usr/bin/", "/usr/local/bin/")):
        pytest.skip("the environment's interpreter lives in the folders this test hides")
    tools = tmp_path / "tools"  # mount and a shell from outside the hidden folders
    tools.mkdir()
    for name in ("mount", "dash"):
        shutil.copy2(shutil.which(name) or f"/bin/{name}", tools / name)
    hide = " && ".join(f"{tools}/mount -t tmpfs none {d}" for d in ("/usr/bin", "/usr/local/bin") if Path(d).is_dir())
    script = f"{hide} && PATH=/nonexistent {tools}/dash {shlex.quote(str(ROOT / 'bin' / 'gsd-research'))} --version"

    result = run(["unshare", "-m", "/bin/sh", "-c", script], env={"GSD_RESEARCH_VENV": str(VENV)})

    assert result.code == 0 and result.json["version"], result.stdout + result.stderr
