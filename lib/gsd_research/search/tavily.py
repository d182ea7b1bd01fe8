"""Tavily REST: `POST /search` (web results with an optional answer) and `POST /extract` (page text)."""

from __future__ import annotations

from datetime import datetime, timezone

from gsd_research.core.errors import MissingApiKey, ProviderError, UsageError
from gsd_research.core.external import safe_date, safe_url
from gsd_research.core.http import HttpClient, parse_json

NAME = "tavily"
MAX_RESULTS = 20  # Tavily answers 400 outside 0..20 (API-CONTRACTS.md §3.1)
MAX_QUERY_CHARS = 400  # longer queries are a 400 "Query is too long"
MAX_INCLUDE_DOMAINS = 300
MAX_EXCLUDE_DOMAINS = 150
MAX_EXTRACT_URLS = 20
DEPTHS = ("basic", "advanced", "fast", "ultra-fast")
TOPICS = ("general", "news", "finance")
TIME_RANGES = ("day", "week", "month", "year", "d", "w", "m", "y")
KEY_HINT = "TAVILY_API_KEY (or OD_TAVILY_API_KEY)"


def clamp_max_results(requested: int | None, default: int = 5) -> int:
    """The number of results Tavily accepts: `requested` clamped to 0..20 (never a 400)."""
    if requested is None:
        requested = default
    return max(0, min(MAX_RESULTS, int(requested)))


def fetched_at(response) -> datetime:
    """When the answer left the provider: the cache's creation time for a cached answer, else now."""
    created = getattr(response, "created_at", None) if getattr(response, "from_cache", False) else None
    if isinstance(created, datetime):
        return created if created.tzinfo else created.replace(tzinfo=timezone.utc)
    return datetime.now(timezone.utc)


def _forget(response) -> None:
    """Evict a stored answer of the wrong shape so the next call asks again (when the HTTP layer can)."""
    from gsd_research.core import http as http_layer

    forget = getattr(http_layer, "forget", None)
    if forget is not None:
        forget(response)


def missing_key_error() -> MissingApiKey:
    return MissingApiKey(
        "Tavily needs an API key: set TAVILY_API_KEY (or OD_TAVILY_API_KEY)",
        suggestions=["export TAVILY_API_KEY=tvly-...", "gsd-research search QUERY --provider ddgs (keyless)",
                     "gsd-research config set search.fallback true"],
    )


class Tavily:
    """A Tavily client over the shared HTTP layer (cached POSTs: the body is part of the cache key)."""

    name = NAME

    def __init__(self, http: HttpClient, base_url: str, api_key: str | None, ttl: int) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.ttl = ttl

    def _headers(self) -> dict:
        if not self.api_key:
            raise missing_key_error()
        return {"Authorization": f"Bearer {self.api_key}", "X-Client-Source": "gsd-research"}

    def search(self, query: str, *, max_results: int | None = None, depth: str = "basic", topic: str = "general",
               time_range: str | None = None, include_domains: tuple[str, ...] = (),
               exclude_domains: tuple[str, ...] = (), include_answer: bool = True) -> dict:
        """One search: normalized results, the provider's answer, the clamped result count, fetch time."""
        headers = self._headers()
        body = search_body(query, max_results=max_results, depth=depth, topic=topic, time_range=time_range,
                           include_domains=include_domains, exclude_domains=exclude_domains,
                           include_answer=include_answer)
        resp = self.http.request(NAME, "POST", f"{self.base_url}/search", json=body, headers=headers,
                                 ttl=self.ttl, key_hint=KEY_HINT)
        data = parse_json(NAME, resp)
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            _forget(resp)
            raise ProviderError("Tavily sent a search answer without a results list",
                                suggestions=["Retry later; if it persists the Tavily API may have changed"],
                                details={"provider": NAME})
        answer = data.get("answer")
        return {
            "provider": NAME,
            "results": normalize_results(data["results"]),
            "summary": answer.strip() if isinstance(answer, str) and answer.strip() else None,
            "max_results_sent": body["max_results"],
            "fetched_at": fetched_at(resp),
            "from_cache": bool(getattr(resp, "from_cache", False)),
            "request_id": data.get("request_id"),
        }

    def extract(self, urls: list[str], *, depth: str = "basic", fmt: str = "markdown",
                query: str | None = None) -> dict:
        """Page text of up to 20 URLs: {"results": [{url, raw_content}], "failed_results": [{url, error}]}."""
        headers = self._headers()
        urls = [u for u in urls if isinstance(u, str) and u.strip()]
        if not urls:
            raise UsageError("extract needs at least one URL")
        if len(urls) > MAX_EXTRACT_URLS:
            raise UsageError(f"Tavily extracts at most {MAX_EXTRACT_URLS} URLs per call (got {len(urls)})")
        body: dict = {"urls": urls, "extract_depth": depth, "format": fmt}
        if query:
            body["query"] = query[:MAX_QUERY_CHARS]
        resp = self.http.request(NAME, "POST", f"{self.base_url}/extract", json=body, headers=headers,
                                 ttl=self.ttl, key_hint=KEY_HINT)
        data = parse_json(NAME, resp)
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            _forget(resp)
            raise ProviderError("Tavily sent an extract answer without a results list", details={"provider": NAME})
        results = [{"url": str(r.get("url") or ""), "raw_content": str(r.get("raw_content") or "")}
                   for r in data["results"] if isinstance(r, dict)]
        failed = [{"url": str(r.get("url") or ""), "error": str(r.get("error") or "failed")}
                  for r in data.get("failed_results") or [] if isinstance(r, dict)]
        return {"results": results, "failed_results": failed, "fetched_at": fetched_at(resp)}


def search_body(query: str, *, max_results: int | None, depth: str, topic: str, time_range: str | None,
                include_domains: tuple[str, ...], exclude_domains: tuple[str, ...], include_answer: bool) -> dict:
    """The JSON body of POST /search, validated against Tavily's accepted ranges (no key in it)."""
    query = (query or "").strip()
    if not query:
        raise UsageError("Tavily needs a non-empty query")
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"Tavily accepts queries up to {MAX_QUERY_CHARS} characters (got {len(query)})",
                         suggestions=["Shorten the query to its key terms"])
    _check_choice("depth", depth, DEPTHS)
    _check_choice("topic", topic, TOPICS)
    if time_range is not None:
        _check_choice("time range", time_range, TIME_RANGES)
    if len(include_domains) > MAX_INCLUDE_DOMAINS or len(exclude_domains) > MAX_EXCLUDE_DOMAINS:
        raise UsageError(f"Tavily accepts at most {MAX_INCLUDE_DOMAINS} included and "
                         f"{MAX_EXCLUDE_DOMAINS} excluded domains")
    body: dict = {"query": query, "search_depth": depth, "max_results": clamp_max_results(max_results),
                  "topic": topic, "include_answer": bool(include_answer)}
    if time_range:
        body["time_range"] = time_range
    if include_domains:
        body["include_domains"] = list(include_domains)
    if exclude_domains:
        body["exclude_domains"] = list(exclude_domains)
    return body


def _check_choice(label: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"Unknown {label} '{value}' for Tavily", suggestions=[f"Use one of: {', '.join(allowed)}"])


def normalize_results(items: list) -> list[dict]:
    """Tavily results as {title, url, snippet, provider, score?, published_date?}, without duplicates."""
    out: list[dict] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        url = safe_url(item["url"])  # external: percent-encoded, no marker or instruction in its query
        if url is None or url in seen:
            continue
        seen.add(url)
        result = {"title": str(item.get("title") or url).strip(), "url": url,
                  "snippet": str(item.get("content") or "").strip(), "provider": NAME}
        score = item.get("score")
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            result["score"] = round(float(score), 4)
        if safe_date(item.get("published_date")):  # a date, or nothing
            result["published_date"] = safe_date(item["published_date"])
        out.append(result)
    return out
