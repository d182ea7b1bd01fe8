"""Keyless web search through the ddgs library, behind a small backend interface tests can replace.

ddgs scrapes public engines with its own HTTP client, so requests-cache cannot see its traffic; its
answers are stored in the shared cache under a synthetic `ddgs://` URL instead, with the search TTL.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta, timezone
from typing import Protocol
from urllib.parse import urlencode, urlsplit

from gsd_research.core.errors import (
    NetworkError,
    NoBackend,
    ProviderError,
    RateLimited,
    TimeoutError_,
    reinstall_hint,
)
from gsd_research.core.external import safe_date, safe_url

NAME = "ddgs"
MAX_RESULTS = 30  # ddgs pages through engines; more than this is slow and mostly duplicates
TIMELIMITS = {"day": "d", "week": "w", "month": "m", "year": "y", "d": "d", "w": "w", "m": "m", "y": "y"}
_NETWORK_HINTS = ("dns", "connect", "error sending request", "network", "unreachable", "ssl", "tls")


class KeylessBackend(Protocol):
    """What the keyless provider needs from a search library: raw result dicts or a typed error."""

    name: str

    def search(self, category: str, query: str, *, max_results: int, timelimit: str | None) -> list[dict]:
        """`category` is "text" or "news"; returns ddgs-shaped dicts (title, href|url, body, date?)."""
        ...


class DdgsBackend:
    """The real backend: the ddgs library, imported only when a keyless search runs."""

    name = NAME

    def __init__(self, timeout: float = 10.0, region: str = "us-en", safesearch: str = "moderate",
                 engines: str = "auto") -> None:
        self.timeout, self.region, self.safesearch, self.engines = timeout, region, safesearch, engines

    @property
    def fingerprint(self) -> str:
        """The settings that change answers, so the cache keeps them apart."""
        return f"{self.region}|{self.safesearch}|{self.engines}"

    def search(self, category: str, query: str, *, max_results: int, timelimit: str | None) -> list[dict]:
        try:
            from ddgs import DDGS
            from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
        except ImportError:
            raise NoBackend("The keyless search library ddgs is not installed",
                           suggestions=[reinstall_hint(), "Set TAVILY_API_KEY to use Tavily"]) from None
        try:
            client = DDGS(timeout=int(self.timeout))
            call = client.news if category == "news" else client.text
            return list(call(query, region=self.region, safesearch=self.safesearch, timelimit=timelimit,
                             max_results=max_results, backend=self.engines) or [])
        except RatelimitException as exc:
            raise RateLimited("Keyless search (ddgs) was rate limited",
                              suggestions=["Wait and retry", "Set TAVILY_API_KEY to use Tavily"],
                              details=_details(exc)) from None
        except TimeoutException as exc:
            raise TimeoutError_("Keyless search (ddgs) timed out", suggestions=["Retry later"],
                                details=_details(exc)) from None
        except DDGSException as exc:
            return _no_results_or_raise(exc)
        except Exception as exc:  # noqa: BLE001 - a scraping library can fail in any way; never a traceback
            raise ProviderError(f"Keyless search (ddgs) failed: {exc.__class__.__name__}",
                                details=_details(exc)) from None


def _short(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or exc.__class__.__name__


def _details(exc: BaseException) -> dict:
    """The scraping library's words (they quote the engines' answers) fenced, apart from our message."""
    from gsd_research.core.external import excerpt

    return {"provider": NAME, "provider_message": excerpt(_short(exc))}


def _no_results_or_raise(exc: BaseException) -> list[dict]:
    text = _short(exc)
    if text.rstrip(".").lower().endswith("no results found"):
        return []
    if any(hint in text.lower() for hint in _NETWORK_HINTS):
        raise NetworkError("Keyless search (ddgs) could not reach any search engine",
                           suggestions=["Check the network connection", "Set TAVILY_API_KEY to use Tavily"],
                           details=_details(exc))
    raise ProviderError("Keyless search (ddgs) failed", details=_details(exc))


def make_backend(config) -> KeylessBackend:
    """The configured keyless backend (tests replace this function with a fake boundary)."""
    return DdgsBackend(timeout=min(config.number("search.ddgs.timeout", 10), 3600.0),
                       region=str(config.get("search.ddgs.region", "us-en")),
                       safesearch=str(config.get("search.ddgs.safesearch", "moderate")),
                       engines=str(config.get("search.ddgs.engines", "auto")))


class Keyless:
    """Keyless search: query shaping, domain filters, normalization and the shared cache."""

    name = NAME

    def __init__(self, http, backend: KeylessBackend, ttl: int) -> None:
        self.http = http
        self.backend = backend
        self.ttl = ttl

    def search(self, query: str, *, max_results: int | None = None, depth: str = "basic", topic: str = "general",
               time_range: str | None = None, include_domains: tuple[str, ...] = (),
               exclude_domains: tuple[str, ...] = (), include_answer: bool = True) -> dict:
        """One keyless search, shaped like the Tavily answer (no provider summary)."""
        del depth, include_answer  # Tavily-only settings
        count = max(0, min(MAX_RESULTS, 5 if max_results is None else int(max_results)))
        call = {"category": "news" if topic == "news" else "text",
                "query": shape_query(query, include_domains, exclude_domains),
                "max_results": count, "timelimit": TIMELIMITS.get(time_range or "")}
        raw, when, from_cache = self._cached_call(call) if count else ([], datetime.now(timezone.utc), False)
        results = filter_domains(normalize_results(raw), include_domains, exclude_domains)[:count]
        return {"provider": NAME, "results": results, "summary": None, "max_results_sent": count,
                "fetched_at": when, "from_cache": from_cache, "request_id": None}

    def _cached_call(self, call: dict) -> tuple[list[dict], datetime, bool]:
        params = dict(call, settings=getattr(self.backend, "fingerprint", ""))
        url = f"ddgs://{call['category']}?" + urlencode({k: v for k, v in params.items() if v is not None})
        key = "ddgs-" + hashlib.sha256(url.encode("utf-8")).hexdigest()[:40]
        cache = self._cache()
        if cache is not None and not self.http.no_cache:
            hit = _read(cache, key)
            if hit is not None:
                self.http.cache_hits += 1
                self._record("hits")
                return hit
        self.http.upstream_requests += 1
        if cache is not None:
            self._record("refreshes" if self.http.no_cache else "misses")
        raw = self.backend.search(call["category"], call["query"], max_results=call["max_results"],
                                  timelimit=call["timelimit"])
        raw = [r for r in raw if isinstance(r, dict)]
        now = datetime.now(timezone.utc)
        if cache is not None and raw:
            _write(cache, key, url, raw, now, self.ttl)
        return raw, now, False

    def _cache(self):
        try:
            return self.http.cache_backend()
        except Exception:  # noqa: BLE001 - no cache is a slower search, not a failed one
            return None

    def _record(self, kind: str) -> None:
        """Count a hit or miss in the shared cache statistics, where the HTTP layer keeps them."""
        from gsd_research.core import http as http_layer

        record = getattr(http_layer, "record_cache_event", None)
        if record is not None and self.http.config.get("cache.stats", True):
            record(kind)


def _read(cache, key: str) -> tuple[list[dict], datetime, bool] | None:
    try:
        resp = cache.get_response(key)
        if resp is None or resp.is_expired:
            return None
        created = resp.created_at if resp.created_at.tzinfo else resp.created_at.replace(tzinfo=timezone.utc)
        return json.loads(resp.content), created, True
    except Exception:  # noqa: BLE001 - a broken entry is a miss
        return None


def _write(cache, key: str, url: str, raw: list[dict], now: datetime, ttl: int) -> None:
    try:
        from requests.structures import CaseInsensitiveDict
        from requests_cache.models import CachedRequest, CachedResponse

        resp = CachedResponse(content=json.dumps(raw).encode("utf-8"), status_code=200, url=url, reason="OK",
                              created_at=now, expires=now + timedelta(seconds=ttl), encoding="utf-8",
                              headers=CaseInsensitiveDict({"Content-Type": "application/json"}),
                              request=CachedRequest(method="GET", url=url, headers=CaseInsensitiveDict()))
        cache.responses[key] = resp
    except Exception:  # noqa: BLE001 - caching is best effort
        return


def shape_query(query: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> str:
    """The query with `site:` operators for the domain filters (engines that ignore them are post-filtered)."""
    parts = [query.strip()]
    if len(include) == 1:
        parts.append(f"site:{include[0]}")
    elif include:
        parts.append("(" + " OR ".join(f"site:{d}" for d in include) + ")")
    parts.extend(f"-site:{d}" for d in exclude)
    return " ".join(parts)


def _host_matches(url: str, domains: tuple[str, ...]) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return any(host == d or host.endswith("." + d) for d in domains)


def filter_domains(results: list[dict], include: tuple[str, ...], exclude: tuple[str, ...]) -> list[dict]:
    if include:
        results = [r for r in results if _host_matches(r["url"], include)]
    if exclude:
        results = [r for r in results if not _host_matches(r["url"], exclude)]
    return results


def normalize_results(raw: list[dict]) -> list[dict]:
    """ddgs text/news dicts as {title, url, snippet, provider, published_date?}, without duplicates."""
    out: list[dict] = []
    seen: set[str] = set()
    for item in raw:
        url = safe_url(item.get("href") or item.get("url"))  # external: a safe form or nothing
        if url is None or url in seen:
            continue
        seen.add(url)
        result = {"title": str(item.get("title") or url).strip(), "url": url,
                  "snippet": str(item.get("body") or "").strip(), "provider": NAME}
        if safe_date(item.get("date")):  # a date, or nothing
            result["published_date"] = safe_date(item["date"])
        out.append(result)
    return out
