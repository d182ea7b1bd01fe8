"""The usage ledger and `gsd-research usage`: totals per provider and per day, --since, robustness."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from gsd_research.core import usage_ledger

NOW = datetime.now(timezone.utc)
TODAY = NOW.date()


def seed_ledger() -> None:
    usage_ledger.record("perplexity", "sonar-deep-research", 100, 2000, 0.5, "deep", when=NOW)
    usage_ledger.record("perplexity", "sonar-deep-research", 50, 1000, 0.25, "jobs worker", when=NOW,
                        cost_source="estimated")
    usage_ledger.record("tavily", None, 0, 0, 0.008, "search", when=NOW)
    usage_ledger.record("perplexity", "sonar-deep-research", 10, 10, 1.0, "deep", when=NOW - timedelta(days=3))
    usage_ledger.record("gemini", "gemini-2.5-flash", 400, 40, 0.001, "fetch", when=NOW - timedelta(days=10))


def test_usage_totals_per_provider_and_per_day(cli):
    seed_ledger()

    result = cli("usage")

    doc = result.json
    assert result.code == 0 and doc["command"] == "usage" and doc["since"] is None
    assert doc["totals"]["calls"] == 5 and doc["totals"]["cost_usd"] == pytest.approx(1.759)
    assert doc["totals"]["estimated_calls"] == 1
    providers = {p["provider"]: p for p in doc["providers"]}
    assert providers["perplexity"] == {"provider": "perplexity", "calls": 3, "tokens_in": 160, "tokens_out": 3010,
                                       "cost_usd": 1.75}
    assert providers["tavily"]["calls"] == 1 and providers["gemini"]["tokens_in"] == 400
    assert [d["date"] for d in doc["days"]] == [TODAY.isoformat(), (TODAY - timedelta(days=3)).isoformat(),
                                                (TODAY - timedelta(days=10)).isoformat()]
    assert doc["days"][0]["cost_usd"] == pytest.approx(0.758)
    assert doc["days"][0]["providers"]["perplexity"]["calls"] == 2
    assert doc["today"]["spent_usd"] == pytest.approx(0.758) and doc["today"]["budget_usd"] is None


@pytest.mark.parametrize("since, calls", [("7d", 4), ("today", 3), ("1d", 3), (None, 5)])
def test_since_filters_by_utc_day(cli, since, calls):
    seed_ledger()

    doc = cli("usage", *(["--since", since] if since else [])).json

    assert doc["totals"]["calls"] == calls


def test_since_takes_an_iso_date(cli):
    seed_ledger()

    doc = cli("usage", "--since", (TODAY - timedelta(days=3)).isoformat()).json

    assert doc["totals"]["calls"] == 4 and doc["since"] == (TODAY - timedelta(days=3)).isoformat()


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", "-3d", "7x"])
def test_bad_since_is_a_usage_error(cli, bad):
    result = cli("usage", "--since", bad)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"


def test_empty_ledger_is_all_zero(cli, home):
    doc = cli("usage").json

    assert doc["totals"] == {"calls": 0, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "estimated_calls": 0}
    assert doc["providers"] == [] and doc["days"] == []
    assert doc["metadata"]["ledger"] == str(home / "usage" / "ledger.jsonl")


def test_budget_is_reported_with_what_remains(cli, home):
    (home / "config.yaml").write_text((home / "config.yaml").read_text() + "deep:\n  daily_budget_usd: 2\n")
    seed_ledger()

    doc = cli("usage").json

    assert doc["today"]["budget_usd"] == 2 and doc["today"]["remaining_usd"] == pytest.approx(1.242)


def test_what_remains_of_the_budget_leaves_out_what_queued_jobs_hold(cli, fake, home, monkeypatch):
    from tests.deep_fixtures import configure

    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-test-key")
    configure(home, deep={"daily_budget_usd": 2, "autostart": False})
    assert cli("deep", "--async", "held until it runs").code == 0

    today = cli("usage").json["today"]

    assert today["held_usd"] == pytest.approx(0.464, abs=0.01)
    assert today["remaining_usd"] == pytest.approx(2 - today["held_usd"])


def test_a_ref_already_in_the_ledger_is_not_written_again(home):
    usage_ledger.record("perplexity", "m", 1, 1, 0.1, "jobs worker", ref="job-1:remote-1")
    usage_ledger.record("perplexity", "m", 1, 1, 0.1, "jobs worker", ref="job-1:remote-12")  # not a prefix match
    usage_ledger.record("perplexity", "m", 1, 1, 0.1, "deep", ref="job-1:remote-1")  # a crash-retried write

    lines = usage_ledger.ledger_path().read_text().splitlines()

    assert [json.loads(line)["ref"] for line in lines] == ["job-1:remote-1", "job-1:remote-12"]


def test_corrupt_lines_are_skipped_and_refs_count_once(cli, home):
    usage_ledger.record("perplexity", "m", 1, 1, 0.1, "jobs worker", ref="job-1:remote-1")
    usage_ledger.record("perplexity", "m", 1, 1, 0.1, "jobs worker", ref="job-1:remote-1")  # a crash-retried write
    with usage_ledger.ledger_path().open("a") as fh:
        fh.write('{"provider": "perplexity", "cost_usd": 9')  # a line cut short
        fh.write("\n[1, 2]\n")
    usage_ledger.record("perplexity", "m", 1, 1, 0.2, "deep")

    doc = cli("usage").json

    assert doc["totals"]["calls"] == 2 and doc["totals"]["cost_usd"] == pytest.approx(0.3)
    assert usage_ledger.spent_on() == pytest.approx(0.3)


def test_usage_respects_max_tokens_dropping_oldest_days(cli):
    for day in range(60):
        usage_ledger.record("perplexity", "m", 10, 10, 0.01, "deep", when=NOW - timedelta(days=day))

    doc = cli("usage", "--max-tokens", "600").json

    assert doc["metadata"]["tokens_used"] <= 600 and doc["metadata"]["truncated"] is True
    assert doc["totals"]["calls"] == 60 and len(doc["days"]) == doc["metadata"]["days_returned"] < 60
    assert doc["days"][0]["date"] == TODAY.isoformat()


def test_record_scrubs_keys(monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", "pplx-canary-ledger-0001")

    usage_ledger.record("perplexity", "pplx-canary-ledger-0001", 1, 1, 0.0, "deep",
                        extra={"note": "key pplx-canary-ledger-0001"})

    text = usage_ledger.ledger_path().read_text()
    assert "pplx-canary-ledger-0001" not in text and text.count("***") == 2


_WRITER = """
import sys
from gsd_research.core import usage_ledger
for i in range(int(sys.argv[2])):
    usage_ledger.record("p" + sys.argv[1], "m" * 300, i, i, 0.001, "bench", ref=f"{sys.argv[1]}-{i}")
"""


def test_concurrent_writers_never_interleave_lines():
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(n), "150"]) for n in range(6)]
    for proc in procs:
        assert proc.wait(timeout=60) == 0

    lines = usage_ledger.ledger_path().read_text().splitlines()

    assert len(lines) == 900 and all(json.loads(line)["model"] == "m" * 300 for line in lines)
    assert usage_ledger.summarize()["totals"]["calls"] == 900


@pytest.mark.parametrize("pretty", [[], ["--json-pretty"]])
def test_usage_never_prints_more_than_max_tokens(cli, pretty, cl100k):
    """Regression: with every day dropped and still over budget, usage printed 159 tokens for --max-tokens 150."""
    seed_ledger()
    for budget in ("100", "150", "250"):
        r = cli("usage", "--max-tokens", budget, *pretty)
        doc = json.loads(r.stdout)
        if doc["success"]:
            assert len(cl100k.encode(r.stdout)) <= int(budget)
            assert doc["metadata"]["tokens_used"] <= int(budget)
        else:
            assert r.code == 2 and doc["error"]["code"] == "USAGE_ERROR" and doc["error"]["suggestions"]
    assert not json.loads(cli("usage", "--max-tokens", "150", *pretty).stdout)["success"]
