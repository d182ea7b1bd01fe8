"""Small hardening fixes: enumerated config values are validated, and `researcher` reports unwritable
state like `gsd-research` does (special and oversized input files: tests/test_input_files.py)."""

from __future__ import annotations

import pytest

from tests.conftest import assert_no_traceback
from tests.researcher_fixtures import kb

# -- config set validates enumerations ------------------------------------------------------------


@pytest.mark.parametrize(("key", "bad"), [
    ("hooks.webfetch_mode", "deny"),
    ("hooks.context7_mode", "block"),
    ("cache.backend", "memcached"),
    ("search.depth", "deepest"),
    ("search.providers", "[tavily, bing]"),
    ("search.ddgs.safesearch", "strict"),
    ("deep.api", "turbo"),
    ("llm.chains.summarize", "[gemini, claude]"),
    ("search.fallback", "maybe"),
    ("deep.autostart", "sometimes"),
    ("cache.stats", "maybe"),  # read as a boolean by the HTTP layer and keyless search
])
def test_config_set_refuses_a_value_outside_the_enumeration(cli, home, key, bad):
    before = (home / "config.yaml").read_text()

    result = cli("config", "set", key, bad)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR", result.json
    assert key in result.json["error"]["message"]
    assert (home / "config.yaml").read_text() == before
    assert_no_traceback(result)


@pytest.mark.parametrize(("key", "good", "stored"), [
    ("hooks.webfetch_mode", "enforce", "enforce"),
    ("hooks.webfetch_mode", "ENFORCE", "enforce"),  # stored as the hook compares it
    ("hooks.context7_mode", " Off ", "off"),
    ("cache.backend", "Redis", "redis"),
    ("cache.stats", "false", False),
    ("hooks.webfetch_mode", "off", "off"),
    ("hooks.context7_mode", "suggest", "suggest"),
    ("search.depth", "advanced", "advanced"),
    ("search.providers", "[ddgs, tavily]", ["ddgs", "tavily"]),
    ("search.providers", "keyless", "keyless"),
    ("deep.api", "agent", "agent"),
    ("llm.chains.summarize", "[ollama, gemini]", ["ollama", "gemini"]),
    ("search.fallback", "false", False),
])
def test_config_set_accepts_the_enumerated_values(cli, home, key, good, stored):
    import yaml

    result = cli("config", "set", key, good)

    assert result.code == 0, result.json
    assert result.json["value"] == stored
    node = yaml.safe_load((home / "config.yaml").read_text())
    for part in key.split("."):
        node = node[part]
    assert node == stored  # what the file holds, as the code reads it


def test_the_enumerations_match_the_code_that_reads_them():
    import importlib.util

    from gsd_research.commands.housekeeping import ENUMS, LIST_ENUMS
    from gsd_research.deep.settings import APIS
    from gsd_research.llm.router import BACKENDS
    from gsd_research.search.command import ALIASES, PROVIDERS
    from gsd_research.search.tavily import DEPTHS
    from tests.conftest import ROOT

    spec = importlib.util.spec_from_file_location("hook", ROOT / "hooks" / "gsd_research_hooks" / "common.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    assert ENUMS["hooks.webfetch_mode"] == ENUMS["hooks.context7_mode"] == hook.MODES
    assert ENUMS["deep.api"] == APIS and ENUMS["search.depth"] == DEPTHS
    assert set(LIST_ENUMS["search.providers"]) == set(PROVIDERS) | set(ALIASES)
    assert LIST_ENUMS["llm.chains."] == BACKENDS


# -- researcher: state that cannot be written -------------------------------------------------------


def test_researcher_with_a_home_that_is_a_file_says_state_not_writable(tmp_path, monkeypatch):
    home_file = tmp_path / "home-is-a-file"
    home_file.write_text("")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\ntext\n")
    monkeypatch.setenv("GSD_RESEARCH_HOME", str(home_file))

    result = kb("repo", "add", "kb", str(docs), "--json")

    assert result.code == 1
    assert result.json["error"]["code"] == "STATE_NOT_WRITABLE", result.json
    assert str(home_file) in result.json["error"]["message"]
