"""A cursor: an answer cut by its budget says how to get the rest (`metadata.next`); following it continues
exactly where the answer stopped, repeats nothing, and the last page has no `next`."""

from __future__ import annotations

import shlex

import pytest

from tests.fakes.tavily import FakeKeyless

SMALL = "400"
WIDE = "60000"


def fold(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def env(fake, monkeypatch):
    """Loopback pages readable, no model (extractive answers), a Tavily key, no real keyless backend."""
    from gsd_research.search import keyless

    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-test-cursor")
    monkeypatch.setattr(keyless, "make_backend", lambda cfg: FakeKeyless())
    return fake


def passages(doc: dict, key: str, text_key: str) -> list[str]:
    """The passages of one page, "+" marking the rest of the previous page's last one (a `continued` result,
    or the next page of one text)."""
    value = doc[key]
    if isinstance(value, str):
        return ["+" + value]
    return [("+" if r.get("continued") else "") + str(r[text_key]) for r in value]


def join(pieces: list[str]) -> list[str]:
    out: list[str] = []
    for piece in pieces:
        if piece.startswith("+") and out:
            out[-1] += " " + piece[1:]
        else:
            out.append(piece.removeprefix("+"))
    return [fold(p) for p in out]


_RECALL_HOME: list = []  # the home prepare_recall filled first in this process, copied for the next tests


def prepare_recall(cli, env):
    """Two pages kept in the memory: fetched once per process (the huge one is costly to read), then copied."""
    import os
    import shutil
    from pathlib import Path

    home = Path(os.environ["GSD_RESEARCH_HOME"])
    if _RECALL_HOME:
        shutil.copytree(_RECALL_HOME[0], home, dirs_exist_ok=True)
        return
    for name in ("article", "huge"):
        assert cli("fetch", env.url + f"/pages/{name}").code == 0
    template = Path(os.environ["HOME"]).parent / "recall-home-template"
    shutil.copytree(home, template)
    _RECALL_HOME.append(template)


CASES = {
    "docs": (("docs", "react", "useEffect cleanup"), "results", "content", None),
    "search": (("search", "EV market"), "results", "snippet", None),
    "fetch": (("fetch", "{url}/pages/article", "--extract"), "content", None, None),
    "recall": (("recall", "python version widget toolkit"), "results", "content", prepare_recall),
}


@pytest.mark.parametrize("name", CASES)
def test_following_next_gives_the_rest_without_repeating_and_ends(cli, env, name):
    args, key, text_key, prepare = CASES[name]
    args = tuple(a.format(url=env.url) for a in args)
    if prepare:
        prepare(cli, env)
    whole = cli(*args, "--max-tokens", WIDE).json
    assert "next" not in whole["metadata"]

    pages = [cli(*args, "--max-tokens", SMALL).json]
    while "next" in pages[-1]["metadata"] and len(pages) < 60:
        command = shlex.split(pages[-1]["metadata"]["next"])
        assert command[0] == "gsd-research"
        pages.append(cli(*command[1:], "--max-tokens", SMALL).json)

    assert len(pages) > 1 and "next" not in pages[-1]["metadata"]
    assert all(p["success"] and p["command"] == name and p["metadata"]["tokens_used"] <= int(SMALL) for p in pages)
    pieces = [piece for page in pages for piece in passages(page, key, text_key)]
    assert join(pieces) == join(passages(whole, key, text_key))


@pytest.mark.parametrize("name", ["docs", "search", "recall"])
@pytest.mark.parametrize("budget", ["100", "120", "160"])
def test_a_cursor_followed_with_a_tiny_budget_returns_a_passage_or_refuses(cli, env, name, budget):
    args, key, text_key, prepare = CASES[name]
    if prepare:
        prepare(cli, env)
    token = shlex.split(cli(*args, "--max-tokens", SMALL).json["metadata"]["next"])[-1]

    follow = cli("expand", token, "--max-tokens", budget)

    if follow.code == 0:  # within its budget, with something returned, and never the same cursor again
        assert follow.json["metadata"]["tokens_used"] <= int(budget) and follow.json[key]
        assert shlex.split(follow.json["metadata"].get("next", "x"))[-1] != token
    else:
        assert follow.json["error"]["code"] == "USAGE_ERROR" and "too small" in follow.json["error"]["message"]
