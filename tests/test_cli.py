"""The CLI edge: one JSON document on stdout for every outcome, the right exit status, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from gsd_research import __version__
from tests.conftest import BIN, assert_no_traceback


def test_version_is_json(cli):
    result = cli("--version")

    assert result.code == 0 and result.json == {"success": True, "command": "version", "version": __version__}


def test_no_command_is_a_usage_error_listing_commands(cli):
    result = cli()

    assert result.code == 2
    assert result.json["error"]["code"] == "USAGE_ERROR" and "docs" in result.json["error"]["message"]


def test_unknown_command_is_a_usage_error(cli):
    result = cli("frobnicate")

    assert result.code == 2 and "frobnicate" in result.json["error"]["message"]
    assert_no_traceback(result)


def test_unknown_option_names_the_command_and_its_help(cli):
    result = cli("docs", "react", "hooks", "--bogus")

    assert result.code == 2
    assert result.json["command"] == "docs"
    assert result.json["error"]["suggestions"] == ["gsd-research docs --help"]


def test_bad_max_tokens_is_a_usage_error(cli):
    for value in ("50", "many"):
        result = cli("--max-tokens", value, "docs", "react", "hooks")
        assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"


@pytest.mark.parametrize("argv, command", [(["--help"], "help"), (["docs", "--help"], "docs"),
                                           (["cache", "stats", "-h"], "cache stats"), (["-h", "config"], "config")])
def test_help_is_one_json_document_when_piped(cli, argv, command):
    result = cli(*argv)

    doc = result.json
    assert result.code == 0 and doc["success"] is True and doc["command"] == command
    assert doc["help"].startswith("Usage: gsd-research")


def test_help_after_double_dash_is_an_argument(cli, fake):
    result = cli("docs", "react", "--", "--help")

    assert result.json["success"] is True and result.json["query"] == "--help"


def test_pretty_output_is_one_indented_document(cli, fake):
    result = cli("--json-pretty", "docs", "react", "hooks")

    assert result.stdout.startswith("{\n  ")
    doc = json.loads(result.stdout)
    assert doc["success"] is True and doc["metadata"]["tokens_used"] <= 2000


def test_global_options_work_after_the_subcommand_too(cli, fake):
    doc = cli("docs", "react", "hooks", "--max-tokens", "500").json

    assert doc["metadata"]["max_tokens"] == 500 and doc["metadata"]["tokens_used"] <= 500


def test_a_bug_becomes_internal_error_with_a_log_not_a_traceback(cli, fake, home, monkeypatch):
    def boom(*args, **kwargs):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr("gsd_research.core.budget.fit_results", boom)
    monkeypatch.setattr("gsd_research.docs.command.fit_results", boom)

    result = cli("docs", "react", "hooks")

    assert result.code == 1 and result.json["error"]["code"] == "INTERNAL_ERROR"
    assert "ZeroDivisionError" in result.json["error"]["message"]
    assert "Traceback" in (home / "logs" / "errors.log").read_text()
    assert_no_traceback(result)


def test_a_closed_stdout_pipe_gives_no_traceback(fake):
    proc = subprocess.run(f"'{BIN / 'gsd-research'}' docs react hooks | head -c 1", shell=True,
                          capture_output=True, text=True, env=dict(os.environ), timeout=60)

    assert proc.stdout == "{"
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_non_utf8_stdout_still_gets_utf8_json(fake):
    fake.add_fault("/api/v2/libs/search", "status", times=10, status=400,
                   body={"error": "bad", "message": "Ünïcödé — 東京 failure"})
    env = dict(os.environ, PYTHONIOENCODING="ascii")

    proc = subprocess.run([str(BIN / "gsd-research"), "docs", "react", "hooks"], capture_output=True,
                          env=env, timeout=60)

    doc = json.loads(proc.stdout.decode("utf-8"))
    assert "東京" in doc["error"]["details"]["provider_message"] and proc.returncode == 5
    assert b"Traceback" not in proc.stderr


def test_python_m_entry_point_works(fake):
    import sys

    proc = subprocess.run([sys.executable, "-m", "gsd_research", "--version"], capture_output=True, text=True,
                          timeout=60)

    assert json.loads(proc.stdout)["version"] == __version__


def test_unwritable_home_is_a_clear_error_not_internal(cli, tmp_path, monkeypatch):
    """Regression: GSD_RESEARCH_HOME that cannot hold state gave INTERNAL_ERROR with a 'retry' hint."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(blocker / "home"))
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-canary-1234567890")
    for args in (("jobs", "list"), ("config", "set", "cache.ttl.docs", "5"), ("deep", "q", "--async")):
        r = cli(*args)
        assert r.code == 1 and r.json["error"]["code"] == "STATE_NOT_WRITABLE", r.stdout
        assert str(blocker) in r.json["error"]["message"]
        assert any("GSD_RESEARCH_HOME" in s for s in r.json["error"]["suggestions"])
    doctor = cli("doctor", "--no-probe")
    assert doctor.code == 0 and any("GSD_RESEARCH_HOME" in p for p in doctor.json["problems"])


def test_other_os_errors_stay_internal_errors(cli, fake, monkeypatch):
    """Only failures inside GSD_RESEARCH_HOME become STATE_NOT_WRITABLE."""
    from gsd_research.docs import context7

    def boom(*a, **k):
        raise PermissionError(13, "Permission denied", "/etc/elsewhere")

    monkeypatch.setattr(context7.Context7, "resolve", boom)
    r = cli("docs", "react", "hooks")
    assert r.code == 1 and r.json["error"]["code"] == "INTERNAL_ERROR"
