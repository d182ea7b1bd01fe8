"""Both GSD lines of today, installed from the npm registry (pinned, cached under <repo>/.e2e) into a temporary
HOME beside install.sh's gsd-research: GSD's installer run again keeps our agent, hooks and rules, and a
GSD researcher starting in a GSD project gets our guidance for that line."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import E2E_DIR
from tests.install_fixtures import install

LINES = {  # line -> (npm package, pinned version, installer inside the package, folder it installs)
    "original": ("get-shit-done-cc", "1.42.3", "bin/install.js", "get-shit-done"),
    "core": ("@opengsd/gsd-core", "1.14.0", "bin/install.js", "gsd-core"),
}


def gsd_package(line: str) -> Path:
    """The pinned package's folder (npm install once into .e2e/gsd-<line>); skips when npm cannot fetch it."""
    name, version, _, _ = LINES[line]
    prefix = E2E_DIR / f"gsd-{line}"
    package = prefix / "node_modules" / name
    if not shutil.which("npm"):
        pytest.skip("npm is not installed")
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (package / "package.json").is_file() or \
                json.loads((package / "package.json").read_text()).get("version") != version:
            (prefix / "package.json").write_text('{"private": true}\n')  # npm installs here, not in a parent
            proc = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save",
                                   f"{name}@{version}"], capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                pytest.skip(f"npm could not install {name}@{version}: {proc.stderr[-300:]}")
    return package


def run_gsd_installer(line: str, home: Path) -> None:
    package = gsd_package(line)
    proc = subprocess.run(["node", str(package / LINES[line][2]), "--claude", "--global"], cwd=home,
                          capture_output=True, text=True, timeout=300,
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout[-800:] + proc.stderr[-800:]


@pytest.mark.parametrize("line", list(LINES))
@pytest.mark.parametrize("ours_first", [False, True], ids=["gsd-first", "ours-first"])
def test_gsd_installs_and_updates_keep_our_agent_hooks_and_rules(home, line, ours_first):
    """GSD's update deletes every agents/gsd-*.md; its first install in a config folder stops to ask about any
    gsd-*/gsd_* file it does not own (a failed install, or our hooks deleted)."""
    user = Path(str(home)).parent / "user-home"
    (user / ".claude").mkdir(exist_ok=True)
    if not ours_first:
        run_gsd_installer(line, user)
    assert install("--skip-venv", "--no-demo").returncode == 0

    run_gsd_installer(line, user)
    if ours_first:
        run_gsd_installer(line, user)

    claude = user / ".claude"
    assert (claude / "agents" / "research-scout.md").is_file()
    assert (claude / "hooks" / "gsd-research" / "entry.py").is_file()
    assert (claude / LINES[line][3]).is_dir() and list((claude / "agents").glob("gsd-phase-researcher*.md"))
    settings = json.loads((claude / "settings.json").read_text())
    run = str(claude / "hooks" / "gsd-research" / "run")
    commands = [h["command"] for groups in settings["hooks"].values() for g in groups for h in g.get("hooks", [])]
    assert f"{run} subagent-start" in commands and f"{run} session-start" in commands
    assert {"Bash(gsd-research:*)", "Bash(researcher:*)"} <= set(settings["permissions"]["allow"])


@pytest.mark.parametrize("line, has_map", [("original", False), ("core", True)])
def test_a_gsd_researcher_in_a_project_gets_its_lines_guidance(home, tmp_path, line, has_map):
    user = Path(str(home)).parent / "user-home"
    (user / ".claude").mkdir(exist_ok=True)
    run_gsd_installer(line, user)
    assert install("--skip-venv", "--no-demo").returncode == 0
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text("{}")
    env_file = tmp_path / "claude-env"
    env_file.write_text("")
    event = {"hook_event_name": "SubagentStart", "agent_type": "gsd-phase-researcher", "cwd": str(project)}

    proc = subprocess.run([str(user / ".claude" / "hooks" / "gsd-research" / "run"), "subagent-start"],
                          input=json.dumps(event), capture_output=True, text=True, timeout=10,
                          env={"HOME": str(user), "PATH": f"{user / '.local' / 'bin'}:/usr/bin:/bin"})
    text = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]

    assert "gsd-research docs" in text
    assert ("`perplexity`: `gsd-research deep" in text) == has_map


@pytest.mark.e2e
@pytest.mark.parametrize("line, has_map", [("original", False), ("core", True)])
def test_a_spawned_gsd_researcher_gets_our_guidance_and_runs_our_commands_unprompted(
        home, tmp_path, claude_bin, fake_api, fake, line, has_map):
    """Plugin route beside each GSD line: guidance (the provider map on GSD Core) reaches the spawned
    gsd-phase-researcher, and after /research:setup's rules its Bash call runs with no prompt (print mode
    denies a call that would prompt)."""
    from tests.e2e.conftest import clean_env
    from tests.e2e.fake_anthropic import bash, request_text, result_json, steps, tool_results

    user = Path(str(home)).parent / "user-home"
    (user / ".claude").mkdir(exist_ok=True)
    run_gsd_installer(line, user)
    env = clean_env(ANTHROPIC_BASE_URL=fake_api.url, CONTEXT7_API_URL=fake.url + "/api")
    setup = subprocess.run(["python3", str(ROOT / "installer" / "allow_rules.py"), "allow"], env=env,
                           capture_output=True, text=True, timeout=30)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text("{}")
    sub = steps(bash("gsd-research docs react 'useEffect cleanup' --max-tokens 300"))
    agent = {"tool": "Agent", "input": {"subagent_type": "gsd-phase-researcher", "description": "Research Phase 1",
                                        "prompt": "Research phase 1. " + sub}}

    proc = subprocess.run([str(claude_bin), "-p", "Plan phase 1. " + steps(agent), "--plugin-dir", str(ROOT),
                           "--output-format", "json", "--no-session-persistence", "--allowedTools", "Agent"],
                          env=env, cwd=project, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    subs = [b for b in fake_api.messages() if "Research phase 1." in request_text(b)
            and not any(t.get("name") == "Agent" for t in b["tools"])]
    assert subs, "the researcher never made a request"
    first = request_text(subs[0]) + json.dumps(subs[0].get("system"))
    assert "gsd-research tools run through Bash" in first
    assert ("`perplexity`: `gsd-research deep" in first and "research-store put" in first) == has_map
    docs = result_json(tool_results(subs[-1])[0])
    assert docs["success"] is True and docs["metadata"]["library_id"] == "/facebook/react"


@pytest.mark.e2e
@pytest.mark.parametrize("line", list(LINES))
def test_gsd_installs_and_updates_keep_the_marketplace_plugin_enabled(claude_bin, tmp_path, line):
    from tests.e2e.plugin_fixtures import install_from_clone

    inst = install_from_clone(claude_bin, tmp_path, {})

    run_gsd_installer(line, inst.home)
    run_gsd_installer(line, inst.home)  # its update rewrites settings.json and deletes agents/gsd-*

    settings = json.loads((inst.home / ".claude" / "settings.json").read_text())
    assert settings.get("enabledPlugins", {}).get("research@gsd-research") is True
    assert "research@gsd-research" in inst.cli("plugin", "list")
