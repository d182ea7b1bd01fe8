"""bin/gsd-research and bin/researcher: found through a symlink or the plugin's PATH, environment lookup,
and one JSON error envelope (ENVIRONMENT_MISSING, exit 3) when there is no environment."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
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
    """A copy of the plugin's bin/ with no environment anywhere (no .venv, empty HOME)."""
    root = tmp_path / "plugin copy"  # a space in the path on purpose
    (root / "bin").mkdir(parents=True)
    for name in LAUNCHERS:
        shutil.copy2(ROOT / "bin" / name, root / "bin" / name)
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
    assert shlex.split(doc["error"]["suggestions"][1]) == ["bash", f"{bare_plugin}/install.sh"]
    assert result.stderr == ""
    assert_no_traceback(result)


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


def test_launcher_overhead_is_small(tmp_path):
    """The launcher adds a shell and one readlink: runs interleaved with the console script (the same machine
    load for both), the median stays within 25 % + 30 ms of it."""
    direct, launched = [], []
    for _ in range(7):
        for cmd, samples in (([str(VENV / "bin" / "gsd-research"), "--version"], direct),
                             ([str(ROOT / "bin" / "gsd-research"), "--version"], launched)):
            t0 = time.perf_counter()
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            samples.append(time.perf_counter() - t0)
            assert json.loads(out)["success"] is True
    d, m = sorted(direct)[3], sorted(launched)[3]
    assert m <= d * 1.25 + 0.03, (m, d)


def test_both_launchers_are_the_same_script_but_for_what_they_run():
    def body(name: str) -> list[str]:
        lines = (ROOT / "bin" / name).read_text().splitlines()
        return [line for line in lines[2:] if not line.startswith(("PROG=", "MODULE="))]

    assert body("gsd-research") == body("researcher")
    assert "MODULE=gsd_research.researcher.cli" in (ROOT / "bin" / "researcher").read_text()
