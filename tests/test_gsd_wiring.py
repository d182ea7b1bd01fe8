"""--gsd-project on each GSD line: one short skill for every researcher type, in the agent_skills form the
project's line resolves; an earlier install's seven entries retired; the GSD researcher's added reading in budget."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.hooks_fixtures import PROVIDERS_TEXT_EVENT, context, hook
from tests.install_fixtures import install

RESEARCHERS = ["gsd-phase-researcher", "gsd-project-researcher", "gsd-ui-researcher", "gsd-advisor-researcher",
               "gsd-ai-researcher", "gsd-domain-researcher"]


def _project(root: Path, line_folder: str | None) -> Path:
    project = root / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text('{"agent_skills": {"gsd-executor": ["skills/mine"]}}\n')
    if line_folder:
        (Path(os.environ["HOME"]) / ".claude" / line_folder).mkdir(parents=True, exist_ok=True)
    return project


def _skills(project: Path) -> dict:
    return json.loads((project / ".planning" / "config.json").read_text())["agent_skills"]


@pytest.mark.parametrize("line_folder, flags, entry", [
    ("get-shit-done", [], "global:research-tools"),
    ("get-shit-done", ["--no-claude"], "global:research-tools"),
    ("gsd-core", [], "global:research-tools"),
    ("gsd-core", ["--no-claude"], "global:research:research-tools"),
])
def test_each_line_gets_one_skill_in_the_form_it_resolves(user_home, tmp_path, line_folder, flags, entry):  # noqa: F811
    project = _project(tmp_path, line_folder)

    proc = install("--skip-venv", "--no-demo", *flags, "--gsd-project", str(project))

    assert proc.returncode == 0, proc.stderr
    skills = _skills(project)
    assert {agent: skills.get(agent) for agent in RESEARCHERS} == {agent: [entry] for agent in RESEARCHERS}
    assert skills["gsd-executor"] == ["skills/mine"]
    if entry == "global:research-tools":  # resolved under ~/.claude/skills/ by both lines
        assert (user_home / ".claude" / "skills" / "research-tools" / "SKILL.md").is_file()


def test_reinstall_retires_the_seven_skill_entries_of_an_earlier_install(user_home, tmp_path):  # noqa: F811
    project = _project(tmp_path, "get-shit-done")
    assert install("--skip-venv", "--no-demo", "--gsd-project", str(project)).returncode == 0
    manifest_path = user_home / ".local" / "share" / "gsd-research" / "install-manifest.json"
    manifest = json.loads(manifest_path.read_text())
    old = ["global:library-docs", "global:web-search", "global:deep-research"]
    manifest["projects"][str(project.resolve())]["skills"] = old  # as an earlier version recorded them
    manifest_path.write_text(json.dumps(manifest))
    config = project / ".planning" / "config.json"
    cfg = json.loads(config.read_text())
    cfg["agent_skills"]["gsd-phase-researcher"] = old
    config.write_text(json.dumps(cfg))

    assert install("--skip-venv", "--no-demo", "--gsd-project", str(project)).returncode == 0

    assert _skills(project)["gsd-phase-researcher"] == ["global:research-tools"]
    assert install("--uninstall").returncode == 0
    assert config.read_text() == '{"agent_skills": {"gsd-executor": ["skills/mine"]}}\n'


def test_gsd_researchers_added_reading_is_at_most_1500_tokens(home, tmp_path, cl100k):
    project = _project(tmp_path, "gsd-core")
    guidance = context(hook("subagent-start", {**PROVIDERS_TEXT_EVENT, "cwd": str(project)}))
    skill = (ROOT / "skills" / "research-tools" / "SKILL.md").read_text()

    added = len(cl100k.encode(guidance)) + len(cl100k.encode(skill))

    print(f"GSD Core researcher's added reading: {added} cl100k tokens")
    assert "GSD Core:" in guidance and added <= 1500
