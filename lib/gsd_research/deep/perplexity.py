"""Perplexity: Sonar chat completions, the Sonar async API and the Agent API, as one normalized result.

A result is {"report", "citations", "usage", "model", "api", "remote_id"} with `<think>` blocks
stripped and `usage` in chat-completions field names (the Agent API's are mapped onto them).
When Sonar answers that the model or endpoint is gone, `EndpointGone` tells the caller to switch.
Every request of one attempt is bounded by the attempt's deadline (a `time.monotonic()` instant): its
timeouts are cut to what is left and nothing is sent once it has passed. Paid submits go out either under
an idempotency key (Sonar async: sending it again cannot pay twice) or, without one (Agent API), never
again once the provider may have taken them (`details.maybe_accepted`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from gsd_research.core.errors import MissingApiKey, NotFound, ProviderError, TimeoutError_
from gsd_research.core.external import excerpt
from gsd_research.core.http import HttpClient, error_message, parse_json, provider_details, raise_for_status

PROVIDER = "perplexity"
KEY_HINT = "PERPLEXITY_API_KEY"
THINK = re.compile(r"<think>[\s\S]*?</think>", re.IGNORECASE)
GONE_WORDS = ("deprecat", "retired", "no longer", "not supported", "unsupported", "invalid model",
              "unknown model", "does not exist", "decommission", "sunset", "removed")
AGENT_RUNNING = frozenset({"queued", "in_progress", "created"})
AGENT_FAILED = frozenset({"failed", "cancelled", "incomplete"})
# A remote request id goes into URL paths (/async/chat/completions/{id}, /v1/responses/{id}): Sonar async ids
# are UUIDs, Agent API ids `resp_...` (API-CONTRACTS 2.2, 2.6). Letters, digits, '-' and '_' only: no '/', '.',
# '?', '#' or '%' that could reach another path or add a query, whatever an answer or a job file says.
REMOTE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


class EndpointGone(ProviderError):
    """Sonar says its model or endpoint no longer exists: use the Agent API."""


class RemoteRunFailed(ProviderError):
    """The provider ended the research run itself (failed, cancelled): only a new, paid submission can
    answer the question now."""


class RemoteNotFound(ProviderError):
    """One poll of a known remote id answered 404 (maybe a passing fault): poll again, never re-submit."""


class RemoteGone(ProviderError):
    """Polls of a known remote id keep answering 404: the job fails naming it, never buying it again."""


class BadRemoteId(ProviderError):
    """A remote request id (from an answer or a job file) that is not one: never put into a URL, the job fails."""


class UntrackedRequest(BadRemoteId):
    """A submit Perplexity took (HTTP 200: billed) whose answer carries no usable request id: the request can never
    be polled, so the job fails for good and the request gets its estimated ledger line."""


ANSWER = "Perplexity's answer"


def shown_id(value) -> str | None:
    """`value` when it has the shape of a remote request id, else None: what outputs may repeat of a job file."""
    return value if isinstance(value, str) and REMOTE_ID.fullmatch(value) else None


def _as_id(value) -> str:
    return str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""


def _not_an_id(value) -> str:
    """Why `value` is not a request id, without repeating its text."""
    text = _as_id(value)
    kind = f"{len(text)} characters" if text else type(value).__name__
    return f"not a Perplexity request id ({kind}, not only letters, digits, '-' and '_')"


def checked_id(value, where: str = ANSWER) -> str:
    """`value` as a remote request id when it has the shape of one, else BadRemoteId (the text never repeated)."""
    if REMOTE_ID.fullmatch(_as_id(value)):
        return _as_id(value)
    details = {"provider": PROVIDER, **({"maybe_accepted": True} if where == ANSWER else {})}  # it took the request
    raise BadRemoteId(f"The research request id in {where} is {_not_an_id(value)}: it is never used in a request URL",
                      details=details, suggestions=["Ask again (gsd-research deep ...): a new request is sent and paid",
                                                    "If it repeats, check PERPLEXITY_BASE_URL points at Perplexity"])


def untracked(value) -> UntrackedRequest:
    """The error of a submit answered (and so billed) without a usable request id: `value` is the id it carried."""
    what = f"a request id that is {_not_an_id(value)}" if value not in (None, "") else "no request id"
    return UntrackedRequest(
        f"Perplexity took the deep research request (HTTP 200: it is billed) but its answer carried {what}, so the "
        "request could not be tracked: its report cannot be fetched and it is not sent again. It is recorded in the "
        "usage ledger at its typical cost, marked estimated (gsd-research usage); asking again sends a new, paid "
        "request. If this repeats, check that PERPLEXITY_BASE_URL points at Perplexity",
        details={"provider": PROVIDER, "maybe_accepted": True, "untracked": True},
        suggestions=["See what was spent: gsd-research usage (and the Perplexity dashboard)",
                     "Ask again (gsd-research deep ...): a new request is sent and paid"])


def attempt_timeout(maybe_accepted: bool = False) -> TimeoutError_:
    details = {"provider": PROVIDER}
    if maybe_accepted:
        details["maybe_accepted"] = True
    return TimeoutError_("Perplexity deep research did not finish within its timeout",
                         suggestions=["Raise it: --timeout SECONDS, deep.timeout or PERPLEXITY_POLLING_TIMEOUT_MS",
                                      "Use deep --async and gsd-research jobs wait ID"],
                         details=details)


def strip_think(text: str) -> str:
    """The answer without chain-of-thought: closed <think> blocks and an unclosed one at the end."""
    text = THINK.sub("", text or "")
    opened = text.lower().find("<think>")
    if opened >= 0:
        text = text[:opened]
    return text.replace("</think>", "").strip()


def _word(value: str) -> str:
    """A status word from the provider as an identifier (never free text in our message)."""
    return "".join(c for c in value if c.isascii() and (c.isalnum() or c in "_-"))[:40]


def _is_gone(response) -> bool:
    if response.status_code == 410:
        return True
    message = error_message(response).lower()
    if response.status_code == 404:
        return True
    try:
        body = response.json()
    except ValueError:
        body = {}
    err = body.get("error") if isinstance(body, dict) else None
    kind = str(err.get("type") or "") if isinstance(err, dict) else ""
    return kind in ("invalid_model", "model_not_found", "model_deprecated") or (
        "model" in message and any(word in message for word in GONE_WORDS))


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    return ""


def _int(value) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _malformed(what: str) -> ProviderError:
    return ProviderError(f"Perplexity sent a malformed answer ({what})",
                         suggestions=["Retry later; if it persists the API may have changed"],
                         details={"provider": PROVIDER})


def from_chat_completion(body: dict, api: str = "sonar", remote_id: str | None = None) -> dict:
    """A normalized result from a chat.completion object."""
    try:
        content = body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise _malformed("no choices[0].message.content") from None
    titles = {}
    for item in body.get("search_results") or []:
        if isinstance(item, dict) and item.get("url"):
            titles.setdefault(str(item["url"]), str(item.get("title") or ""))
    urls = [str(u) for u in body.get("citations") or [] if isinstance(u, str) and u]
    if not urls:
        urls = list(titles)
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return {
        "report": strip_think(_text_of(content)),
        "citations": [{"n": i + 1, "url": u, "title": titles.get(u, "")} for i, u in enumerate(urls)],
        "usage": usage,
        "model": str(body.get("model") or ""),
        "api": api,
        "remote_id": remote_id or body.get("id"),
    }


def _agent_items(output: list) -> tuple[list[str], list[tuple[str, str]], int]:
    """Texts, (url, title) sources and the number of search queries of an Agent API output list."""
    texts, sources, queries = [], [], 0
    for item in (i for i in output if isinstance(i, dict)):
        if item.get("type") == "search_results":
            queries += len(item.get("queries") or [])
            sources += [(str(r.get("url")), str(r.get("title") or "")) for r in item.get("results") or []
                        if isinstance(r, dict) and r.get("url")]
            continue
        if item.get("type") != "message":
            continue
        for part in (p for p in item.get("content") or [] if isinstance(p, dict)):
            if part.get("type") in ("output_text", "text"):
                texts.append(str(part.get("text") or ""))
                sources += [(str(a.get("url")), str(a.get("title") or "")) for a in part.get("annotations") or []
                            if isinstance(a, dict) and a.get("url")]
    return texts, sources, queries


def from_agent_response(body: dict) -> dict:
    """A normalized result from an Agent API response object (status completed)."""
    output = body.get("output")
    if not isinstance(output, list):
        raise _malformed("no output list")
    texts, sources, queries = _agent_items(output)
    seen: dict[str, str] = {}
    for url, title in sources:
        if url not in seen or (title and not seen[url]):
            seen[url] = title
    raw = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    usage = {"prompt_tokens": _int(raw.get("input_tokens")), "completion_tokens": _int(raw.get("output_tokens")),
             "total_tokens": _int(raw.get("total_tokens")), "num_search_queries": queries}
    if "cost" in raw:
        usage["cost"] = raw["cost"]
    return {
        "report": strip_think("\n\n".join(texts)),
        "citations": [{"n": i + 1, "url": u, "title": t} for i, (u, t) in enumerate(seen.items())],
        "usage": usage, "model": str(body.get("model") or "agent"), "api": "agent", "remote_id": body.get("id"),
    }


def _timed_out(exc: TimeoutError_, deadline: float | None) -> TimeoutError_:
    """The attempt's TIMEOUT when its deadline cut the request, else the request's own, with deep's advice."""
    if deadline is None:
        return exc
    if deadline - time.monotonic() <= 0.05:
        return attempt_timeout(bool(exc.details.get("maybe_accepted")))
    exc.suggestions = ["Retry later: Perplexity is slow to answer", "Use deep --async and gsd-research jobs wait ID"]
    return exc


class Perplexity:
    """A Perplexity client over the shared HTTP layer (requests are never served from the cache)."""

    def __init__(self, http: HttpClient, base_url: str, api_key: str | None) -> None:
        if not api_key:
            raise MissingApiKey("Deep research needs a Perplexity API key",
                                suggestions=["export PERPLEXITY_API_KEY=pplx-...",
                                             "or gsd-research config set providers.perplexity.api_key pplx-..."])
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key

    def _send(self, method: str, path: str, *, body: dict | None = None, deadline: float | None = None,
              sonar: bool = False, idempotent: bool = True) -> dict:
        """One request (with the HTTP layer's retries) bounded by the monotonic `deadline`."""
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"}
        expected = (200, 201, 400, 404, 410) if sonar else (200, 201)
        bound = {}
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise attempt_timeout()
            bound["deadline"] = left
        try:
            resp = self.http.request(PROVIDER, method, self.base_url + path, json=body, headers=headers, cache=False,
                                     expected=expected, key_hint=KEY_HINT, idempotent=idempotent, **bound)
        except TimeoutError_ as exc:
            raise _timed_out(exc, deadline) from None
        if resp.status_code in (400, 404, 410):
            if _is_gone(resp) and sonar:
                raise EndpointGone(f"Perplexity Sonar is not available at {path} (HTTP {resp.status_code})",
                                   details=provider_details(PROVIDER, resp),
                                   suggestions=["gsd-research config set deep.api agent"])
            raise_for_status(PROVIDER, resp, KEY_HINT)
        try:
            doc = parse_json(PROVIDER, resp)
            if not isinstance(doc, dict):
                raise _malformed("not a JSON object")
        except ProviderError as exc:
            if method.upper() == "POST":  # it answered 200: it took the request
                exc.details["maybe_accepted"] = True
            raise
        return doc

    # -- Sonar async ---------------------------------------------------------------------------
    @staticmethod
    def chat_request(query: str, model: str, effort: str) -> dict:
        return {"model": model, "messages": [{"role": "user", "content": query}], "reasoning_effort": effort,
                "stream": False}

    def submit_async(self, query: str, model: str, effort: str, idempotency_key: str,
                     deadline: float | None = None) -> tuple[str, dict | None]:
        """(remote id, the result when the answer is already complete, e.g. a repeated idempotency key).

        Sent again by the HTTP layer on 5xx and timeouts: the idempotency key makes that free."""
        body = self._send("POST", "/async/chat/completions", sonar=True, deadline=deadline, body={
            "request": self.chat_request(query, model, effort), "idempotency_key": idempotency_key})
        if not REMOTE_ID.fullmatch(_as_id(body.get("id"))):
            raise untracked(body.get("id"))
        return _as_id(body["id"]), self.async_result(body)

    def poll_async(self, remote_id: str, deadline: float | None = None) -> dict | None:
        """The result when the async request is done, None while it runs; failures raise."""
        remote_id = checked_id(remote_id, "the job file")
        return self.async_result(self._get(f"/async/chat/completions/{remote_id}", remote_id, deadline))

    def _get(self, path: str, remote_id: str, deadline: float | None) -> dict:
        """The status document of request `remote_id`: one about another request is malformed."""
        try:
            body = self._send("GET", path, deadline=deadline)
        except NotFound:
            raise RemoteNotFound(f"Perplexity does not know research request {remote_id} (HTTP 404)",
                                 details={"provider": PROVIDER, "remote_id": remote_id}) from None
        if str(body.get("id") or "") != remote_id:
            exc = _malformed(f"an answer about request '{str(body.get('id'))[:60]}' to a poll of {remote_id}")
            exc.details["remote_id"] = remote_id
            raise exc
        return body

    @staticmethod
    def async_result(body: dict) -> dict | None:
        remote_id = str(body.get("id") or "")
        state = str(body.get("status") or "").upper()
        if state == "COMPLETED":
            if not isinstance(body.get("response"), dict):
                raise _malformed("COMPLETED without response")
            return from_chat_completion(body["response"], "sonar-async", remote_id)
        if state == "FAILED":
            raise RemoteRunFailed("Perplexity deep research failed", details={  # its reason: fenced, in details
                "provider": PROVIDER, "remote_id": remote_id, "provider_message": excerpt(body.get("error_message"))})
        if state in ("CREATED", "IN_PROGRESS", "PENDING"):
            return None
        raise _malformed(f"unknown async status '{_word(state)}'")

    # -- Agent API -----------------------------------------------------------------------------
    def agent_create(self, query: str, preset: str, deadline: float | None = None) -> dict:
        """Start a background run. No idempotency key exists: never sent again once it may have been taken."""
        body = {"preset": preset, "input": [{"type": "message", "role": "user", "content": query}], "stream": False,
                "background": True}
        return self._send("POST", "/v1/agent", body=body, deadline=deadline, idempotent=False)

    def agent_get(self, remote_id: str, deadline: float | None = None) -> dict:
        remote_id = checked_id(remote_id, "the job file")
        return self._get(f"/v1/responses/{remote_id}", remote_id, deadline)

    @staticmethod
    def agent_result(body: dict) -> dict | None:
        """The result of a finished response, None while it runs; failed runs (HTTP 200) raise."""
        state = str(body.get("status") or "").lower()
        if state == "completed":
            return from_agent_response(body)
        if state in AGENT_RUNNING:
            return None
        if state in AGENT_FAILED:
            err = body.get("error") if isinstance(body.get("error"), dict) else {}
            raise RemoteRunFailed(f"Perplexity Agent API run {state}", details={
                "provider": PROVIDER, "remote_id": body.get("id"), "provider_message": excerpt(err.get("message"))})
        raise _malformed(f"unknown agent status '{_word(state)}'")


def poll(fetch: Callable[[], dict | None], *, deadline: float, interval: float,
         check: Callable[[], None] | None = None, warn_at: float | None = None,
         on_warn: Callable[[], None] | None = None) -> dict:
    """Call `fetch` until it returns a result or the monotonic `deadline` passes (TIMEOUT); `on_warn` once
    when `warn_at` has passed (the run nears its timeout)."""
    while True:
        result = fetch()
        if result is not None:
            return result
        if check is not None:
            check()
        now = time.monotonic()
        if warn_at is not None and now >= warn_at and on_warn is not None:
            on_warn()
            warn_at = None
        left = deadline - now
        if left <= 0:
            raise attempt_timeout()
        time.sleep(min(interval, left))
