"""The ddgs backend behind the keyless interface: fields and exceptions mapped (library faked, no network)."""

from __future__ import annotations

import shlex
import sys
import types

import pytest

from gsd_research.core.errors import GsdError
from gsd_research.search.keyless import DdgsBackend, filter_domains, normalize_results, shape_query


class DDGSException(Exception):
    pass


class RatelimitException(DDGSException):
    pass


class TimeoutException(DDGSException):
    pass


@pytest.fixture
def ddgs(monkeypatch):
    """A stand-in `ddgs` module: DDGS().text/news record their arguments and answer or raise `state`."""
    state = {"calls": [], "answer": [], "raise": None}

    class DDGS:
        def __init__(self, timeout=5, **_):
            state["timeout"] = timeout

        def _call(self, category, query, **kwargs):
            state["calls"].append({"category": category, "query": query, **kwargs})
            if state["raise"] is not None:
                raise state["raise"]
            return state["answer"]

        def text(self, query, **kwargs):
            return self._call("text", query, **kwargs)

        def news(self, query, **kwargs):
            return self._call("news", query, **kwargs)

    module = types.ModuleType("ddgs")
    module.DDGS = DDGS
    exceptions = types.ModuleType("ddgs.exceptions")
    exceptions.DDGSException = DDGSException
    exceptions.RatelimitException = RatelimitException
    exceptions.TimeoutException = TimeoutException
    monkeypatch.setitem(sys.modules, "ddgs", module)
    monkeypatch.setitem(sys.modules, "ddgs.exceptions", exceptions)
    return state


def test_text_search_arguments_and_results(ddgs):
    ddgs["answer"] = [{"title": "T", "href": "https://a.example.org/", "body": "B"}]

    out = DdgsBackend(timeout=7, engines="duckduckgo").search("text", "ev", max_results=3, timelimit="w")

    assert out == ddgs["answer"]
    assert ddgs["calls"] == [{"category": "text", "query": "ev", "region": "us-en", "safesearch": "moderate",
                              "timelimit": "w", "max_results": 3, "backend": "duckduckgo"}]
    assert ddgs["timeout"] == 7


def test_news_category_uses_news(ddgs):
    DdgsBackend().search("news", "ev", max_results=2, timelimit=None)

    assert ddgs["calls"][0]["category"] == "news"


@pytest.mark.parametrize(("exc", "code"), [
    (RatelimitException("202 Ratelimit"), "RATE_LIMITED"),
    (TimeoutException("timed out"), "TIMEOUT"),
    (DDGSException("DNSError: error sending request for url"), "NETWORK_ERROR"),
    (DDGSException("unexpected engine answer"), "UPSTREAM_ERROR"),
    (RuntimeError("primp panicked"), "UPSTREAM_ERROR"),
])
def test_library_exceptions_become_typed_errors(ddgs, exc, code):
    ddgs["raise"] = exc

    with pytest.raises(GsdError) as info:
        DdgsBackend().search("text", "ev", max_results=3, timelimit=None)

    assert info.value.code == code
    assert "ddgs" in info.value.message


def test_no_results_is_an_empty_list_not_an_error(ddgs):
    ddgs["raise"] = DDGSException("No results found.")

    assert DdgsBackend().search("text", "zzqx", max_results=3, timelimit=None) == []


def test_library_missing_is_no_backend(monkeypatch):
    monkeypatch.setitem(sys.modules, "ddgs", None)

    with pytest.raises(GsdError) as info:
        DdgsBackend().search("text", "ev", max_results=3, timelimit=None)

    assert info.value.code == "NO_BACKEND"
    assert "Reinstall with install.sh" in info.value.suggestions


def test_library_missing_on_the_plugin_route_gives_the_plugins_fix(monkeypatch, tmp_path):
    """The plugin's launcher says where its environment is: the fix rebuilds that, not install.sh."""
    root, data = tmp_path / "plugin 'root'", tmp_path / "data"
    monkeypatch.setenv("GSD_RESEARCH_PLUGIN_ROOT", str(root))
    monkeypatch.setenv("GSD_RESEARCH_PLUGIN_DATA", str(data))
    monkeypatch.setitem(sys.modules, "ddgs", None)

    with pytest.raises(GsdError) as info:
        DdgsBackend().search("text", "ev", max_results=3, timelimit=None)

    assert not any("install.sh" in s for s in info.value.suggestions)
    fix = info.value.suggestions[0].split(": ", 1)[1]
    assert shlex.split(fix) == ["python3", str(root / "bootstrap"), "rebuild", str(root), str(data)]


def test_normalize_filters_and_query_shaping():
    raw = [{"title": "A", "href": "https://docs.example.org/a", "body": "x"},
           {"title": "dup", "href": "https://docs.example.org/a", "body": "y"},
           {"title": "News", "url": "https://news.example.com/n", "body": "z", "date": "2026-11-01"},
           {"title": "bad", "href": "ftp://files.example.org/", "body": "w"}]

    results = normalize_results(raw)

    assert [r["url"] for r in results] == ["https://docs.example.org/a", "https://news.example.com/n"]
    assert results[1]["published_date"] == "2026-11-01" and results[0]["provider"] == "ddgs"
    assert [r["url"] for r in filter_domains(results, ("example.org",), ())] == ["https://docs.example.org/a"]
    assert [r["url"] for r in filter_domains(results, (), ("example.org",))] == ["https://news.example.com/n"]
    assert shape_query("ev", ("a.org", "b.org"), ("c.org",)) == "ev (site:a.org OR site:b.org) -site:c.org"
