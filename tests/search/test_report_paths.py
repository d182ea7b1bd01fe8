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


@pytest.mark.parametrize("name", ["r" * 300 + ".md", "research/" + "d" * 260 + "/r.md", "bad\nname.md",
                                  "research/tab\there.md", "line\rbreak.md"])
def test_an_overlong_or_control_character_name_is_a_usage_error_before_searching(cli, tavily, workdir, name):
    result = cli("search", "EV market", f"--report={name}")

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR", result.json
    assert tavily.hits("/tavily") == [] and list(workdir.iterdir()) == []
    assert_no_traceback(result)


def test_a_report_the_user_asked_for_gets_the_users_umask_and_state_stays_private(cli, tavily, workdir, home):
    previous = os.umask(0o022)
    try:
        project = cli("search", "EV market", "--report=out/ev.md").json
        private = cli("search", "EV market", f"--report={home / 'reports' / 'ev.md'}").json
    finally:
        os.umask(previous)

    assert project["success"] and private["success"]
    assert oct(os.stat(workdir / "out").st_mode & 0o777) == "0o755"
    assert oct(os.stat(workdir / "out" / "ev.md").st_mode & 0o777) == "0o644"
    assert oct(os.stat(home / "reports").st_mode & 0o777) == "0o700"
    assert oct(os.stat(home / "reports" / "ev.md").st_mode & 0o777) == "0o600"


def test_a_folder_swapped_for_a_link_outside_during_the_search_is_refused(cli, tavily, workdir, outside, monkeypatch):
    from gsd_research.search import command

    (workdir / "research").mkdir()
    real_chain = command.run_chain

    def swap_then_search(*args, **kwargs):
        os.rename(workdir / "research", workdir / "research.old")
        os.symlink(outside, workdir / "research")  # after the check, before the write
        return real_chain(*args, **kwargs)

    monkeypatch.setattr(command, "run_chain", swap_then_search)

    result = cli("search", "EV market", "--report=research/ev.md")

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR", result.json
    assert "changed during the search" in result.json["error"]["message"]
    assert list(outside.iterdir()) == []
