"""SubagentStart for GSD's researchers on each GSD line: GSD Core's research-plan providers mapped to our commands,
each line's year rule; the line detected from the project and the GSD install beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hooks_fixtures import context, hook, subagent_start

CORE_MAP = ["`context7`, `ref`: `gsd-research docs", "`tavily`, `exa`, `brave`, `websearch`: `gsd-research search",
            "`perplexity`: `gsd-research deep \"QUERY\" --async`, then `gsd-research jobs wait ID",
            "`firecrawl`, `jina`, `webfetch`, `scrape`: `gsd-research fetch URL", "research-store put",
            "`--confidence` what `classify-confidence` says"]


def _project(tmp_path: Path, installed: str | None, where: str = "user") -> Path:
    project = tmp_path / "app"
    (project / ".planning").mkdir(parents=True)
    (project / ".planning" / "config.json").write_text("{}")
    if installed:
        base = Path(os.environ["HOME"]) / ".claude" if where == "user" else project / ".claude"
        (base / installed).mkdir(parents=True)
    return project


@pytest.mark.parametrize("installed, where, has_map, year_note", [
    ("gsd-core", "user", True, "GSD Core's own tip agrees: never add a year to a query."),
    ("gsd-core", "project", True, "GSD Core's own tip agrees: never add a year to a query."),
    ("get-shit-done", "user", False, "GSD's own tip agrees: never add a year to a query."),
    (None, "user", False, None),
])
def test_gsd_researchers_get_their_lines_guidance(home, tmp_path, installed, where, has_map, year_note):
    project = _project(tmp_path, installed, where)

    text = context(hook("subagent-start", {**subagent_start("gsd-phase-researcher"), "cwd": str(project)}))

    assert all(item in text for item in CORE_MAP) == has_map
    assert ("GSD Core:" in text) == has_map
    assert (year_note in text) if year_note else "own tip agrees" not in text


def test_a_folder_without_planning_gets_no_line_guidance(home, tmp_path):
    (Path(os.environ["HOME"]) / ".claude" / "gsd-core").mkdir(parents=True)

    text = context(hook("subagent-start", {**subagent_start("gsd-phase-researcher"), "cwd": str(tmp_path)}))

    assert "GSD Core:" not in text and "gsd-research docs" in text


def test_core_researchers_guidance_stays_in_budget(home, tmp_path, cl100k):
    project = _project(tmp_path, "gsd-core")

    text = context(hook("subagent-start", {**subagent_start("gsd-project-researcher"), "cwd": str(project)}))

    assert len(cl100k.encode(text)) <= 700
