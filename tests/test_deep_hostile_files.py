"""Deep research against hostile files and answers: a symlink planted at a lock path is refused, never
followed; a remote request id that is not one (from Perplexity's answer or a job file) never reaches a URL."""

from __future__ import annotations

import json
import os
import stat

import pytest

from gsd_research.core.errors import GsdError
from tests.conftest import assert_no_traceback
from tests.deep_fixtures import CANARY, configure, enqueue, job_dirs, status_of

HOSTILE_IDS = ["../../v1/agent", "abc?x=1", "abc#frag", "a/b", "%2e%2e%2fsecret", "abc\n", " abc", "a.b",
               "x" * 129]


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


# -- remote ids ----------------------------------------------------------------------------------------
def _hostile_gets(fake) -> list[str]:
    return [r.path for r in fake.requests if r.method == "GET" and r.path.startswith("/perplexity/")
            and not r.path.rsplit("/", 1)[-1].replace("-", "").replace("_", "").isalnum()]


@pytest.mark.parametrize("rid", ["../../v1/agent", "abc?x=1", "a/b", "%2e%2e"])
def test_a_hostile_async_id_from_perplexity_fails_the_job_and_is_never_requested(cli, pplx, home, rid):
    pplx.add_fault("/perplexity/async/chat/completions", "status", status=200, method="POST",
                   body={"id": rid, "model": "sonar-deep-research", "created_at": 1754438400, "status": "CREATED"})

    result = cli("deep", "what is new in python")

    assert result.code == 5 and "not a Perplexity request id" in result.json["error"]["message"], result.stdout
    assert _hostile_gets(pplx) == [] and pplx.hits("/perplexity/v1/agent") == []
    assert rid not in result.stdout  # never repeated
    (job,) = job_dirs(home)
    status = json.loads((job / "status.json").read_text())
    assert status["status"] == "failed" and status["attempts"] == 1 and "remoteId" not in status
    assert len(pplx.hits("/perplexity/async/chat/completions", method="POST")) == 1  # not bought again


def test_a_hostile_agent_id_fails_the_job_and_is_never_requested(cli, fake, home, monkeypatch):
    monkeypatch.setenv("PERPLEXITY_API_KEY", CANARY)
    configure(home, deep={"api": "agent", "max_attempts": 3})
    fake.add_fault("/perplexity/v1/agent", "status", status=200, method="POST",
                   body={"id": "resp_1/../../async/chat/completions", "object": "response", "status": "queued"})

    result = cli("deep", "what is new in python")

    assert result.code == 5 and "not a Perplexity request id" in json.dumps(result.json["error"]), result.stdout
    assert _hostile_gets(fake) == [] and len(fake.hits("/perplexity/v1/agent", method="POST")) == 1


@pytest.mark.parametrize("rid", HOSTILE_IDS)
def test_a_job_file_with_a_hostile_remote_id_fails_clearly(cli, pplx, home, rid):
    job_id = enqueue(cli, "what is new in python")
    path = home / "conversation-logs" / job_id / "status.json"
    status = json.loads(path.read_text())
    status.update(remoteId=rid, remoteApi="sonar", submitKey=f"{job_id}-1")
    path.write_text(json.dumps(status))

    cli("jobs", "worker", "--once")

    after = status_of(home, job_id)
    assert after["status"] == "failed" and "not a Perplexity request id" in after["error"]["message"]
    assert "remote_id" not in after["error"]
    assert _hostile_gets(pplx) == [] and pplx.hits("/perplexity/async/chat/completions", method="POST") == []
    shown = cli("jobs", "status", job_id)
    assert "not a Perplexity request id" in shown.stdout
    if len(rid) > 3:
        assert rid.strip() not in json.dumps(shown.json.get("error") or shown.json.get("job", {}).get("error"))


def test_a_real_shaped_id_is_accepted(cli, pplx):
    from gsd_research.deep.perplexity import checked_id

    assert checked_id("d1a0c5e6-8f1b-4f63-9a1e-3a9a5f0f2b7c") == "d1a0c5e6-8f1b-4f63-9a1e-3a9a5f0f2b7c"
    assert checked_id("resp_0123456789abcdefABCD") == "resp_0123456789abcdefABCD"
    result = cli("deep", "what is new in python")
    assert result.code == 0 and result.json["success"] is True, result.stdout


@pytest.mark.parametrize("rid", HOSTILE_IDS)
def test_texts_about_a_job_never_repeat_a_hostile_remote_id(rid):
    from gsd_research.deep.command import revived_note
    from gsd_research.deep.perplexity import shown_id
    from gsd_research.deep.questions import resume_hint

    status = {"status": "failed", "remoteId": rid, "remoteApi": "sonar", "revivedAt": "2026-11-24T00:00:00Z",
              "error": {"code": "NETWORK_ERROR", "message": "x"}}
    assert shown_id(rid) is None
    assert rid not in revived_note(status) and rid.strip() not in resume_hint(status)
    good = "d1a0c5e6-8f1b-4f63-9a1e-3a9a5f0f2b7c"
    assert shown_id(good) == good and good in revived_note({**status, "remoteId": good})


def test_the_embedding_workers_lock_is_never_followed_through_a_symlink(home, victim):
    from gsd_research.researcher import embed_worker

    lock = embed_worker._dir("research-memory") / "embed.lock"
    _plant(lock, victim)

    with pytest.raises(GsdError) as err:
        with embed_worker._lock("research-memory"):
            pass
    assert err.value.code == "STATE_UNSAFE" and victim.read_text() == "precious\n"
