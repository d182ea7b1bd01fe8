"""`verify --timeout`: one deadline for the whole check, reading and scoring; what it leaves is unreachable
(sources) or unchecked (claims), never not_found. Deterministic: the deadline's clock is a fake one, or the
sources are tarpits far slower than the timeout; timings are in bench/verify_deadline.py."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from gsd_research.core.errors import TimeoutError_
from tests.fakes.pages import ARTICLE

QUOTE = "installs with pip on Python 3.10 and newer"


@pytest.fixture
def clock(monkeypatch):
    """The deadline's clock, frozen at 0 until a test moves it (now[0] += seconds)."""
    from gsd_research.verify import deadline

    now = [0.0]
    monkeypatch.setattr(deadline, "clock", lambda: now[0])
    return now


def write(tmp_path, lines: list[str]):
    path = tmp_path / "RESEARCH.md"
    path.write_text("\n\n".join(lines) + "\n")
    return path


def by_line(doc: dict) -> dict[int, dict]:
    return {c["line"]: c for c in doc["claims"]}


def test_claims_left_when_the_time_runs_out_are_unchecked(cli, clock, tmp_path, monkeypatch):
    from gsd_research.verify.verify import Verifier

    original = Verifier.check

    def one_second_each(self, claim):  # each check starts one second after the one before
        clock[0] += 1.0
        return original(self, claim)

    monkeypatch.setattr(Verifier, "check", one_second_each)
    path = write(tmp_path, [f'Widget fact {i} is "the best widget fact of all".' for i in range(7)]
                 + ["Widgets are fast [ASSUMED]."])

    result = cli("verify", str(path), "--timeout", "5")  # checks start until 4.25 s: the answer needs the rest

    verdicts = [c["verdict"] for c in sorted(result.json["claims"], key=lambda c: c["line"])]
    assert result.code == 0
    assert verdicts == ["no_source"] * 4 + ["unchecked"] * 3 + ["unverified"]  # an assumption costs nothing
    assert result.json["metadata"]["counts"] == {"no_source": 4, "unverified": 1, "unchecked": 3}
    assert result.json["metadata"]["tags"] == {"other": {"no_source": 4, "unchecked": 3},
                                               "ASSUMED": {"unverified": 1}}


def test_a_late_source_is_unreachable_and_leaves_the_other_claims_time(cli, pages, clock, tmp_path, monkeypatch):
    import gsd_research.read.api as read_api

    quick = pages.url + "/pages/article"
    cli("fetch", quick)  # in the memory: checked without reading

    def late(rt, url, stop_at=None):
        clock[0] += 80.0  # reading may use 75 of the 100 s
        raise TimeoutError_("Reading timed out")

    monkeypatch.setattr(read_api, "fetch_source", late)
    path = write(tmp_path, [f'The tarpit says "{QUOTE}" [CITED: {pages.url}/pages/reply/tarpit].',
                            f'The quick page says "{QUOTE}" [CITED: {quick}].'])

    doc = cli("verify", str(path), "--timeout", "100").json

    claims = by_line(doc)
    assert claims[1]["verdict"] == "unreachable" and claims[1]["error"]["code"] == "TIMEOUT"
    assert "--timeout of 100 s" in claims[1]["error"]["message"]
    assert claims[3]["verdict"] == "quote_found" and claims[3]["origin"] == "memory"


def test_sources_past_the_deadline_are_unreachable_never_not_found(cli, pages, tmp_path):
    replies = pages.state.setdefault("replies", {})
    urls = []
    for i in range(5):  # more than the reading threads, each far slower than the timeout
        replies[f"tarpit{i}"] = {"body": ARTICLE, "delay": 8}
        urls.append(f"{pages.url}/pages/reply/tarpit{i}")
    path = write(tmp_path, [f'Page {i} says "{QUOTE}" [CITED: {u}].' for i, u in enumerate(urls)])

    result = cli("verify", str(path), "--timeout", "1")

    assert result.code == 0
    assert [c["verdict"] for c in result.json["claims"]] == ["unreachable"] * 5
    assert {c["error"]["code"] for c in result.json["claims"]} == {"TIMEOUT"}


def test_distinct_sources_are_read_side_by_side(monkeypatch):
    import gsd_research.read.api as read_api
    from gsd_research.core.config import Config
    from gsd_research.verify.deadline import Deadline
    from gsd_research.verify.reading import THREADS, Reader

    together = threading.Barrier(THREADS, timeout=20)  # broken unless THREADS reads are in flight at once

    def fetch(rt, url, stop_at=None):
        together.wait()
        return f"read {url}"

    monkeypatch.setattr(read_api, "fetch_source", fetch)
    urls = [f"https://example.com/{i}" for i in range(THREADS)]
    rt = SimpleNamespace(config=Config(), no_cache=False, max_tokens=2000)

    read = dict(Reader(rt, Deadline(60)).results(urls))

    assert read == {u: f"read {u}" for u in urls}


def test_the_timeout_must_be_positive(cli, tmp_path):
    path = write(tmp_path, ["Nothing cited."])
    result = cli("verify", str(path), "--timeout", "0")
    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"


def test_distinct_packages_are_looked_up_side_by_side(monkeypatch):
    from gsd_research.core.config import Config
    from gsd_research.verify.deadline import Deadline
    from gsd_research.verify.registries import THREADS, Registries

    together = threading.Barrier(THREADS, timeout=20)  # broken unless THREADS look-ups are in flight at once

    def get(self, http, registry, url):
        together.wait()
        return ["1.0.0"], "1.0.0"

    monkeypatch.setattr(Registries, "_get", get)
    rt = SimpleNamespace(config=Config(), no_cache=False, max_tokens=2000, http=None)
    registries = Registries(rt, Deadline(60))

    registries.start([("npm", f"`widget{i}` 1.0.0") for i in range(THREADS)])

    assert [registries.check("npm", f"`widget{i}` 1.0.0")["verdict"] for i in range(THREADS)] == [
        "registry_confirmed"] * THREADS
