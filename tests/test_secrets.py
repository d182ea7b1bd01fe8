"""Canary keys never reach stdout, stderr, the cache, logs or any file under GSD_RESEARCH_HOME."""

from __future__ import annotations

import json

import pytest

from gsd_research.core.config import set_value
from gsd_research.core.secrets import known_secrets, register, scrub
from tests.conftest import KEY_VARS

CANARIES = {name: f"sk-canary-{name.lower().replace('_', '-')}-7f3a" for name in KEY_VARS}
CANARIES["CONTEXT7_API_KEY"] = "ctx7sk-canary-context7-7f3a"  # accepted by the fake, so calls succeed


@pytest.fixture
def canaries(monkeypatch):
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    return CANARIES


def assert_clean(result, home, skip=()):
    text = result.stdout + result.stderr
    for value in CANARIES.values():
        assert value not in text, f"{value} leaked into output"
        assert "canary" not in text
    for path in home.rglob("*"):
        if path.is_file() and path.name not in skip:
            data = path.read_bytes()
            assert b"canary" not in data, f"a key leaked into {path}"


def test_docs_success_and_cache_hold_no_key(cli, fake, home, canaries):
    first = cli("docs", "react", "hooks")
    second = cli("--json-pretty", "docs", "react", "hooks")

    assert first.code == 0 and json.loads(second.stdout)["metadata"]["cache_hit"] is True
    assert fake.hits()[0].headers["authorization"] == f"Bearer {canaries['CONTEXT7_API_KEY']}"
    assert (home / "cache" / "http_cache.sqlite").stat().st_size > 0
    assert_clean(first, home)
    assert_clean(second, home)


def test_a_provider_that_echoes_the_key_is_scrubbed_at_the_edge(cli, fake, home, canaries):
    key = canaries["CONTEXT7_API_KEY"]
    fake.add_fault("/api/v2/libs/search", "status", times=10, status=400,
                   body={"error": "bad_request", "message": f"Key {key} is not allowed here"})

    result = cli("docs", "react", "hooks")

    assert result.code == 5 and "***" in result.json["error"]["details"]["provider_message"]
    assert_clean(result, home)


def test_invalid_key_error_names_the_variable_not_the_key(cli, fake, home, monkeypatch):
    monkeypatch.setenv("CONTEXT7_API_KEY", "sk-canary-wrong-prefix-7f3a")

    result = cli("docs", "react", "hooks")

    assert result.json["error"]["code"] == "INVALID_API_KEY"
    assert "CONTEXT7_API_KEY" in " ".join(result.json["error"]["suggestions"])
    assert "sk-canary" not in result.stdout + result.stderr


@pytest.mark.parametrize("kind", ["status", "drop", "malformed", "html"])
def test_failures_hold_no_key(cli, fake, home, canaries, kind):
    fake.add_fault("/api/v2/", kind, times=10, status=500 if kind != "html" else 401)

    result = cli("docs", "react", "hooks")

    assert result.code != 0
    assert_clean(result, home)


def test_housekeeping_output_holds_no_key(cli, fake, home, canaries):
    results = [cli("doctor", "--timeout", "0.5"), cli("config", "show"), cli("config", "path"),
               cli("cache", "stats")]

    doctor = results[0].json
    assert {p["name"]: p["key_source"] for p in doctor["providers"]}["tavily"] == "TAVILY_API_KEY"
    assert results[1].json["environment"]["CONTEXT7_API_KEY"] == "set"
    for result in results:
        assert result.code == 0
        assert_clean(result, home)


def test_internal_error_log_is_scrubbed(cli, fake, home, canaries, monkeypatch):
    key = canaries["PERPLEXITY_API_KEY"]

    def boom(*args, **kwargs):
        raise RuntimeError(f"unexpected failure with {key}")

    monkeypatch.setattr("gsd_research.docs.context7.Context7.resolve", boom)
    result = cli("docs", "react", "hooks")

    assert result.code == 1 and result.json["error"]["code"] == "INTERNAL_ERROR"
    assert (home / "logs" / "errors.log").read_text().count("***") >= 1
    assert_clean(result, home)


def test_a_key_from_the_config_file_is_scrubbed_and_redacted(cli, fake, home):
    key = "ctx7sk-canary-config-7f3a"
    set_result = cli("config", "set", "providers.context7.api_key", key)
    fake.add_fault("/api/v2/libs/search", "status", times=10, status=400,
                   body={"error": "bad_request", "message": f"Key {key} is not allowed"})

    shown = cli("config", "show")
    failed = cli("docs", "react", "hooks")

    assert set_result.json["value"] == "***"
    assert shown.json["config"]["providers"]["context7"]["api_key"] == "***"
    assert fake.hits()[0].headers["authorization"] == f"Bearer {key}"
    for result in (set_result, shown, failed):
        assert_clean(result, home, skip=("config.yaml",))
    assert (home / "config.yaml").stat().st_mode & 0o077 == 0  # the one file holding it is private


def test_scrub_covers_json_escaped_and_url_encoded_forms():
    secret = "sk-canary/with+odd=chars"

    text = scrub(f'plain {secret} url {secret.replace("/", "%2F").replace("+", "%2B").replace("=", "%3D")}',
                 [secret])

    assert "canary" not in text and text.count("***") == 2


def test_short_values_are_not_treated_as_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "abc")
    register("xy")

    assert "abc" not in known_secrets() and "xy" not in known_secrets()


def test_config_set_of_a_url_keeps_it_visible(cli, home):
    set_value("providers.ollama.base_url", "http://gpu-box:11434", home / "config.yaml")

    assert cli("config", "show").json["config"]["providers"]["ollama"]["base_url"] == "http://gpu-box:11434"


def test_research_memory_holds_no_key(cli, fake, home, canaries, monkeypatch):
    """What fetch and search keep for recall (catalog, documents, lexical index) is scrubbed like every output."""
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-canary-memory-7f3a")  # a key the fake Tavily accepts
    tavily_key, gemini_key = "tvly-canary-memory-7f3a", canaries["GEMINI_API_KEY"]
    fake.state.setdefault("pages", {})["leaky"] = (f"<html><head><title>Leaky {gemini_key}</title></head><body><article><h1>Config "
                                 f"dump</h1><p>The debug page prints GEMINI_API_KEY={gemini_key} and the Tavily key "
                                 f"{tavily_key} in plain text, followed by enough prose to be read as an article "
                                 "about configuration files and environment variables.</p></article></body></html>")
    fake.state["tavily.results"] = [{"title": f"Key {tavily_key}", "url": f"https://x.example.org/?key={tavily_key}",
                                     "content": f"An echo of {tavily_key} and {gemini_key}.", "score": 0.9}]

    results = [cli("fetch", fake.url + "/pages/state/leaky"), cli("search", "echo the keys", "--provider", "tavily"),
               cli("recall", "debug page prints the key")]

    assert [r.json["metadata"]["memory"] for r in results[:2]] == ["stored", "stored"]
    assert results[2].json["results"] and "***" in results[2].stdout
    assert (home / "research-memory" / "catalog.sqlite").exists()
    # the HTTP cache keeps the pages' and the provider's answers as they came (what they echo included)
    http_cache = ("http_cache.sqlite", "http_cache.sqlite-wal", "http_cache.sqlite-shm")
    for result in results:
        assert_clean(result, home, skip=http_cache)


@pytest.mark.parametrize("query", [
    "api_key=sk-canary-url-param-7f3a",
    "key=sk-canary-url-param-7f3a&lang=en",
    "Token=sk-canary-url-param-7f3a",
    "access_token=sk-canary-url-param-7f3a",
    "q=widgets&x=sk-canary-tavily-api-key-7f3a",  # a configured provider key under any name
])
def test_a_key_inside_a_fetched_url_is_never_shown_cached_or_remembered(cli, fake, home, canaries, monkeypatch,
                                                                        query):
    monkeypatch.setenv("GSD_RESEARCH_ALLOW_HOSTS", "127.0.0.1")
    monkeypatch.setenv("OLLAMA_HOST", fake.url + "/no-ollama")
    url = f"{fake.url}/pages/article?{query}"

    first = cli("fetch", url)
    second = cli("fetch", url.replace("url-param-7f3a", "url-param-0000"))  # another key, the same entry
    recalled = cli("recall", "article")

    stored = b"".join(p.read_bytes() for p in (home / "cache").glob("http_cache.sqlite*"))
    assert first.code == 0 and second.json["metadata"]["fetch_cache_hit"] is True, second.stdout
    assert b"/pages/article" in stored and b"canary" not in stored
    assert first.json["metadata"]["memory"] == "stored" and recalled.json["results"], recalled.stdout
    assert "canary" not in first.stdout + second.stdout + recalled.stdout
    assert [p for p in home.rglob("*") if p.is_file() and b"canary" in p.read_bytes()] == []


@pytest.mark.parametrize(("url", "stored"), [
    ("https://a.test/p?apiKey=s3&q=x", "https://a.test/p?apiKey=REDACTED&q=x"),
    ("https://a.test/p?X-Amz-Signature=s3&client_secret=s4", "https://a.test/p?X-Amz-Signature=REDACTED&client_secret=REDACTED"),
    ("https://a.test/p?keyword=x&monkey=y&q=api_key%3Dz", "https://a.test/p?keyword=x&monkey=y&q=api_key%3Dz"),
    ("https://a.test/sk-canary-known-7f3a/p?x=1", "https://a.test/***/p?x=1"),
])
def test_redact_url_removes_credentials_and_keeps_other_parameters(url, stored):
    from gsd_research.core.secrets import redact_url

    assert redact_url(url, ["sk-canary-known-7f3a"]) == stored
