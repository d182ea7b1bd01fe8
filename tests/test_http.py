"""The shared HTTP layer: retry policy (unit), and the cached session against the fake server (real HTTP)."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from email.utils import formatdate

import pytest
import requests

from gsd_research.core.cache_stats import read_cache_stats
from gsd_research.core.config import Config
from gsd_research.core.errors import (
    GsdError,
    InvalidApiKey,
    NetworkError,
    NotFound,
    ProviderError,
    RateLimited,
    TimeoutError_,
)
from gsd_research.core.http import (
    HttpClient,
    RetryPolicy,
    not_taken,
    parse_json,
    raise_for_status,
    retry_after_seconds,
)
from gsd_research.core.http_cache import IGNORED_PARAMETERS, cache_file, canonical_headers
from tests.cache_fixtures import expire_entries

CREDENTIALS = "sk-canary-http-0001"


def response(status: int = 200, headers: dict | None = None, body: bytes = b"{}") -> requests.Response:
    resp = requests.Response()
    resp.status_code = status
    resp.headers.update(headers or {})
    resp._content = body
    return resp


# -- retry policy (unit) ------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, seconds", [
    ("7", 7.0), (" 2.5 ", 2.5), ("-5", 0.0), (+20, 20.0), (-100, 0.0),  # numbers: HTTP dates that far from now
    (None, None), ("", None), ("soon", None), ("Mon, 99 Foo 2026", None),
], ids=["seconds", "padded", "negative", "date ahead", "date past", "absent", "empty", "word", "bad date"])
def test_retry_after_is_read_as_seconds_or_an_http_date(raw, seconds):
    if isinstance(raw, int):
        raw = formatdate(time.time() + raw, usegmt=True)
    headers = {"Retry-After": raw} if raw is not None else {}

    assert retry_after_seconds(response(429, headers)) == pytest.approx(seconds, abs=2)


def test_retry_after_is_capped():
    policy = RetryPolicy(retry_after_max=5)

    assert policy.delay(0, response(429, {"Retry-After": "3"})) == 3
    assert policy.delay(0, response(429, {"Retry-After": "60"})) == 5
    assert policy.waits_too_long(response(429, {"Retry-After": "60"}))
    assert not policy.waits_too_long(response(429, {"Retry-After": "5"}))
    assert not policy.waits_too_long(response(503))


@pytest.mark.parametrize("attempt", range(6))
def test_backoff_is_exponential_capped_with_jitter_between_half_and_full(attempt, monkeypatch):
    policy = RetryPolicy(backoff_base=0.5, backoff_max=4.0)
    expo = min(4.0, 0.5 * 2**attempt)

    monkeypatch.setattr("gsd_research.core.http.random.random", lambda: 0.0)
    low = policy.delay(attempt, response(503))
    monkeypatch.setattr("gsd_research.core.http.random.random", lambda: 0.999999)
    high = policy.delay(attempt, None)

    assert low == pytest.approx(expo / 2)
    assert high == pytest.approx(expo, rel=1e-5)


def test_backoff_jitter_actually_varies():
    policy = RetryPolicy(backoff_base=1.0, backoff_max=8.0)

    delays = {round(policy.delay(2, None), 6) for _ in range(50)}

    assert len(delays) > 40 and all(2.0 <= d <= 4.0 for d in delays)


@pytest.mark.parametrize("status, error", [(400, ProviderError), (401, InvalidApiKey), (402, ProviderError),
                                           (403, InvalidApiKey), (404, NotFound), (408, TimeoutError_),
                                           (429, RateLimited), (432, ProviderError), (500, ProviderError),
                                           (502, ProviderError), (503, ProviderError)])
def test_each_error_status_maps_to_its_error_with_a_suggestion_and_fenced_provider_words(status, error):
    with pytest.raises(error) as info:
        raise_for_status("tavily", response(status, body=b'{"error": "x", "message": "Provider said no"}'),
                         key_hint="TAVILY_API_KEY")

    assert info.value.details["status"] == status
    assert info.value.suggestions, info.value.to_dict()
    assert "Provider said no" not in info.value.message  # the provider's words are never ours
    said = info.value.details.get("provider_message")
    assert status == 408 or said == "[UNTRUSTED TEXT]\nProvider said no\n[END UNTRUSTED TEXT]"


def test_quota_statuses_are_quota_exceeded():
    with pytest.raises(ProviderError) as info:
        raise_for_status("tavily", response(432, body=b'{"detail": {"error": "plan limit"}}'))

    assert info.value.code == "QUOTA_EXCEEDED" and info.value.exit_code == 5


def test_success_statuses_pass():
    raise_for_status("context7", response(200))
    raise_for_status("context7", response(204))


def test_parse_json_rejects_html_with_a_typed_error():
    with pytest.raises(ProviderError) as info:
        parse_json("gemini", response(200, body=b"<html>oops</html>"))

    assert "HTML" in info.value.message and info.value.code == "UPSTREAM_ERROR"


def test_credential_header_names_are_canonical_whatever_their_case():
    headers = canonical_headers({"authorization": "a", "X-Api-Key": "b", "X-GOOG-API-KEY": "c", "Accept": "d"})

    assert sorted(headers.values()) == ["a", "b", "c", "d"]
    assert {k for k, v in headers.items() if v != "d"} <= set(IGNORED_PARAMETERS)
    assert "Accept" in headers


# -- the cached session against the fake server ---------------------------------------------------------


@pytest.fixture
def echo(fake):
    """A POST route on the fake server that answers with a counter (so a cached answer is recognisable)."""
    if not any(p.pattern.startswith("/test/") for _, p, _ in fake.routes):
        from tests.fakes.server import Reply

        def handler(req):
            fake.state["n"] = fake.state.get("n", 0) + 1
            status = int(req.query.get("status", "200"))
            return Reply(status, {"n": fake.state["n"], "body_sha1": hashlib.sha1(req.body).hexdigest()})

        fake.route("POST", r"/test/echo")(handler)
        fake.route("GET", r"/test/echo")(handler)
    return fake.url + "/test/echo"


def client(**kwargs) -> HttpClient:
    return HttpClient(Config(), **kwargs)


def test_post_bodies_are_part_of_the_cache_key(echo, fake):
    http = client()

    a1 = http.request("test", "POST", echo, json={"q": "a"}, ttl=60).json()
    a2 = http.request("test", "POST", echo, json={"q": "a"}, ttl=60).json()
    b = http.request("test", "POST", echo, json={"q": "b"}, ttl=60).json()

    assert a1 == a2 and b["n"] != a1["n"]
    assert len(fake.hits("/test/echo")) == 2
    assert http.cache_hits == 1 and http.upstream_requests == 2


def test_credentials_are_not_part_of_the_cache_key_nor_stored(echo, fake, home):
    http = client()
    first = http.request("test", "POST", echo, json={"q": "a", "api_key": CREDENTIALS + "-body"}, ttl=60,
                         headers={"Authorization": f"Bearer {CREDENTIALS}-bearer"}).json()

    variants = [
        {"json": {"q": "a", "api_key": "other"}, "headers": {"authorization": "Bearer other"}},
        {"json": {"q": "a", "api_key": "x"}, "headers": {"X-Goog-Api-Key": CREDENTIALS + "-goog"}},
        {"json": {"q": "a", "api_key": "y"}, "headers": {"x-API-key": CREDENTIALS + "-xapi"}},
    ]
    answers = [http.request("test", "POST", echo, ttl=60, **v).json() for v in variants]
    keyed = http.request("test", "GET", echo + f"?key={CREDENTIALS}-query&x=1", ttl=60).json()

    assert all(a == first for a in answers)
    assert len(fake.hits("/test/echo")) == 2  # the POST once, the GET once
    assert keyed["n"] == 2
    http.session.cache.responses.close()
    stored = b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
    assert b"test/echo" in stored and b"sk-canary-http" not in stored
    assert fake.hits("/test/echo")[0].headers["authorization"].endswith("-bearer")  # the key was really sent


@pytest.mark.parametrize("status", [201, 202, 203, 204, 301, 400, 404])
def test_only_200_answers_are_cached(echo, fake, status):
    http = client()

    for _ in range(2):
        http.request("test", "POST", echo + f"?status={status}", json={}, ttl=60, expected=(status,),
                     allow_redirects=False)

    assert len(fake.hits("/test/echo")) == 2
    assert http.cache_hits == 0


def test_no_cache_bypasses_reads_and_refreshes_the_entry(echo, fake):
    client().request("test", "GET", echo, ttl=60)

    fresh = client(no_cache=True).request("test", "GET", echo, ttl=60).json()
    cached = client().request("test", "GET", echo, ttl=60).json()

    assert fresh["n"] == 2 and cached["n"] == 2
    assert len(fake.hits("/test/echo")) == 2
    stats = read_cache_stats()
    assert (stats["hits"], stats["misses"], stats["refreshes"]) == (1, 1, 1)


def test_uncached_requests_leave_the_cache_alone(echo, fake):
    http = client()

    http.request("test", "GET", echo, ttl=60, cache=False)
    http.request("test", "GET", echo, ttl=60, cache=False)

    assert len(fake.hits("/test/echo")) == 2
    assert read_cache_stats()["hits"] == 0


def test_expired_entries_are_fetched_again(echo, fake):
    http = client()

    http.request("test", "GET", echo, ttl=60)
    expire_entries(cache_file())
    http.request("test", "GET", echo, ttl=60)

    assert len(fake.hits("/test/echo")) == 2


def test_a_retry_whose_wait_would_pass_the_deadline_is_not_made(echo, fake, retry_waits):
    fake.add_fault("/test/echo", "status", times=50, status=503)
    http = client()
    http.policy = RetryPolicy(backoff_base=40, backoff_max=40)  # every wait is at least 20 s

    with pytest.raises(ProviderError):
        http.request("test", "GET", echo, ttl=60, deadline=15)

    assert len(fake.hits("/test/echo")) == 1 and retry_waits == []


def test_the_deadline_also_cuts_each_tries_read_timeout(echo, fake, monkeypatch):
    """A try must not outlast the deadline by a full read timeout: the transport is given what is left."""
    fake.add_fault("/test/echo", "timeout", times=5, delay=3)
    http = client()
    http.timeout = (2.0, 10.0)
    given = []
    send = http.session.request
    monkeypatch.setattr(http.session, "request", lambda *a, **kw: given.append(kw["timeout"]) or send(*a, **kw))

    with pytest.raises(TimeoutError_):
        http.request("test", "GET", echo, ttl=60, cache=False, deadline=0.6)

    assert given and all(0 < read <= 0.6 and connect <= 0.6 for connect, read in given)


@pytest.mark.timeout(25)  # before the deadline bounded the body, the drip's 30 s ran out first
@pytest.mark.parametrize("cache", [True, False])
def test_a_body_trickling_in_past_the_deadline_is_a_timeout(echo, fake, cache):
    fake.add_fault("/test/echo", "drip", delay=0.05, body={"n": 1, "pad": "x" * 400})

    with pytest.raises(TimeoutError_) as raised:
        client().request("test", "GET", echo, ttl=60, cache=cache, deadline=1)

    assert "within the 1-second deadline" in raised.value.message
    assert raised.value.details["deadline_s"] == 1


@pytest.mark.parametrize("kind, opts, sends, maybe", [
    ("status", {"status": 500}, 1, True),
    ("status", {"status": 503}, 1, True),
    ("timeout", {"delay": 3}, 1, True),
    ("drop", {}, 1, True),
    ("status", {"status": 429, "retry_after": "0"}, 4, None),  # refused: certainly not taken, sent again
])
def test_a_non_idempotent_post_is_sent_again_only_when_certainly_not_taken(echo, fake, kind, opts, sends, maybe):
    fake.add_fault("/test/echo", kind, times=10, **opts)
    http = client()
    http.timeout = (2.0, 0.5)

    with pytest.raises(GsdError) as info:
        http.request("test", "POST", echo, json={"paid": True}, cache=False, idempotent=False)

    assert len(fake.hits("/test/echo")) == sends
    assert info.value.details.get("maybe_accepted") is maybe


def _refused() -> requests.ConnectionError:
    from urllib3.exceptions import MaxRetryError, NewConnectionError

    return requests.ConnectionError(MaxRetryError(None, "/x", reason=NewConnectionError(None, "refused")))


@pytest.mark.parametrize("status, fault, taken", [
    (429, None, False), (408, None, False), (503, None, True), (None, "connect timeout", False),
    (None, "refused", False), (None, "read timeout", True), (None, "reset", True),
])
def test_a_request_is_known_not_taken_only_when_refused_or_never_connected(status, fault, taken):
    faults = {"connect timeout": requests.exceptions.ConnectTimeout(), "refused": _refused(),
              "read timeout": requests.exceptions.ReadTimeout(), "reset": requests.ConnectionError("reset"), None: None}

    assert not_taken(response(status) if status else None, faults[fault]) is (not taken)


def test_an_idempotent_post_is_retried_on_5xx_and_says_it_may_have_been_taken(echo, fake):
    fake.add_fault("/test/echo", "status", times=10, status=502)

    with pytest.raises(ProviderError) as info:
        client().request("test", "POST", echo, json={"idempotency_key": "k"}, cache=False)

    assert len(fake.hits("/test/echo")) == 4 and info.value.details["maybe_accepted"] is True


def test_connection_faults_become_network_error_with_attempts(echo, fake):
    fake.add_fault("/test/echo", "drop", times=50)

    with pytest.raises(NetworkError) as info:
        client().request("test", "GET", echo, ttl=60)

    assert info.value.details["attempts"] == 4


def test_any_other_request_failure_is_a_network_error_naming_only_its_kind(echo, fake):
    with pytest.raises(NetworkError) as info:
        client().request("test", "GET", echo, cache=False, headers={"X-Probe": "a\nsmuggled: header"})

    assert info.value.message == "Request failed: InvalidHeader" and "smuggled" not in str(info.value.to_dict())
    assert fake.hits("/test/echo") == []


def test_a_corrupt_cache_file_degrades_to_uncached_calls(echo, fake, capsys):
    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not a sqlite database" * 100)

    answer = client().request("test", "GET", echo, ttl=60)

    assert answer.status_code == 200
    assert "HTTP cache unavailable" in capsys.readouterr().err


def test_a_locked_cache_degrades_instead_of_failing(echo, fake, monkeypatch, capsys):
    http = client()
    http.request("test", "GET", echo, ttl=60)

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(http.session.cache, "get_response", locked)
    answer = http.request("test", "GET", echo + "?other=1", ttl=60)

    assert answer.status_code == 200 and http.cache_broken
    assert "database is locked" in capsys.readouterr().err


def test_cache_off_never_stores(echo, fake, home):
    from gsd_research.core.config import set_value

    set_value("cache.backend", "off", home / "config.yaml")
    http = client()

    http.request("test", "GET", echo, ttl=60)
    http.request("test", "GET", echo, ttl=60)

    assert len(fake.hits("/test/echo")) == 2
    assert not cache_file().exists()


@pytest.mark.parametrize("line", ["http:\n  max_retries: abc\n", "http:\n  read_timeout: -5\n",
                                  "cache:\n  ttl:\n    docs: [1, 2]\n", "http:\n  deadline: .inf\n"])
def test_bad_numbers_in_a_hand_edited_config_are_usage_errors(cli, fake, home, line):
    """Regression: `http.max_retries: abc` in config.yaml crashed every call with INTERNAL_ERROR."""
    (home / "config.yaml").write_text(line)
    r = cli("docs", "react", "hooks")
    assert r.code == 2 and r.json["error"]["code"] == "USAGE_ERROR", r.stdout
    key = r.json["error"]["message"].split()[1]
    assert key.split(".")[-1] in line and any("config set" in s for s in r.json["error"]["suggestions"])


def test_cache_backend_for_answers_stored_outside_request_is_none_when_off_or_broken(echo, fake):
    cache_file().parent.mkdir(parents=True, exist_ok=True)
    cache_file().write_bytes(b"this is not a sqlite database" * 100)
    broken = client()
    broken.request("test", "GET", echo, ttl=60)  # finds the damage and goes uncached

    assert broken.cache_broken and broken.cache_backend() is None
    assert HttpClient(Config({"cache": {"backend": "off"}})).cache_backend() is None
    cache_file().unlink()
    assert client().cache_backend() is not None
