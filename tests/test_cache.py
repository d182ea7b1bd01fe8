"""The HTTP cache end to end: hits, --no-cache, parallel processes sharing one home, stats and clear, Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gsd_research.core.cache_stats import read_cache_stats, record_cache_event
from gsd_research.core.config import set_value
from gsd_research.core.http_cache import cache_file
from tests.cache_fixtures import expire_entries, free_port, redis_warning
from tests.conftest import BIN, assert_no_traceback


def test_repeated_docs_call_is_a_cache_hit_without_a_second_upstream_request(cli, fake):
    first = cli("docs", "react", "hooks").json
    upstream = len(fake.hits())

    second = cli("docs", "react", "hooks").json

    assert upstream == 2  # search + context
    assert len(fake.hits()) == upstream
    assert first["metadata"]["cache_hit"] is False and second["metadata"]["cache_hit"] is True
    assert first["results"] == second["results"]


def test_cache_written_by_another_process_is_a_hit(run_bin, cli, fake):
    run_bin("gsd-research", "docs", "react", "hooks")

    second = cli("docs", "react", "hooks")

    assert second.json["metadata"]["cache_hit"] is True
    assert len(fake.hits()) == 2


def test_no_cache_goes_upstream_and_refreshes(cli, fake):
    cli("docs", "react", "hooks")

    bypass = cli("--no-cache", "docs", "react", "hooks").json
    after_option = cli("docs", "react", "hooks", "--no-cache").json
    cached = cli("docs", "react", "hooks").json

    assert bypass["metadata"]["cache_hit"] is False and after_option["metadata"]["cache_hit"] is False
    assert cached["metadata"]["cache_hit"] is True
    assert len(fake.hits()) == 6


def test_different_queries_are_different_entries(cli, fake):
    cli("docs", "react", "hooks")
    cli("docs", "react", "state")

    assert len(fake.hits("/api/v2/context")) == 2


def test_error_answers_are_not_cached(cli, fake):
    fake.add_fault("/api/v2/context", "status", times=4, status=500)
    assert cli("docs", "react", "hooks").code == 5

    after = cli("docs", "react", "hooks")

    assert after.code == 0 and after.json["metadata"]["cache_hit"] is False


def test_parallel_processes_sharing_one_home_all_succeed_and_count_every_lookup(fake, home):
    env = dict(os.environ)
    argv = [str(BIN / "gsd-research"), "docs", "react", "parallel hooks"]

    def one(_):
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=90)

    with ThreadPoolExecutor(max_workers=4) as pool:  # four processes opening one cache at once
        runs = list(pool.map(one, range(4)))

    for proc in runs:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["success"] is True and doc["results"]
    stats = read_cache_stats()
    said = [proc.stderr for proc in runs if proc.stderr.strip()]
    assert stats["hits"] + stats["misses"] == 8, (stats, said)  # every lookup counted, none lost to a race
    assert len(fake.hits()) == stats["misses"]


def test_counters_add_up_under_concurrent_writers(home):
    code = "from gsd_research.core.cache_stats import record_cache_event\nfor _ in range(50): record_cache_event('hits')"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(6)]

    assert all(p.wait(timeout=60) == 0 for p in procs)
    assert read_cache_stats()["hits"] == 300


def test_cache_stats_reports_entries_size_and_hit_rate(cli, fake):
    cli("docs", "react", "hooks")
    cli("docs", "react", "hooks")
    cli("docs", "react", "hooks")

    doc = cli("cache", "stats").json

    assert doc["success"] is True and doc["command"] == "cache stats"
    assert doc["backend"] == "sqlite" and doc["path"] == str(cache_file())
    assert doc["entries"] == 2
    assert doc["size_bytes"] > 0
    assert (doc["hits"], doc["misses"]) == (4, 2)
    assert doc["hit_rate"] == pytest.approx(4 / 6, abs=1e-3)
    assert doc["metadata"]["tokens_used"] <= doc["metadata"]["max_tokens"]


def test_cache_stats_on_a_fresh_home_creates_nothing(cli, home):
    doc = cli("cache", "stats").json

    assert (doc["entries"], doc["size_bytes"], doc["hit_rate"]) == (0, 0, None)
    assert not cache_file().exists()


def test_cache_clear_empties_the_cache_and_resets_counters(cli, fake):
    cli("docs", "react", "hooks")
    cli("docs", "react", "hooks")

    cleared = cli("cache", "clear").json
    stats = cli("cache", "stats").json
    again = cli("docs", "react", "hooks").json

    assert cleared["removed"] == 2 and cleared["counters_reset"] is True
    assert (stats["entries"], stats["hits"], stats["misses"]) == (0, 0, 0)
    assert again["metadata"]["cache_hit"] is False


def test_cache_clear_expired_keeps_fresh_entries(cli, fake, home):
    cli("docs", "react", "hooks")
    assert expire_entries(cache_file()) == 2
    cli("docs", "nextjs", "routing")

    doc = cli("cache", "clear", "--expired").json

    assert doc["removed"] == 2 and doc["expired_only"] is True
    assert cli("cache", "stats").json["entries"] == 2


def test_cache_without_subcommand_is_a_usage_error_naming_its_commands(cli):
    result = cli("cache")

    assert result.code == 2
    assert result.json["error"]["code"] == "USAGE_ERROR"
    assert "clear, stats" in result.json["error"]["message"]
    assert_no_traceback(result)


def test_cache_stats_with_the_cache_off(cli, home):
    set_value("cache.backend", "off", home / "config.yaml")

    doc = cli("cache", "stats").json

    assert doc["backend"] == "off" and doc["entries"] == 0


def test_record_cache_event_survives_a_corrupt_counters_file(home):
    path = home / "cache" / "stats.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")

    record_cache_event("misses")

    assert read_cache_stats()["misses"] == 1


# -- Redis backend against a real redis-server ------------------------------------------------------------


@redis_warning
def test_redis_backend_serves_repeated_calls_from_redis(cli, fake, redis_home):
    first = cli("docs", "react", "hooks").json
    second = cli("docs", "react", "hooks").json

    assert first["metadata"]["cache_hit"] is False and second["metadata"]["cache_hit"] is True
    assert len(fake.hits()) == 2
    assert any(k.startswith(b"gsd_research") for k in redis_home.keys("*"))
    assert not cache_file().exists()  # nothing went to SQLite


@redis_warning
def test_redis_backend_shares_the_cache_between_homes(cli, fake, redis_home, monkeypatch, tmp_path):
    cli("docs", "react", "hooks")
    other = tmp_path / "teammate"
    other.mkdir()
    (other / "config.yaml").write_text((Path(os.environ["GSD_RESEARCH_HOME"]) / "config.yaml").read_text())
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(other))

    doc = cli("docs", "react", "hooks").json

    assert doc["metadata"]["cache_hit"] is True and len(fake.hits()) == 2


@redis_warning
def test_redis_cache_keeps_keys_out_and_stats_and_clear_work(cli, fake, redis_home, monkeypatch):
    monkeypatch.setenv("CONTEXT7_API_KEY", "ctx7sk-canary-redis-0001")
    cli("docs", "react", "hooks")
    cli("docs", "react", "hooks")

    stats = cli("cache", "stats").json
    dump = b"".join(_redis_values(redis_home))
    cleared = cli("cache", "clear").json

    assert fake.hits()[0].headers["authorization"] == "Bearer ctx7sk-canary-redis-0001"
    assert b"libs/search" in dump and b"canary" not in dump  # the stored requests are readable, keyless
    assert stats["backend"] == "redis" and stats["entries"] == 2 and stats["size_bytes"] > 0
    assert stats["hits"] == 2 and stats["misses"] == 2
    assert cleared["removed"] == 2
    assert cli("cache", "stats").json["entries"] == 0


def _redis_values(client) -> list[bytes]:
    """Every stored byte (keys and plain values) of the test server."""
    out = []
    for key in client.keys("*"):
        kind = client.type(key)
        out.append(key)
        if kind == b"string":
            out.append(client.get(key))
        elif kind == b"hash":
            out.extend(k + v for k, v in client.hgetall(key).items())
    return out


def test_redis_down_degrades_to_uncached_calls_with_a_warning(cli, fake, home):
    set_value("cache.backend", "redis", home / "config.yaml")
    set_value("cache.redis_url", f"redis://127.0.0.1:{free_port()}/0", home / "config.yaml")

    result = cli("docs", "react", "hooks")

    assert result.code == 0 and result.json["success"] is True
    assert "HTTP cache unavailable" in result.stderr
    assert_no_traceback(result)
