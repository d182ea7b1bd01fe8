"""One HTTP layer for every provider: a requests-cache session, one retry policy, one error map."""

from __future__ import annotations

import random
import socket
import sys
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

import requests

from gsd_research.core.cache_stats import record_cache_event
from gsd_research.core.config import Config
from gsd_research.core.errors import (
    GsdError,
    InvalidApiKey,
    NetworkError,
    NotFound,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    TimeoutError_,
)
from gsd_research.core.http_cache import (
    USER_AGENT,
    build_session,
    cache_backend_name,
    canonical_headers,
    import_requests_cache,
    is_cache_failure,
    safe_delete,
)

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})

@dataclass
class RetryPolicy:
    """How often and how long to retry: 408/429/5xx and transport faults."""

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    retry_after_max: float = 30.0

    def delay(self, attempt: int, response: requests.Response | None) -> float:
        """Seconds to wait before retry `attempt` (0-based): capped Retry-After, else backoff with jitter.

        The backoff is base * 2**attempt (at most backoff_max) times a random factor in [0.5, 1].
        """
        if response is not None:
            after = retry_after_seconds(response)
            if after is not None:
                return min(after, self.retry_after_max)
        expo = min(self.backoff_max, self.backoff_base * (2**attempt))
        return expo * (0.5 + random.random() / 2)

    def waits_too_long(self, response: requests.Response | None) -> bool:
        """True when the server asks for a longer pause than we wait: give up now and tell the agent when."""
        after = retry_after_seconds(response) if response is not None else None
        return after is not None and after > self.retry_after_max


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


def provider_details(provider: str, response: requests.Response) -> dict:
    """`details` of an error answer: status and provider, and the answer's own text as a short fenced excerpt
    (`provider_message`): it comes from outside, so it never enters our message (see core.external)."""
    from gsd_research.core.external import excerpt

    details: dict = {"status": response.status_code, "provider": provider}
    text = error_message(response)
    if text and not text.startswith(f"HTTP {response.status_code}"):
        details["provider_message"] = excerpt(text)
    return details


def raise_for_status(provider: str, response: requests.Response, key_hint: str | None = None) -> None:
    """Map a non-success answer to a typed error, once for every provider. The message is ours; the
    provider's (or the site's) own words are in details.provider_message, fenced."""
    status = response.status_code
    if 200 <= status < 300:
        return
    name = provider.capitalize() if provider else "Provider"
    details = provider_details(provider, response)
    if status in (401, 403):
        hint = f"Check {key_hint}" if key_hint else "Check the provider's API key"
        raise InvalidApiKey(f"{name} rejected the credentials (HTTP {status})", suggestions=[hint], details=details)
    if status == 404:
        raise NotFound(f"{name}: not found (HTTP 404)", details=details,
                       suggestions=[f"Check the {name} base URL (gsd-research doctor)"])
    if status == 429:
        raise RateLimited(
            f"{name} rate limit reached (HTTP 429)",
            suggestions=["Wait and retry", "Set an API key for higher limits" if key_hint else "Retry later"],
            retry_after=retry_after_seconds(response),
            details=details,
        )
    if status == 402 or status in (432, 433):
        raise QuotaExceeded(f"{name} plan or spending limit reached (HTTP {status})",
                            details=details, suggestions=[f"Check the {name} plan and credits", "gsd-research usage"])
    if status == 408:
        raise TimeoutError_(f"{name} timed out (HTTP 408)", details=details,
                            suggestions=["Retry later", "Raise http.read_timeout with gsd-research config set"])
    raise ProviderError(f"{name} answered HTTP {status}", details=details,
                        suggestions=[f"Retry later: {name} had a problem", "gsd-research doctor"])


def parse_json(provider: str, response: requests.Response) -> Any:
    """The answer's JSON, or a typed error when it is malformed."""
    try:
        return response.json()
    except ValueError:
        forget(response)
        snippet = "HTML page" if (response.text or "").lstrip().startswith("<") else "non-JSON body"
        raise ProviderError(
            f"{provider.capitalize()} sent a malformed answer ({snippet}, HTTP {response.status_code})",
            suggestions=["Retry later; if it persists the provider's API may have changed"],
            details={"status": response.status_code, "provider": provider},
        ) from None


def forget(response: requests.Response) -> None:
    """Drop a stored answer that turned out unusable (malformed JSON, wrong shape), so it is not served again."""
    evict = getattr(response, "_gsd_evict", None)
    if evict is not None:
        evict()


class HttpClient:
    """Sends provider requests through the cached session with retries and typed errors."""

    sleep = staticmethod(time.sleep)  # the wait between tries; tests record it instead of taking it

    def __init__(self, config: Config, *, no_cache: bool = False, session=None) -> None:
        self.config = config
        self.no_cache = no_cache
        self._session = session
        self.policy = RetryPolicy(
            max_retries=int(config.number("http.max_retries", 3)),
            backoff_base=config.number("http.backoff_base", 0.5),
            backoff_max=config.number("http.backoff_max", 8.0),
            retry_after_max=config.number("http.retry_after_max", 30.0),
        )
        self.timeout = (config.number("http.connect_timeout", 10), config.number("http.read_timeout", 60))
        self.deadline = config.number("http.deadline", 120)
        self.upstream_requests = 0
        self.cache_hits = 0
        self.cached_expiries: list = []  # when each answer served from the cache expires (a datetime; None: never)
        self.cache_broken: str | None = None  # why the cache is bypassed for the rest of this call
        self.cache_off = cache_backend_name(config) == "off"

    @property
    def session(self):
        if self._session is None:
            try:
                self._session = build_session(self.config)
            except GsdError:
                raise
            except Exception as exc:  # a broken cache backend must not break research: go uncached
                self._degrade(exc)
                requests_cache = import_requests_cache(False)
                self._session = requests_cache.CachedSession(backend=requests_cache.backends.BaseCache())
                self._session.headers["User-Agent"] = USER_AGENT
        return self._session

    def cache_backend(self):
        """The shared cache's backend for answers stored outside `request` (streamed pages, ddgs),
        or None when the cache is off or broken for this call."""
        if self.cache_off:
            return None
        session = self.session
        return None if self.cache_broken else session.cache

    def _degrade(self, exc: BaseException) -> None:
        """Bypass the cache for the rest of this call and say why on stderr (never on stdout)."""
        if self.cache_broken is None:
            from gsd_research.core.secrets import scrub

            self.cache_broken = scrub(f"{exc.__class__.__name__}: {str(exc)[:200]}")
            print(f"gsd-research: HTTP cache unavailable ({self.cache_broken}); continuing without it. "
                  "Check with: gsd-research doctor", file=sys.stderr)

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
        idempotent: bool = True,
        retries: int | None = None,
        **kwargs: Any,
    ) -> requests.Response:
        """Send with retries; return answers whose status is in `expected`, raise typed errors otherwise.

        `deadline` (seconds from now, else http.deadline) bounds the whole call, answers' bodies included (a
        streamed one too, read with `read_streamed`): every try's timeouts are cut to what is left.
        `idempotent=False` (a paid POST without an idempotency key) is sent again only when the provider
        certainly did not take it (429, 408, or no connection made); otherwise the error says
        `details.maybe_accepted` so the caller never pays twice. `retries` overrides http.max_retries (0: a
        probe, tried once with its full timeout; never a spent deadline, which cuts timeouts to nothing).
        """
        started = time.monotonic()
        limit = deadline if deadline is not None else self.deadline
        if kwargs.get("headers"):
            kwargs["headers"] = canonical_headers(kwargs["headers"])
        kwargs["hooks"] = {"response": _bound_body(started, limit, deadline is None)}
        attempt = 0
        while True:
            left = limit - (time.monotonic() - started)
            response, fault = self._send_once(method, url, ttl=ttl, timeout=_capped(timeout or self.timeout, left),
                                              cache=cache, **kwargs)
            retryable = fault is not None or response.status_code in RETRY_STATUSES
            if not retryable:
                if response.status_code in expected:
                    return response
                raise_for_status(provider, response, key_hint)
            wait = self.policy.delay(attempt, response)
            elapsed = time.monotonic() - started
            if (attempt >= (self.policy.max_retries if retries is None else retries) or elapsed + wait >= limit or self.policy.waits_too_long(response)
                    or unresolvable(fault) or not (idempotent or not_taken(response, fault))):
                self._give_up(provider, response, fault, key_hint, attempt + 1, method,
                              cut=_cut_by(limit, started, deadline is None))
            self.sleep(wait)
            attempt += 1

    def _send_once(self, method, url, *, ttl, timeout, cache, **kwargs):
        use_cache = cache and self.cache_broken is None and not self.cache_off
        try:
            resp = self._dispatch(method, url, ttl=ttl, timeout=timeout, use_cache=use_cache, **kwargs)
        except requests.Timeout as exc:
            self.upstream_requests += 1
            return None, exc
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            self.upstream_requests += 1
            return None, exc
        except (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
                requests.exceptions.InvalidSchema) as exc:
            raise NetworkError(
                f"Invalid provider URL {_safe_url(url)!r} ({exc.__class__.__name__})",
                suggestions=["Check the provider's base URL variable or config (gsd-research config show)"],
                details={"url": _safe_url(url)},
            ) from None
        except requests.RequestException as exc:
            raise NetworkError(f"Request failed: {exc.__class__.__name__}", details={"url": _safe_url(url)}) from None
        except Exception as exc:  # the cache backend failed (SQLite locked or corrupt, Redis down)
            if not use_cache or not is_cache_failure(exc):
                raise
            self._degrade(exc)
            return self._send_once(method, url, ttl=ttl, timeout=timeout, cache=cache, **kwargs)
        self._account(resp, use_cache)
        return resp, None

    def _dispatch(self, method, url, *, ttl, timeout, use_cache, **kwargs):
        if not use_cache:
            with self.session.cache_disabled():
                return self.session.request(method, url, timeout=timeout, **kwargs)
        if self.no_cache:
            return self.session.request(method, url, expire_after=ttl, timeout=timeout, force_refresh=True, **kwargs)
        return self.session.request(method, url, expire_after=ttl, timeout=timeout, **kwargs)

    def _account(self, resp, use_cache: bool) -> None:
        """Count the answer (this call and the persistent counters) and let callers evict it if unusable."""
        if getattr(resp, "from_cache", False):
            self.cache_hits += 1
            self.cached_expiries.append(getattr(resp, "expires", None))
        else:
            self.upstream_requests += 1
        key = getattr(resp, "cache_key", None)
        if use_cache and key:
            cache = self.session.cache
            resp._gsd_evict = lambda: safe_delete(cache, key)
        if use_cache and self.config.get("cache.stats", True):
            kind = "hits" if getattr(resp, "from_cache", False) else ("refreshes" if self.no_cache else "misses")
            record_cache_event(kind)

    def _give_up(self, provider, response, fault, key_hint, attempts, method="GET", cut=None):
        details = {"provider": provider, "attempts": attempts}
        if method.upper() not in ("GET", "HEAD") and not not_taken(response, fault):
            details["maybe_accepted"] = True  # the provider may have taken (and billed) the request
        if fault is not None:
            raise fault_error(provider, fault, details, cut)
        try:
            raise_for_status(provider, response, key_hint)
        except GsdError as exc:
            for key, value in details.items():
                exc.details.setdefault(key, value)
            raise


def fault_error(provider: str, fault: BaseException, details: dict, cut: tuple[float, bool] | None = None) -> GsdError:
    """A transport fault as a typed error: a timeout (`cut`: the call's spent deadline in seconds, and whether
    it is http.deadline) is TIMEOUT, anything else NETWORK_ERROR."""
    name, attempts = provider.capitalize(), details.get("attempts", 1)
    if timed_out(fault) and cut is not None:
        seconds, configured = cut
        return TimeoutError_(f"{name} did not finish answering within the {seconds:g}-second deadline",
                             suggestions=["Retry later"] + (["Raise http.deadline with gsd-research config set"]
                                                            if configured else []),
                             details=dict(details, deadline_s=seconds))
    if timed_out(fault):
        return TimeoutError_(f"{name} did not answer in time after {attempts} attempt(s)",
                             suggestions=["Retry later", "Raise http.read_timeout with gsd-research config set"],
                             details=details)
    if unresolvable(fault):
        return NetworkError(f"Cannot reach {name}: its host name does not resolve (offline, or a wrong base URL)",
                            suggestions=["Check the network connection", f"Check the {name} base URL (gsd-research doctor)"],
                            details=details)
    return NetworkError(f"Cannot reach {name} ({fault.__class__.__name__}) after {attempts} attempt(s)",
                        suggestions=["Check the network connection", f"Check the {name} base URL (gsd-research doctor)"],
                        details=details)


def read_streamed(provider: str, response: requests.Response, max_bytes: int) -> tuple[bytes, bool]:
    """A streamed answer's body (at most `max_bytes`, decompressed; True when cut there), read within its
    request's deadline; a fault while reading is a typed error."""
    chunks, size = [], 0
    try:
        for chunk in response.iter_content(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                response.close()
                return b"".join(chunks)[:max_bytes], True
    except requests.RequestException as fault:
        response.close()
        bound = getattr(response, "_gsd_deadline", None)
        raise fault_error(provider, fault, {"provider": provider}, bound and _cut_by(*bound)) from None
    return b"".join(chunks), False


class _BoundedSocket:
    """An answer's socket as its body reader sees it: no receive waits past `stop_at` (a time.monotonic()
    instant), so a server trickling bytes cannot keep a call alive past its deadline."""

    def __init__(self, sock: socket.socket, stop_at: float) -> None:
        self._sock, self._stop_at = sock, stop_at

    def recv_into(self, buffer, nbytes: int = 0, flags: int = 0) -> int:
        left = self._stop_at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the call's deadline passed")
        given = self._sock.gettimeout()
        self._sock.settimeout(left if given is None else min(given, left))
        try:
            return self._sock.recv_into(buffer, nbytes, flags)
        finally:
            self._sock.settimeout(given)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def _bound_body(started: float, limit: float, configured: bool):
    """A response hook (it runs before the body is read) that puts the body's reads under the call's
    deadline: the timeouts bound each receive only, never the whole answer."""

    def hook(response: requests.Response, **_kwargs) -> requests.Response:
        stream = getattr(getattr(getattr(response.raw, "_fp", None), "fp", None), "raw", None)  # socket.SocketIO
        sock = getattr(stream, "_sock", None)
        if isinstance(sock, socket.socket):
            stream._sock = _BoundedSocket(sock, started + limit)
        response._gsd_deadline = (limit, started, configured)  # for read_streamed's error
        return response

    return hook


def timed_out(fault: BaseException | None) -> bool:
    """A timeout, while waiting for the answer or (requests calls it a ConnectionError) reading its body."""
    from urllib3.exceptions import ReadTimeoutError

    return isinstance(fault, requests.Timeout) or (
        isinstance(fault, requests.ConnectionError) and bool(fault.args) and isinstance(fault.args[0], ReadTimeoutError))


def _cut_by(limit: float, started: float, configured: bool) -> tuple[float, bool] | None:
    """(limit, configured) when the call's deadline is spent, else None."""
    return (limit, configured) if time.monotonic() - started >= limit - 0.05 else None


def _capped(timeout, left: float):
    """`timeout` (one number or (connect, read)) cut to the `left` seconds of a deadline (at least 10 ms)."""
    left = max(0.01, left)
    if isinstance(timeout, tuple):
        return tuple(min(float(t), left) for t in timeout)
    return min(float(timeout), left)


def not_taken(response: requests.Response | None, fault: BaseException | None) -> bool:
    """True when the provider certainly did not take the request: it answered 408/429, or no connection
    was ever made. A timeout or a dropped connection after sending, a 5xx: it may have."""
    if fault is None:
        return response is not None and response.status_code in (408, 429)
    if isinstance(fault, requests.exceptions.ConnectTimeout):
        return True
    if not isinstance(fault, requests.ConnectionError):
        return False
    from urllib3.exceptions import NewConnectionError

    seen, cause = 0, fault
    while cause is not None and seen < 8:
        if isinstance(cause, NewConnectionError):
            return True
        cause = getattr(cause, "reason", None) or (cause.args[0] if cause.args and
                                                   isinstance(cause.args[0], BaseException) else None)
        seen += 1
    return False


def unresolvable(fault: BaseException | None) -> bool:
    """A connection fault caused by DNS (no network, unknown host): retrying it only delays the answer."""
    if not isinstance(fault, requests.ConnectionError):
        return False
    from urllib3.exceptions import NameResolutionError

    seen, cause = 0, fault
    while cause is not None and seen < 8:
        if isinstance(cause, NameResolutionError):
            return True
        cause = getattr(cause, "reason", None) or (cause.args[0] if cause.args and
                                                   isinstance(cause.args[0], BaseException) else None)
        seen += 1
    return False


def _safe_url(url: str) -> str:
    """A URL without its query string, which may carry a key."""
    return url.split("?", 1)[0]

