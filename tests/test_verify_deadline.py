"""`verify --timeout`: one deadline for the whole check, slow sources read side by side, late ones unreachable."""

from __future__ import annotations

import time

import pytest

from tests.fakes.pages import ARTICLE

QUOTE = "installs with pip on Python 3.10 and newer"


@pytest.fixture
def slow(fake, monkeypatch):
    """slow(name, delay) -> the URL of a copy of the article that answers after `delay` seconds."""
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    replies = fake.state.setdefault("replies", {})

    def make(name: str, delay: float) -> str:
        replies[name] = {"body": ARTICLE, "delay": delay}
        return f"{fake.url}/pages/reply/{name}"

    return make


def write(tmp_path, lines: list[str]):
    path = tmp_path / "RESEARCH.md"
    path.write_text("\n\n".join(lines) + "\n")
    return path


def test_distinct_slow_sources_are_read_side_by_side_within_the_deadline(cli, slow, tmp_path):
    urls = [slow(f"slow{i}", 1.2) for i in range(4)]  # 4.8 s one after the other
    path = write(tmp_path, [f'Source {i} says the toolkit "{QUOTE}" [CITED: {u}].' for i, u in enumerate(urls)])

    started = time.monotonic()
    doc = cli("verify", str(path), "--timeout", "3").json
    elapsed = time.monotonic() - started

    assert [c["verdict"] for c in doc["claims"]] == ["quote_found"] * 4
    assert elapsed < 3.5 and doc["metadata"]["timeout_s"] == 3


def test_a_source_that_answers_too_late_is_unreachable_with_the_reason(cli, slow, fake, tmp_path):
    late, quick = slow("tarpit", 6), slow("quick", 0)
    path = write(tmp_path, [f'The tarpit says "{QUOTE}" [CITED: {late}].',
                            f'The quick page says "{QUOTE}" [CITED: {quick}].'])

    started = time.monotonic()
    doc = cli("verify", str(path), "--timeout", "2").json
    elapsed = time.monotonic() - started

    claims = {c["line"]: c for c in doc["claims"]}
    assert elapsed < 3.5
    assert claims[1]["verdict"] == "unreachable" and claims[1]["error"]["code"] == "TIMEOUT"
    assert "2 s" in claims[1]["error"]["message"]
    assert claims[3]["verdict"] == "quote_found"
    assert doc["metadata"]["counts"]["not_found"] == 0


def test_sources_past_the_deadline_are_never_not_found(cli, slow, tmp_path):
    urls = [slow(f"late{i}", 3) for i in range(6)]  # more than the threads can take in 1.5 s
    path = write(tmp_path, [f'Page {i} says "{QUOTE}" [CITED: {u}].' for i, u in enumerate(urls)])

    started = time.monotonic()
    doc = cli("verify", str(path), "--timeout", "1.5").json

    assert time.monotonic() - started < 2.5
    assert [c["verdict"] for c in doc["claims"]] == ["unreachable"] * 6
    assert {c["error"]["code"] for c in doc["claims"]} == {"TIMEOUT"}


def test_the_timeout_must_be_positive(cli, tmp_path):
    path = write(tmp_path, ["Nothing cited."])
    result = cli("verify", str(path), "--timeout", "0")
    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"


def test_a_one_word_quote_is_too_short_to_check(cli, fake, tmp_path, monkeypatch):
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    path = write(tmp_path, [f'The guide calls the toolkit "late" in its install section [CITED: {fake.url}/pages/article].'])

    claim = cli("verify", str(path)).json["claims"][0]

    assert claim["verdict"] == "too_short" and claim["method"] == "none"
    assert "quote" in claim["note"] and "late" in claim["quote"]
