"""One HTTP layer for every provider: a requests-cache session, one retry policy, one error map."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import requests

from gsd_research import __version__
from gsd_research.config import Config, home
from gsd_research.errors import (
    GsdError,
    InvalidApiKey,
    NetworkError,
    NotFound,
    ProviderError,
    RateLimited,
    TimeoutError_,
)

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# Credentials: never part of a cache key, redacted from stored responses.
IGNORED_PARAMETERS = (
    "Authorization",
    "Proxy-Authorization",
    "X-API-Key",
    "x-api-key",
    "x-goog-api-key",
    "api_key",
    "apikey",
    "api-key",
    "key",
    "access_token",
)
USER_AGENT = f"gsd-research/{__version__}"


@dataclass
class RetryPolicy:
    """How often and how long to retry: 408/429/5xx and transport faults."""

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    retry_after_max: float = 30.0

    def delay(self, attempt: int, response: requests.Response | None) -> float:
        """Seconds to wait before retry `attempt` (0-based): capped Retry-After, else backoff with jitter."""
        if response is not None:
            after = retry_after_seconds(response)
            if after is not None:
                return min(after, self.retry_after_max)
        expo = min(self.backoff_max, self.backoff_base * (2**attempt))
        return expo * (0.5 + random.random() / 2)


def retry_after_seconds(response: requests.Response) -> float | None:
    """Retry-After as seconds, from delta-seconds or an HTTP date; None when absent or unreadable."""
    raw = response.headers.get("Retry-After")
    if not raw:
        return None
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


def error_message(response: requests.Response) -> str:
    """The provider's own error text, kept short; never the request's headers."""
    try:
        body = response.json()
    except ValueError:
        text = (response.text or "").strip()
        if text.lower().startswith("<"):
            return f"HTTP {response.status_code} (HTML error page)"
        return text[:300] or f"HTTP {response.status_code}"
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            msg = err.get("message") or err.get("code") or err.get("type")
            if msg:
                return str(msg)[:300]
        for key in ("message", "detail", "error"):
            val = body.get(key)
            if isinstance(val, str) and val:
                return val[:300]
            if isinstance(val, dict) and val.get("error"):
                return str(val["error"])[:300]
    return f"HTTP {response.status_code}"


def raise_for_status(provider: str, response: requests.Response, key_hint: str | None = None) -> None:
    """Map a non-success answer to a typed error, once for every provider."""
    status = response.status_code
    if 200 <= status < 300:
        return
    msg = error_message(response)
    name = provider.capitalize() if provider else "Provider"
    details = {"status": status, "provider": provider}
    if status in (401, 403):
        hint = f"Check {key_hint}" if key_hint else "Check the provider's API key"
        raise InvalidApiKey(f"{name} rejected the credentials (HTTP {status}): {msg}", suggestions=[hint], details=details)
    if status == 404:
        raise NotFound(f"{name}: not found (HTTP 404): {msg}", details=details)
    if status == 429:
        raise RateLimited(
            f"{name} rate limit reached (HTTP 429): {msg}",
            suggestions=["Wait and retry", "Set an API key for higher limits" if key_hint else "Retry later"],
            retry_after=retry_after_seconds(response),
            details=details,
        )
    if status == 402 or status in (432, 433):
        raise ProviderError(f"{name} plan or spending limit reached (HTTP {status}): {msg}", code="QUOTA_EXCEEDED", details=details)
    if status == 408:
        raise TimeoutError_(f"{name} timed out (HTTP 408)", details=details)
    raise ProviderError(f"{name} answered HTTP {status}: {msg}", details=details)


def parse_json(provider: str, response: requests.Response) -> Any:
    """The answer's JSON, or a typed error when it is malformed."""
    try:
        return response.json()
    except ValueError:
        snippet = "HTML page" if (response.text or "").lstrip().startswith("<") else "non-JSON body"
        raise ProviderError(
            f"{provider.capitalize()} sent a malformed answer ({snippet}, HTTP {response.status_code})",
            suggestions=["Retry later; if it persists the provider's API may have changed"],
            details={"status": response.status_code, "provider": provider},
        ) from None


def build_session(config: Config):
    """The shared requests-cache session: SQLite under GSD_RESEARCH_HOME, Redis, or off."""
    import requests_cache

    backend_name = str(config.get("cache.backend", "sqlite")).lower()
    common = dict(
        allowable_codes=(200,),
        allowable_methods=("GET", "POST"),
        ignored_parameters=IGNORED_PARAMETERS,
        match_headers=False,
        expire_after=int(config.get("cache.ttl.default", 3600)),
        stale_if_error=False,
    )
    if backend_name == "redis":
        import redis

        url = str(config.get("cache.redis_url"))
        connection = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        backend = requests_cache.RedisCache(namespace="gsd_research", connection=connection)
    elif backend_name in ("off", "none", "memory"):
        backend = requests_cache.backends.BaseCache()
    else:
        path = cache_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        backend = requests_cache.SQLiteCache(str(path), wal=True, busy_timeout=30000)
    session = requests_cache.CachedSession(backend=backend, **common)
    session.headers["User-Agent"] = USER_AGENT
    return session


def cache_file():
    return home() / "cache" / "http_cache.sqlite"


class HttpClient:
    """Sends provider requests through the cached session with retries and typed errors."""

    def __init__(self, config: Config, *, no_cache: bool = False, session=None) -> None:
        self.config = config
        self.no_cache = no_cache
        self._session = session
        self.policy = RetryPolicy(
            max_retries=int(config.get("http.max_retries", 3)),
            backoff_base=float(config.get("http.backoff_base", 0.5)),
            backoff_max=float(config.get("http.backoff_max", 8.0)),
            retry_after_max=float(config.get("http.retry_after_max", 30.0)),
        )
        self.timeout = (float(config.get("http.connect_timeout", 10)), float(config.get("http.read_timeout", 60)))
        self.deadline = float(config.get("http.deadline", 120))
        self.upstream_requests = 0
        self.cache_hits = 0

    @property
    def session(self):
        if self._session is None:
            try:
                self._session = build_session(self.config)
            except GsdError:
                raise
            except Exception as exc:  # a broken cache backend must not break research
                raise ProviderError(
                    f"Cannot open the HTTP cache ({exc.__class__.__name__}: {str(exc)[:200]})",
                    code="INTERNAL_ERROR",
                    suggestions=["gsd-research cache clear", "gsd-research config set cache.backend sqlite"],
                ) from None
        return self._session

    def request(
        self,
        provider: str,
        method: str,
        url: str,
        *,
        ttl: int | None = None,
        expected: tuple[int, ...] = (200,),
        key_hint: str | None = None,
        timeout: tuple[float, float] | float | None = None,
        deadline: float | None = None,
        cache: bool = True,
        **kwargs: Any,
    ) -> requests.Response:
        """Send with retries; return answers whose status is in `expected`, raise typed errors otherwise."""
        started = time.monotonic()
        limit = deadline if deadline is not None else self.deadline
        attempt = 0
        while True:
            response, fault = self._send_once(method, url, ttl=ttl, timeout=timeout or self.timeout, cache=cache, **kwargs)
            retryable = fault is not None or response.status_code in RETRY_STATUSES
            if not retryable:
                if response.status_code in expected:
                    return response
                raise_for_status(provider, response, key_hint)
            wait = self.policy.delay(attempt, response)
            elapsed = time.monotonic() - started
            if attempt >= self.policy.max_retries or elapsed + wait >= limit:
                self._give_up(provider, response, fault, key_hint, attempt + 1)
            time.sleep(wait)
            attempt += 1

    def _send_once(self, method, url, *, ttl, timeout, cache, **kwargs):
        try:
            if cache and not self.no_cache:
                resp = self.session.request(method, url, expire_after=ttl, timeout=timeout, **kwargs)
            elif cache:
                resp = self.session.request(method, url, expire_after=ttl, timeout=timeout, force_refresh=True, **kwargs)
            else:
                with self.session.cache_disabled():
                    resp = self.session.request(method, url, timeout=timeout, **kwargs)
        except requests.Timeout as exc:
            self.upstream_requests += 1
            return None, exc
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            self.upstream_requests += 1
            return None, exc
        except requests.RequestException as exc:
            raise NetworkError(f"Request failed: {exc.__class__.__name__}", details={"url": _safe_url(url)}) from None
        if getattr(resp, "from_cache", False):
            self.cache_hits += 1
        else:
            self.upstream_requests += 1
        return resp, None

    def _give_up(self, provider, response, fault, key_hint, attempts):
        name = provider.capitalize()
        details = {"provider": provider, "attempts": attempts}
        if isinstance(fault, requests.Timeout):
            raise TimeoutError_(
                f"{name} did not answer in time after {attempts} attempt(s)",
                suggestions=["Retry later", "Raise http.read_timeout with gsd-research config set"],
                details=details,
            )
        if fault is not None:
            raise NetworkError(
                f"Cannot reach {name} ({fault.__class__.__name__}) after {attempts} attempt(s)",
                suggestions=["Check the network connection", f"Check the {name} base URL (gsd-research doctor)"],
                details=details,
            )
        try:
            raise_for_status(provider, response, key_hint)
        except GsdError as exc:
            exc.details.setdefault("attempts", attempts)
            raise


def _safe_url(url: str) -> str:
    """A URL without its query string, which may carry a key."""
    return url.split("?", 1)[0]
