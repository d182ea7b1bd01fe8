"""Where `search --report PATH` may write: inside the project (cwd) or GSD_RESEARCH_HOME, unless --allow-outside."""

from __future__ import annotations

import os

import pytest

from gsd_research.search import reports
from tests.conftest import assert_no_traceback


@pytest.fixture
def outside(tmp_path):
    """A folder beside the project, not inside it."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("spelling", ["file", "folder", "new-folder"])
def test_report_outside_the_project_is_refused_before_searching(cli, tavily, workdir, outside, spelling):
    target = {"file": outside / "deep" / "er" / "r.md", "folder": outside, "new-folder": outside / "new"}[spelling]
    arg = str(target) + ("/" if spelling == "new-folder" else "")

    result = cli("search", "EV market", f"--report={arg}")

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"
    assert "outside" in result.json["error"]["message"]
    assert any("--allow-outside" in s for s in result.json["error"]["suggestions"])
    assert tavily.hits("/tavily") == []  # refused before a search was paid for
    assert list(outside.iterdir()) == []  # no folder created anywhere
    assert_no_traceback(result)


def test_allow_outside_writes_there(cli, tavily, workdir, outside):
    result = cli("search", "EV market", f"--report={outside / 'ev.md'}", "--allow-outside")

    assert result.code == 0, result.json
    assert (outside / "ev.md").is_file() and result.json["report"] == str((outside / "ev.md").resolve())


def test_absolute_paths_inside_the_project_and_the_home_are_fine(cli, tavily, workdir, home):
    inside = cli("search", "EV market", f"--report={workdir / 'notes' / 'ev.md'}")
    in_home = cli("search", "EV market", f"--report={home / 'reports' / 'ev.md'}")

    assert inside.code == 0 and (workdir / "notes" / "ev.md").is_file()
    assert in_home.code == 0 and (home / "reports" / "ev.md").is_file()


def test_a_symlink_inside_the_project_cannot_lead_outside(cli, tavily, workdir, outside):
    os.symlink(outside, workdir / "research")

    via_link = cli("search", "EV market", "--report")  # the default folder research/ is the link
    explicit = cli("search", "EV market", "--report=research/x.md")

    assert via_link.code == 2 and explicit.code == 2
    assert list(outside.iterdir()) == []


def test_plan_report_path_applies_the_policy(tmp_path):
    project = tmp_path / "p"
    project.mkdir()

    with pytest.raises(reports.UsageError):
        reports.plan_report_path(str(tmp_path / "x.md"), "q", project)
    assert reports.plan_report_path(str(tmp_path / "x.md"), "q", project, anywhere=True) == (tmp_path, "x")
