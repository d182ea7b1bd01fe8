"""Deep research against hostile files: a symlink planted at a lock path is refused, never followed."""

from __future__ import annotations

import os
import stat

import pytest

from gsd_research.core.errors import GsdError
from tests.conftest import assert_no_traceback
from tests.test_deep import CANARY, configure


@pytest.fixture
def pplx(fake, home, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home, deep={"max_attempts": 3})
    return fake


# -- lock files ----------------------------------------------------------------------------------------
@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim.txt"
    path.write_text("precious\n")
    return path


def _plant(link, target) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
def test_file_lock_refuses_a_planted_symlink(tmp_path, victim, dangling):
    from gsd_research.deep.files import file_lock

    target = tmp_path / "would-be-created" if dangling else victim
    lock = tmp_path / "jobs" / "by-question" / "k.lock"
    _plant(lock, target)

    with pytest.raises(GsdError) as caught, file_lock(lock):
        pass

    assert caught.value.code == "STATE_UNSAFE" and "symbolic link" in caught.value.message
    assert victim.read_text() == "precious\n" and not (tmp_path / "would-be-created").exists()
    assert lock.is_symlink()  # refused, left for the user to look at


def test_the_job_counter_is_never_written_through_a_symlink(tmp_path, victim):
    from gsd_research.deep.store import JobStore

    store = JobStore(tmp_path)
    _plant(store.control / "seq", victim)

    with pytest.raises(GsdError) as caught:
        store.next_seq()

    assert caught.value.code == "STATE_UNSAFE" and victim.read_text() == "precious\n"


def test_a_run_lock_through_a_symlink_is_refused(tmp_path, victim):
    from gsd_research.deep.store import JobStore

    store = JobStore(tmp_path)
    job_dir = store.dir("dr-20260101-000000000-00000000")
    _plant(job_dir / ".run", tmp_path / "elsewhere.run")

    with pytest.raises(GsdError) as caught:
        store.claim("dr-20260101-000000000-00000000")

    assert caught.value.code == "STATE_UNSAFE" and not (tmp_path / "elsewhere.run").exists()


def test_a_fifo_at_a_lock_path_is_refused_without_blocking(tmp_path):
    from gsd_research.deep.files import file_lock

    lock = tmp_path / "worker.lock"
    os.mkfifo(lock, 0o600)

    with pytest.raises(GsdError) as caught, file_lock(lock):
        pass

    assert caught.value.code == "STATE_UNSAFE" and "regular file" in caught.value.message


def test_lock_files_are_created_private_and_still_lock(tmp_path):
    from gsd_research.deep.files import file_lock

    lock = tmp_path / "jobs" / "worker.lock"
    old = os.umask(0o022)
    try:
        with file_lock(lock) as got, file_lock(lock, blocking=False) as again:
            assert got is True and again is False  # one open file each: the second sees it held
    finally:
        os.umask(old)

    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


def test_deep_with_a_planted_counter_symlink_answers_state_unsafe(cli, pplx, home, victim):
    _plant(home / "jobs" / "seq", victim)

    result = cli("deep", "--async", "what is new in python")

    assert result.code == 1 and result.json["error"]["code"] == "STATE_UNSAFE", result.stdout
    assert str(home / "jobs" / "seq") in result.json["error"]["message"]
    assert victim.read_text() == "precious\n"
    assert_no_traceback(result)

