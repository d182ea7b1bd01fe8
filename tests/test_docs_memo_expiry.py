"""docs/answer_memo: `cache clear --expired` removes the kept docs answers whose HTTP answers expired, and only those."""

from __future__ import annotations

import json
import os
import time

import pytest

from gsd_research.core.http_cache import cache_file
from gsd_research.docs import answer_memo
from tests.cache_fixtures import expire_entries


def kept_files():
    return sorted(answer_memo.memo_dir().glob("*.json"))


def entry(path) -> dict:
    return json.loads(path.read_text())


def http_answers() -> list:
    import requests_cache

    from gsd_research.core.http_cache import cache_file, safe_serializer

    answers = list(requests_cache.SQLiteCache(str(cache_file()), serializer=safe_serializer()).responses.values())
    assert len(answers) == 2  # the library search and the context
    return answers


def keep(cli, library: str, query: str):
    """Call docs twice (the second call, from the HTTP cache, keeps its answer); the kept file."""
    before = set(kept_files())
    cli("docs", library, query)
    assert cli("docs", library, query).json["metadata"]["cache_hit"] is True
    [path] = set(kept_files()) - before
    return path


def test_clear_expired_removes_the_kept_answers_of_expired_http_answers_and_keeps_fresh_ones(cli, fake, home):
    stale = keep(cli, "react", "hooks")
    assert expire_entries(cache_file()) == 2  # as if its TTL had run out
    stale.write_text(json.dumps(dict(entry(stale), expires=time.time() - 1)))
    fresh = keep(cli, "nextjs", "routing")

    doc = cli("cache", "clear", "--expired").json

    assert doc["removed"] == 2 and doc["docs_answers_removed"] == 1 and doc["expired_only"] is True
    assert kept_files() == [fresh] and cli("cache", "stats").json["entries"] == 2
    assert cli("cache", "clear", "--expired").json["docs_answers_removed"] == 0


def test_the_recorded_expiry_is_the_earliest_of_the_http_answers_and_follows_a_refresh(cli, fake):
    path = keep(cli, "react", "hooks")
    recorded = entry(path)["expires"]
    assert isinstance(recorded, float) and 0 < recorded - time.time() <= 86400
    assert recorded == min(r.expires.timestamp() for r in http_answers())

    answer = answer_memo.get(path.stem, recorded + 600)  # served from refreshed HTTP answers

    assert answer is not None and entry(path)["expires"] == recorded + 600 and entry(path)["answer"] == answer
    answer_memo.get(path.stem, None)  # refreshed answers that never expire
    assert entry(path)["expires"] is None
    assert answer_memo.clear(expired_only=True, ttl=0) == 0 and kept_files() == [path]


def test_an_answer_kept_before_expiries_were_recorded_goes_once_older_than_the_docs_ttl(cli, fake):
    path = keep(cli, "react", "hooks")
    legacy = {k: v for k, v in entry(path).items() if k != "expires"}
    path.write_text(json.dumps(legacy))
    os.utime(path, (time.time() - 100, time.time() - 100))

    assert answer_memo.clear(expired_only=True, ttl=-1) == 0  # a docs TTL that never expires
    assert answer_memo.clear(expired_only=True, ttl=3600) == 0 and kept_files() == [path]
    assert answer_memo.clear(expired_only=True, ttl=50) == 1 and not kept_files()


@pytest.mark.parametrize("expires", ["soon", True, [1], float("nan"), float("inf"), float("-inf")])
def test_an_entry_with_a_damaged_expiry_is_removed(cli, fake, expires):
    path = keep(cli, "react", "hooks")
    path.write_text(json.dumps(dict(entry(path), expires=expires)))

    assert cli("cache", "clear", "--expired").json["docs_answers_removed"] == 1 and not kept_files()


@pytest.mark.parametrize("planted", ["damaged", "nested", "other key", "symlink", "fifo", "directory"])
def test_clear_expired_removes_what_is_no_answer_of_ours_and_never_follows_a_link(cli, fake, tmp_path, planted):
    good = keep(cli, "react", "hooks")
    folder = answer_memo.memo_dir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps(dict(entry(good), key="planted")))
    path = folder / "planted.json"
    if planted == "damaged":
        path.write_text("{not json")
    elif planted == "nested":  # deeper than the JSON parser goes: a RecursionError, not a ValueError
        path.write_text("[" * 50_000 + "]" * 50_000)
        path.chmod(0o600)  # private, as ours are: it is read
    elif planted == "other key":
        path.write_text(json.dumps(entry(good)))  # the key inside names another file
    elif planted == "symlink":
        path.symlink_to(outside)
    elif planted == "fifo":
        os.mkfifo(path, 0o600)
    else:
        path.mkdir()

    removed = cli("cache", "clear", "--expired").json["docs_answers_removed"]

    assert kept_files() == ([good, path] if planted == "directory" else [good])
    assert removed == (0 if planted == "directory" else 1)
    assert json.loads(outside.read_text())["key"] == "planted"  # a link's target is left as it was


def test_clear_expired_leaves_a_writers_temporary_file_and_removes_one_a_killed_writer_left(cli, fake):
    keep(cli, "react", "hooks")
    folder = answer_memo.memo_dir()
    recent, left = folder / ".a.1.tmp", folder / ".b.2.tmp"
    for path in (recent, left):
        path.write_text("{}")
    os.utime(left, (time.time() - 2 * answer_memo.TMP_GRACE, time.time() - 2 * answer_memo.TMP_GRACE))

    assert cli("cache", "clear", "--expired").json["docs_answers_removed"] == 0

    assert recent.exists() and not left.exists()


def test_clear_expired_removes_nothing_from_a_folder_that_is_not_ours_alone_nor_through_a_link(cli, fake, tmp_path):
    path = keep(cli, "react", "hooks")
    path.write_text(json.dumps(dict(entry(path), expires=1)))  # expired long ago
    folder = answer_memo.memo_dir()
    folder.chmod(0o770)
    assert cli("cache", "clear", "--expired").json["docs_answers_removed"] == 0 and path.exists()

    folder.chmod(0o700)
    elsewhere = tmp_path / "elsewhere"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere, target_is_directory=True)
    assert cli("cache", "clear", "--expired").json["docs_answers_removed"] == 0
    assert not folder.exists() and (elsewhere / path.name).exists()


def test_a_plain_clear_needs_no_ttl_and_a_bad_one_stops_expired_before_anything_is_removed(cli, fake, home):
    path = keep(cli, "react", "hooks")
    (home / "config.yaml").write_text("cache:\n  ttl:\n    docs: abc\n")

    refused = cli("cache", "clear", "--expired")

    assert refused.code == 2 and refused.json["error"]["code"] == "USAGE_ERROR", refused.stdout
    assert kept_files() == [path] and cli("cache", "stats").json["entries"] == 2  # nothing was removed
    cleared = cli("cache", "clear")
    assert cleared.code == 0 and cleared.json["docs_answers_removed"] == 1 and not kept_files(), cleared.stdout


def test_a_hand_edited_ttl_too_large_for_a_date_means_ten_years_not_an_internal_error(cli, fake, home):
    (home / "config.yaml").write_text("cache:\n  ttl:\n    docs: 1.0e+18\n    search: 1.0e+300\n")

    path = keep(cli, "react", "hooks")

    assert 9 * 365 * 86400 < entry(path)["expires"] - time.time() <= 10 * 365 * 86400
    cleared = cli("cache", "clear", "--expired")
    assert cleared.code == 0 and cleared.json["docs_answers_removed"] == 0 and kept_files() == [path], cleared.stdout
