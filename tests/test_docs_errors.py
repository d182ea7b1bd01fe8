"""gsd-research docs: the envelope for success and for every error it can produce, against the fake Context7."""

from __future__ import annotations

import pytest

from gsd_research.core.config import set_value
from tests.conftest import assert_no_traceback

SUCCESS_META = {"library_id", "total_available", "returned", "tokens_used", "max_tokens", "cache_hit",
                "confidence", "backend"}


def assert_failure(result, code: str, status: int) -> dict:
    """The DESIGN.md failure envelope: one JSON document, the code, a message, the exit status, no traceback."""
    doc = result.json
    assert doc["success"] is False
    assert doc["command"] == "docs"
    assert doc["error"]["code"] == code, doc
    assert isinstance(doc["error"]["message"], str) and doc["error"]["message"]
    assert result.code == status, (result.code, doc)
    assert_no_traceback(result)
    return doc["error"]


def assert_success(result) -> dict:
    doc = result.json
    assert result.code == 0, doc
    assert doc["success"] is True and doc["command"] == "docs"
    assert SUCCESS_META <= set(doc["metadata"]), doc["metadata"]
    assert doc["metadata"]["tokens_used"] <= doc["metadata"]["max_tokens"]
    for item in doc["results"]:
        assert {"title", "content", "source_url", "tokens"} <= set(item)
        assert isinstance(item["tokens"], int) and item["tokens"] > 0
    assert_no_traceback(result)
    return doc


def test_success_envelope_carries_the_designed_fields(cli, fake):
    doc = assert_success(cli("docs", "nextjs", "app", "router", "setup", "--max-tokens", "1500"))

    assert doc["query"] == "app router setup"
    assert doc["library"] == "nextjs"
    assert doc["metadata"]["library_id"] == "/vercel/next.js"
    assert doc["metadata"]["max_tokens"] == 1500
    assert doc["metadata"]["confidence"] == "HIGH" and doc["metadata"]["backend"] == "context7"
    assert doc["metadata"]["cache_hit"] is False
    assert doc["metadata"]["returned"] == len(doc["results"]) < doc["metadata"]["total_available"]
    assert list(doc)[-1] == "metadata"


def test_context7_id_and_version_pin_skip_the_search(cli, fake):
    by_id = assert_success(cli("docs", "/vercel/next.js", "routing"))
    pinned = assert_success(cli("docs", "next.js@15.1.8", "routing"))

    assert by_id["metadata"]["library_id"] == "/vercel/next.js"
    assert pinned["metadata"]["library_id"] == "/vercel/next.js/v15.1.8"
    assert len(fake.hits("/api/v2/libs/search")) == 1  # only the name@version call searched
    assert fake.hits("/api/v2/context")[-1].query["libraryId"] == "/vercel/next.js/v15.1.8"


def test_missing_query_is_a_usage_error(cli, fake):
    err = assert_failure(cli("docs", "react"), "USAGE_ERROR", 2)

    assert "QUERY" in err["message"]
    assert fake.hits() == []


def test_blank_library_is_a_usage_error(cli, fake):
    assert_failure(cli("docs", " ", "hooks"), "USAGE_ERROR", 2)


def test_unknown_library_gives_not_found_with_suggestions_from_the_search(cli, fake):
    err = assert_failure(cli("docs", "reactt-quantum", "hooks"), "LIBRARY_NOT_FOUND", 4)

    assert "reactt-quantum" in err["message"]
    assert err["suggestions"] == ["React", "Next.js"]  # what the search answered


@pytest.mark.parametrize("library, code", [("zzzunknown", "LIBRARY_NOT_FOUND"), ("/nobody/nothing", "LIBRARY_NOT_FOUND"),
                                           ("/empty/emptylib", "NOT_FOUND")],
                         ids=["search answers 404", "unknown id", "no snippets"])
def test_a_lookup_that_finds_nothing_is_not_found_exit_4_with_suggestions(cli, fake, library, code):
    err = assert_failure(cli("docs", library, "hooks"), code, 4)

    assert err["suggestions"]


def test_library_still_processing_202_is_not_ready_and_not_cached(cli, fake):
    for _ in range(2):
        err = assert_failure(cli("docs", "/processing/lib", "x"), "LIBRARY_NOT_READY", 5)

    assert "Retry in a few minutes" in err["suggestions"]
    assert len(fake.hits("/api/v2/context")) == 2


def test_moved_library_301_is_followed_to_its_new_id(cli, fake):
    doc = assert_success(cli("docs", "movedlib", "setup"))

    assert doc["metadata"]["library_id"] == "/new-owner/movedlib"
    assert doc["metadata"]["redirected_from"] == "/old-owner/movedlib"
    ids = [r.query["libraryId"] for r in fake.hits("/api/v2/context")]
    assert ids == ["/old-owner/movedlib", "/new-owner/movedlib"]


def test_invalid_key_401_is_invalid_api_key_exit_3(cli, fake, monkeypatch):
    monkeypatch.setenv("CONTEXT7_API_KEY", "wrong-prefix-key-123")

    err = assert_failure(cli("docs", "react", "hooks"), "INVALID_API_KEY", 3)

    assert "CONTEXT7_API_KEY" in err["suggestions"][0]
    assert len(fake.hits("/api/v2/libs/search")) == 1  # 401 is not retried


def test_html_401_page_is_invalid_api_key(cli, fake, monkeypatch):
    fake.add_fault("/api/v2/libs/search", "html", status=401)

    assert_failure(cli("docs", "react", "hooks"), "INVALID_API_KEY", 3)


# (path, fault, options, code, a word of the error): answered so on each of the 4 tries (1 + max_retries: 3)
PERSISTENT = [
    ("/api/v2/libs/search", "status", {"status": 429, "retry_after": "0"}, "RATE_LIMITED", "CONTEXT7_API_KEY"),
    ("/api/v2/context", "status", {"status": 500}, "UPSTREAM_ERROR", "500"),
    ("/api/v2/context", "status", {"status": 502}, "UPSTREAM_ERROR", "502"),
    ("/api/v2/context", "status", {"status": 503}, "UPSTREAM_ERROR", "503"),
    ("/api/v2/context", "status", {"status": 504}, "UPSTREAM_ERROR", "504"),
    ("/api/v2/libs/search", "drop", {}, "NETWORK_ERROR", None),
    ("/api/v2/libs/search", "truncate", {}, "NETWORK_ERROR", None),
]


@pytest.mark.parametrize("path, kind, opts, code, said", PERSISTENT,
                         ids=["429", "500", "502", "503", "504", "drop", "truncate"])
def test_a_fault_on_every_try_is_its_error_exit_5_after_all_retries(cli, fake, path, kind, opts, code, said):
    fake.add_fault(path, kind, times=10, **opts)

    err = assert_failure(cli("docs", "react", "hooks"), code, 5)

    assert len(fake.hits(path)) == 4
    assert said is None or said in err["message"] + " ".join(err["suggestions"])


@pytest.mark.parametrize("path, kind, times, opts", [
    ("/api/v2/context", "status", 2, {"status": 503}),
    ("/api/v2/context", "drop", 1, {}),
    ("/api/v2/libs/search", "timeout", 1, {"delay": 1.0}),  # past the 0.4 s read timeout set below
], ids=["503 twice", "one drop", "one timeout"])
def test_a_fault_that_passes_is_retried_into_an_answer(cli, fake, home, path, kind, times, opts):
    set_value("http.read_timeout", "0.4", home / "config.yaml")
    fake.add_fault(path, kind, times=times, **opts)

    assert_success(cli("docs", "react", "hooks"))

    assert len(fake.hits(path)) == times + 1


def test_429_with_retry_after_then_200_succeeds_after_waiting_what_it_said(cli, fake, retry_waits):
    fake.add_fault("/api/v2/context", "status", times=1, status=429, retry_after="1")

    assert_success(cli("docs", "react", "hooks"))

    assert retry_waits == [1.0]
    assert len(fake.hits("/api/v2/context")) == 2


def test_retry_after_beyond_the_cap_fails_at_once_and_says_when(cli, fake, retry_waits):
    fake.add_fault("/api/v2/libs/search", "status", times=5, status=429, retry_after="3600")

    err = assert_failure(cli("docs", "react", "hooks"), "RATE_LIMITED", 5)

    assert retry_waits == []
    assert err["retry_after"] == pytest.approx(3600, abs=1)
    assert "3600" in err["suggestions"][0] or "3599" in err["suggestions"][0]
    assert len(fake.hits("/api/v2/libs/search")) == 1


def test_html_502_page_is_upstream_error_without_the_html(cli, fake):
    fake.add_fault("/api/v2/context", "status", times=10, status=502, body="<html><body>Bad gateway</body></html>")

    err = assert_failure(cli("docs", "react", "hooks"), "UPSTREAM_ERROR", 5)

    assert "<html" not in err["message"]


def test_timeout_gives_timeout_exit_6_after_the_configured_retries(cli, fake, home):
    set_value("http.read_timeout", "0.4", home / "config.yaml")
    set_value("http.max_retries", "1", home / "config.yaml")
    fake.add_fault("/api/v2/libs/search", "timeout", times=5, delay=1.5)

    err = assert_failure(cli("docs", "react", "hooks"), "TIMEOUT", 6)

    assert len(fake.hits("/api/v2/libs/search")) == 2
    assert err["suggestions"]


def test_unreachable_server_is_network_error(cli, monkeypatch):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("CONTEXT7_API_URL", f"http://127.0.0.1:{port}/api")

    err = assert_failure(cli("docs", "react", "hooks"), "NETWORK_ERROR", 5)

    assert any("base URL" in s or "network" in s.lower() for s in err["suggestions"])


def test_invalid_base_url_is_an_actionable_network_error(cli, monkeypatch):
    monkeypatch.setenv("CONTEXT7_API_URL", "not-a-url")

    err = assert_failure(cli("docs", "react", "hooks"), "NETWORK_ERROR", 5)

    assert "base URL" in err["suggestions"][0]


def test_malformed_json_is_upstream_error_and_not_served_from_cache(cli, fake):
    fake.add_fault("/api/v2/libs/search", "malformed", times=1)

    err = assert_failure(cli("docs", "react", "hooks"), "UPSTREAM_ERROR", 5)
    again = cli("docs", "react", "hooks")

    assert "malformed" in err["message"]
    assert_success(again)
    assert len(fake.hits("/api/v2/libs/search")) == 2  # the bad 200 was evicted, not replayed


def test_a_budget_no_snippet_fits_is_refused_naming_one_that_does(cli, fake):
    """An empty list would read as "nothing documented"."""
    error = cli("docs", "react", "hooks", "--max-tokens", "100").json["error"]

    assert error["code"] == "USAGE_ERROR" and "--max-tokens 100 is too small" in error["message"]
    assert error["suggestions"][0].startswith("Use --max-tokens ")


def test_real_process_prints_one_document_for_errors_too(run_bin, fake):
    fake.add_fault("/api/v2/libs/search", "status", times=10, status=500)

    result = run_bin("gsd-research", "docs", "react", "hooks", env={"GSD_TEST": "1"})

    assert_failure(result, "UPSTREAM_ERROR", 5)


def test_a_host_that_does_not_resolve_fails_at_once_without_retries(cli, monkeypatch):
    import socket

    real, lookups = socket.getaddrinfo, []

    def getaddrinfo(host, *args, **kwargs):
        if host == "context7.offline.test":
            lookups.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setenv("CONTEXT7_API_URL", "http://context7.offline.test/api")

    err = assert_failure(cli("docs", "react", "hooks"), "NETWORK_ERROR", 5)

    assert lookups == ["context7.offline.test"]
    assert "does not resolve" in err["message"] and err["details"]["attempts"] == 1
    assert any("network" in s.lower() for s in err["suggestions"])
