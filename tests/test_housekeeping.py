"""doctor and config show|set|path."""

from __future__ import annotations

import socket

import pytest
import yaml

from gsd_research.core.config import Config, config_path
from tests.conftest import assert_no_traceback


def test_doctor_reports_providers_keys_reachability_and_state(cli, fake, home, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "gk-test-value-123")

    result = cli("doctor")

    doc = result.json
    assert result.code == 0 and doc["success"] is True and doc["command"] == "doctor"
    providers = {p["name"]: p for p in doc["providers"]}
    assert set(providers) == {"context7", "perplexity", "tavily", "gemini", "ollama", "openai"}
    assert providers["gemini"]["key"] is True and providers["gemini"]["key_source"] == "GOOGLE_API_KEY"
    assert providers["tavily"]["configured"] is False and "TAVILY_API_KEY" in providers["tavily"]["note"]
    assert providers["context7"]["configured"] is True  # anonymous access works
    assert all(p["reachable"] is True for p in providers.values())  # all point at the fake server
    assert providers["context7"]["base_url"] == fake.url + "/api"
    assert doc["state"]["home"] == str(home)
    assert doc["state"]["config"]["path"] == str(home / "config.yaml")
    assert doc["cache"]["backend"] == "sqlite" and doc["cache"]["path"].startswith(str(home))
    assert "gk-test-value-123" not in result.stdout
    assert doc["metadata"]["tokens_used"] <= 2000
    assert "context7" in doc["ready"] and "tavily" not in doc["ready"]


def test_doctor_says_what_is_unreachable_within_the_probe_timeout(cli, monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    blackhole = socket.socket()  # accepts connections but never answers
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen(16)
    try:
        monkeypatch.setenv("CONTEXT7_API_URL", f"http://127.0.0.1:{closed}/api")
        monkeypatch.setenv("PERPLEXITY_BASE_URL", f"http://127.0.0.1:{blackhole.getsockname()[1]}")
        for var in ("TAVILY_BASE_URL", "GEMINI_BASE_URL", "OLLAMA_HOST", "OPENAI_BASE_URL"):
            monkeypatch.setenv(var, f"http://127.0.0.1:{closed}")
        doc = cli("doctor", "--timeout", "0.5").json
    finally:
        blackhole.close()

    providers = {p["name"]: p for p in doc["providers"]}
    assert providers["context7"]["reachable"] is False and providers["context7"]["error"] == "ConnectionError"
    assert providers["perplexity"]["error"] == "timeout"
    assert doc["ready"] == []
    assert any(p.startswith("context7 is configured but unreachable (ConnectionError)") for p in doc["problems"])


def test_doctor_without_probes_touches_no_network(cli, fake):
    doc = cli("doctor", "--no-probe").json

    assert fake.hits() == []
    assert all("reachable" not in p for p in doc["providers"])


def test_doctor_reports_a_broken_config_file_instead_of_failing(cli, home):
    (home / "config.yaml").write_text("http: [unclosed\n")

    result = cli("doctor", "--no-probe")

    assert result.code == 0
    assert any("config" in p.lower() for p in result.json["problems"])
    assert_no_traceback(result)


def test_doctor_reports_an_unreachable_redis_cache(cli, home):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cli("config", "set", "cache.backend", "redis")
    cli("config", "set", "cache.redis_url", f"redis://:secretpw@127.0.0.1:{port}/0")

    result = cli("doctor", "--no-probe")

    doc = result.json
    assert doc["cache"]["backend"] == "redis" and doc["cache"]["reachable"] is False
    assert any("Redis" in p for p in doc["problems"])
    assert "secretpw" not in result.stdout


def test_config_path_names_the_file_and_home(cli, home):
    doc = cli("config", "path").json

    assert doc == {**doc, "success": True, "command": "config path", "path": str(home / "config.yaml"),
                   "exists": True, "home": str(home)}


# (key, value as typed, value stored, whether a note says it is no key gsd-research sets)
STORED = {
    "a number": ("cache.ttl.search", "120", 120, False),
    "off, the word not false": ("cache.backend", "off", "off", False),
    "a capability's number": ("llm.max_input_tokens", "12000", 12000, False),
    "a negative number without --": ("providers.custom.offset", "-3", -3, False),
    "an unknown key": ("fetch.webfetch_hook", "suggest", "suggest", True),
}


@pytest.mark.parametrize("key, typed, value, unknown", list(STORED.values()), ids=list(STORED))
def test_config_set_stores_the_typed_value_and_keeps_the_rest(cli, home, key, typed, value, unknown):
    doc = cli("config", "set", key, typed).json

    assert doc["success"] is True and doc["value"] == value
    assert ("not a key" in doc.get("note", "")) is unknown
    assert Config().get(key) == value
    assert yaml.safe_load((home / "config.yaml").read_text())["http"]["read_timeout"] == 2  # the rest survived


@pytest.mark.parametrize("key, value, fragment", [
    ("cache.backend", "mongodb", "sqlite, redis or off"),
    ("http.read_timeout", "fast", "number"),
    ("http.max_retries", "-1", "number"),
    ("cache.ttl", "5", "section"),
    ("providers.context7.base_url", "context7.com", "URL"),
    ("cache..ttl", "5", "Invalid config key"),
])
def test_config_set_rejects_values_that_would_break_calls(cli, home, key, value, fragment):
    before = (home / "config.yaml").read_text()

    result = cli("config", "set", "--", key, value)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"
    assert fragment in result.json["error"]["message"]
    assert (home / "config.yaml").read_text() == before


def test_config_set_creates_the_file_when_missing(cli, home):
    config_path().unlink()

    cli("config", "set", "cache.ttl.docs", "60")

    assert yaml.safe_load(config_path().read_text()) == {"cache": {"ttl": {"docs": 60}}}


def test_config_set_on_a_broken_file_changes_nothing(cli, home):
    (home / "config.yaml").write_text("http: [unclosed\n")

    result = cli("config", "set", "cache.ttl.docs", "60")

    assert result.code == 2 and "Fix or delete" in result.json["error"]["suggestions"][0]
    assert (home / "config.yaml").read_text() == "http: [unclosed\n"


def test_config_show_merges_defaults_file_and_environment(cli, fake, home, monkeypatch):
    cli("config", "set", "cache.ttl.docs", "60")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secret-value")

    doc = cli("config", "show").json

    assert doc["config"]["cache"]["ttl"]["docs"] == 60
    assert doc["config"]["cache"]["ttl"]["deep"] == 21600  # a default
    assert doc["environment"]["TAVILY_API_KEY"] == "set"
    assert doc["environment"]["CONTEXT7_API_URL"] == fake.url + "/api"
    assert "tvly-secret-value" not in str(doc)


def test_config_without_subcommand_is_a_usage_error(cli):
    result = cli("config")

    assert result.code == 2 and "get, path, set, show" in result.json["error"]["message"]


@pytest.mark.parametrize("key, stored, value", [
    ("hooks.webfetch_mode", None, "suggest"),  # the default
    ("hooks.webfetch_mode", "enforce", "enforce"),
    ("providers.tavily.api_key", "tvly-secret-value", "***"),
    ("cache.ttl.deep", None, 21600),
])
def test_config_get_gives_the_value_in_effect(cli, home, key, stored, value):
    if stored is not None:
        assert cli("config", "set", key, stored).code == 0

    result = cli("config", "get", key)

    assert result.json["value"] == value and "tvly-secret-value" not in result.stdout


def test_config_get_of_an_unknown_key_says_where_to_look(cli, home):
    result = cli("config", "get", "hooks.webfetch")

    assert result.code == 2 and result.json["error"]["suggestions"] == ["gsd-research config show (every key)"]


def test_cache_clear_repairs_a_damaged_sqlite_file_and_doctor_names_it(cli, fake, home):
    """Regression: with a damaged cache file, `cache clear` (the natural fix) failed with INTERNAL_ERROR
    and doctor, which the stderr warning points to, reported no problem."""
    from gsd_research.core.http_cache import cache_file

    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not a sqlite database " * 100)

    doctor = cli("doctor", "--no-probe").json
    assert doctor["cache"]["damaged"] is True
    assert any("cache clear" in p for p in doctor["problems"])
    stats = cli("cache", "stats")
    assert stats.code == 1 and "gsd-research cache clear" in stats.json["error"]["suggestions"][0]

    cleared = cli("cache", "clear")
    assert cleared.code == 0, cleared.stdout
    assert cleared.json["removed"] is None and "damaged" in cleared.json["note"]
    assert cli("docs", "react", "hooks").code == 0
    assert cli("cache", "stats").json["entries"] >= 1
    assert "damaged" not in cli("doctor", "--no-probe").json["cache"]


def test_doctor_uses_the_model_backends_health_checks(cli, fake, monkeypatch):
    """doctor says which model backend each LLM task would use now, and why a backend cannot serve."""
    monkeypatch.setenv("GEMINI_API_KEY", "sk-canary-gem-1234567890")
    doc = cli("doctor").json
    models = doc["models"]
    assert models["backends"]["openai"] == {"model": "gpt-4o-mini", "usable": False,
                                            "reason": "OPENAI_API_KEY is not set"}
    assert models["backends"]["ollama"]["usable"] is True
    assert models["tasks"] == {"summarize": "ollama", "analyze": "gemini", "url": "gemini", "image": "ollama",
                               "web": "gemini", "verify": "gemini"}
    assert "canary" not in str(doc)

    monkeypatch.setenv("OLLAMA_MODEL", "not-pulled:1b")
    doc = cli("doctor").json
    assert doc["models"]["backends"]["ollama"]["usable"] is False
    assert doc["models"]["tasks"]["summarize"] == "gemini"
    assert any("ollama pull not-pulled:1b" in p for p in doc["problems"])

    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    doc = cli("doctor", "--timeout", "0.5").json
    assert set(doc["models"]["tasks"].values()) == {None}
    assert any("No model backend can serve" in p for p in doc["problems"])


def test_config_show_lists_every_capabilitys_defaults(cli, home):
    """config show showed only hooks/cache/http/providers; deep, search, llm and fetch defaults were hidden.
    The listed defaults must be the ones the code really uses."""
    from gsd_research.deep.settings import DEFAULTS as DEEP
    from gsd_research.llm.router import DEFAULT_CHAINS, DEFAULT_MODELS
    from gsd_research.search import command as search

    cli("config", "set", "search.depth", "advanced")
    doc = cli("config", "show").json
    shown = doc["config"]
    assert {"hooks", "cache", "http", "providers", "deep", "search", "llm", "fetch"} <= set(shown)
    assert shown["deep"] == DEEP
    assert shown["llm"]["chains"] == DEFAULT_CHAINS and shown["llm"]["models"] == DEFAULT_MODELS
    assert shown["search"]["max_sources"] == search.DEFAULT_SOURCES
    assert shown["search"]["providers"] == list(search.PROVIDERS)
    assert shown["search"]["depth"] == "advanced"  # the user's value wins over the default
    assert doc["metadata"]["tokens_used"] <= 2000


def test_config_set_checks_capability_keys_and_suggests_their_default(cli):
    bad = cli("config", "set", "deep.max_attempts", "abc")

    assert bad.code == 2 and bad.json["error"]["suggestions"] == ["gsd-research config set deep.max_attempts 3"]


def test_token_budget_settings_are_not_taken_for_secrets(cli, monkeypatch):
    """Regression: any key containing 'token' was hidden as a secret (llm.max_input_tokens showed '***')."""
    assert cli("config", "set", "llm.max_input_tokens", "9000").json["value"] == 9000
    assert cli("config", "show").json["config"]["llm"]["max_input_tokens"] == 9000
    stored = cli("config", "set", "providers.openai.api_key", "sk-canary-1234567890")
    assert stored.json["value"] == "***" and "canary" not in stored.stdout
    shown = cli("config", "show")
    assert shown.json["config"]["providers"]["openai"]["api_key"] == "***" and "canary" not in shown.stdout


def test_config_set_reads_a_negative_value_as_a_value_and_options_after_it_as_options(cli, home):
    refused = cli("config", "set", "http.max_retries", "-1")
    stored = cli("config", "set", "providers.custom.offset", "-3", "--max-tokens", "500")

    assert refused.code == 2 and "takes a number >= 0, not -1" in refused.json["error"]["message"]
    assert stored.code == 0 and stored.json["value"] == -3
    assert cli("config", "set", "cache.ttl.docs", "60", "--bogus").json["error"]["code"] == "USAGE_ERROR"


def _hand_edit(key: str, value) -> None:
    data = yaml.safe_load(config_path().read_text()) or {}
    node = data
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    config_path().write_text(yaml.safe_dump(data))


@pytest.mark.parametrize(("key", "command"), [
    ("fetch.max_bytes", ("fetch", "http://127.0.0.1:9/page")),
    ("fetch.max_redirects", ("fetch", "http://127.0.0.1:9/page")),
    ("cache.ttl.default", ("docs", "react", "hooks")),
    ("search.ddgs.timeout", ("search", "what is a hook")),
])
def test_a_hand_edited_setting_that_is_no_number_is_a_usage_error_naming_it(cli, home, key, command):
    """Regression: `fetch.max_bytes: abc` in config.yaml was an INTERNAL_ERROR (ValueError), and a bad
    `cache.ttl.default` silently turned the HTTP cache off."""
    _hand_edit(key, "abc")

    result = cli(*command)

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR", result.stdout
    assert key in result.json["error"]["message"] and "HTTP cache unavailable" not in result.stderr
    assert_no_traceback(result)


@pytest.mark.parametrize("key", ["cache.ttl.default", "cache.ttl.docs", "http.read_timeout", "http.deadline"])
def test_a_hand_edited_setting_too_large_for_a_date_or_a_socket_still_answers(cli, fake, key):
    _hand_edit(key, 1.0e18)

    result = cli("docs", "react", "hooks")

    assert result.code == 0 and result.json["success"] is True, result.stdout
    assert "HTTP cache unavailable" not in result.stderr
