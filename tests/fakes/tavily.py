"""Fake Tavily (`/tavily/search`, `/tavily/extract`) and a fake keyless search boundary (in-process).

Keys: any `Bearer tvly-…` is accepted, except the magic keys below, which answer with Tavily's own
error statuses and bodies (`{"detail": {"error": …}}`). A missing or non-`tvly-` key is a 401.
`server.state["tavily.results"]` replaces the generated results, `server.state["tavily.answer"]`
the answer (None: no answer), `server.state["tavily.body"]` the whole answer and
`server.state["tavily.delay"]` simulates upstream latency (seconds).
"""

from __future__ import annotations

import json
import re

from tests.fakes.server import FakeServer, Reply, Request

MAGIC_KEYS = {
    "tvly-ratelimited": (429, "Your request has been blocked due to excessive requests. Please reduce rate of "
                              "requests."),
    "tvly-plan-limit": (432, "This request exceeds your plan's set usage limit. Please upgrade your plan or "
                             "contact support@tavily.com"),
    "tvly-paygo-limit": (433, "This request exceeds the pay-as-you-go limit. You can increase your limit on "
                              "the Tavily dashboard."),
    "tvly-broken": (500, "[500] Internal server error"),
}
DEPTHS = {"basic", "advanced", "fast", "ultra-fast"}
TOPICS = {"general", "news", "finance"}
TIME_RANGES = {"day", "week", "month", "year", "d", "w", "m", "y"}
AVAILABLE = 25  # the fake web knows this many pages for any query


def _detail(status: int, message: str) -> Reply:
    return Reply(status, {"detail": {"error": message}})


def _auth(req: Request) -> Reply | None:
    auth = req.headers.get("authorization", "")
    key = auth[7:].strip() if auth.startswith("Bearer ") else ""
    if not key.startswith("tvly-"):
        return _detail(401, "Unauthorized: missing or invalid API key.")
    if key in MAGIC_KEYS:
        return _detail(*MAGIC_KEYS[key])
    return None


def _body(req: Request) -> dict | Reply:
    try:
        body = req.json()
    except ValueError:
        return _detail(400, "Invalid JSON body")
    return body if isinstance(body, dict) else _detail(400, "Body must be a JSON object")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "q"


def generated_results(query: str, count: int = AVAILABLE) -> list[dict]:
    """Deterministic pages about `query`: distinct URLs, two sentences each, falling scores."""
    return [{"title": f"{query.title()} — source {i}",
             "url": f"https://site{i}.example.org/{_slug(query)}",
             "content": f"Source {i} reports finding number {i} about {query}. It adds detail {i} with figures.",
             "score": round(0.99 - i * 0.03, 4), "raw_content": None, "favicon": None}
            for i in range(1, count + 1)]


def _validate(body: dict) -> Reply | None:
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        return _detail(400, "Query is missing or empty.")
    if len(query) > 400:
        return _detail(400, "Query is too long. Max query length is 400 characters.")
    max_results = body.get("max_results", 5)
    if not isinstance(max_results, int) or isinstance(max_results, bool) or not 0 <= max_results <= 20:
        return _detail(400, "max_results must be between 0 and 20")
    checks = (("search_depth", DEPTHS), ("topic", TOPICS), ("time_range", TIME_RANGES))
    for field, allowed in checks:
        if field in body and body[field] not in allowed:
            return _detail(400, f"Invalid {field}: {body[field]!r}")
    if "api_key" in body:
        return _detail(400, "Send the key in the Authorization header, not the body (fake rule)")
    return None


def _search(server: FakeServer, req: Request) -> Reply:
    if (err := _auth(req)) is not None:
        return err
    body = _body(req)
    if isinstance(body, Reply):
        return body
    if (err := _validate(body)) is not None:
        return err
    if "tavily.body" in server.state:  # a whole answer of any shape, for malformed-answer tests
        return Reply(200, server.state["tavily.body"])
    pool = server.state.get("tavily.results")
    results = list(pool if pool is not None else generated_results(body["query"]))[: body.get("max_results", 5)]
    answer = server.state.get("tavily.answer", f"A short answer about {body['query']} from the fake.")
    return Reply(200, delay=float(server.state.get("tavily.delay", 0.0)), body={
        "query": body["query"], "follow_up_questions": None,
        "answer": answer if body.get("include_answer") else None, "images": [], "results": results,
        "response_time": "0.42", "request_id": "123e4567-e89b-12d3-a456-426614174111"})


def install(server: FakeServer) -> None:
    @server.route("POST", r"/tavily/search")
    def search(req: Request) -> Reply:
        return _search(server, req)

    @server.route("POST", r"/tavily/extract")
    def extract(req: Request) -> Reply:
        if (err := _auth(req)) is not None:
            return err
        body = _body(req)
        if isinstance(body, Reply):
            return body
        urls = body.get("urls")
        urls = [urls] if isinstance(urls, str) else urls
        if not urls:
            return _detail(400, "[400] No starting url provided")
        if len(urls) > 20:
            return _detail(400, "Max 20 URLs are allowed.")
        ok = [u for u in urls if "fail" not in u]
        return Reply(200, {"results": [{"url": u, "raw_content": f"# Page {u}\n\nText of {u}.", "images": []}
                                       for u in ok],
                           "failed_results": [{"url": u, "error": "Failed to fetch url"} for u in urls if u not in ok],
                           "response_time": 0.79, "request_id": "123e4567-e89b-12d3-a456-426614174111"})


class FakeKeyless:
    """The keyless provider boundary (`providers.keyless.KeylessBackend`) without any network.

    `results` replaces the generated ddgs-shaped results; `error` is raised on every call.
    """

    name = "ddgs"

    def __init__(self, results: list[dict] | None = None, error: Exception | None = None) -> None:
        self.results = results
        self.error = error
        self.calls: list[dict] = []

    def search(self, category: str, query: str, *, max_results: int, timelimit: str | None) -> list[dict]:
        self.calls.append({"category": category, "query": query, "max_results": max_results,
                           "timelimit": timelimit})
        if self.error is not None:
            raise self.error
        pool = self.results if self.results is not None else [
            {"title": f"Keyless page {i} on {query}", "href": f"https://kl{i}.example.net/{_slug(query)}",
             "body": f"Keyless source {i} says something about {query}. More text {i}."} for i in range(1, 31)]
        return json.loads(json.dumps(pool[:max_results]))
