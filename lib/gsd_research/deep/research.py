"""One attempt of a deep research job: a resumable async request with API fallback, cost and ledger."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Protocol

from gsd_research.core import usage_ledger
from gsd_research.core.config import home
from gsd_research.core.errors import GsdError, ProviderError
from gsd_research.deep import cost as costs
from gsd_research.deep.perplexity import (
    EndpointGone,
    Perplexity,
    RemoteGone,
    RemoteNotFound,
    checked_id,
    poll,
)
from gsd_research.deep.settings import DeepSettings
from gsd_research.deep.store import now_iso, read_json, write_json

PROVIDER = "perplexity"
GONE_MEMORY_S = 7 * 86400  # once Sonar said it is gone, go straight to the Agent API for a week
WARN_SHARE = 0.8  # warn once a run has used this share of its timeout
NOT_FOUND_POLLS = 3  # polls in a row answering 404 before a known remote request counts as gone


class MaybeTaken(ProviderError):
    """A paid request without an idempotency key may have been accepted: never sent again automatically."""

    def __init__(self, message: str, **kwargs) -> None:
        kwargs["details"] = {**(kwargs.get("details") or {}), "provider": PROVIDER, "maybe_accepted": True}
        kwargs.setdefault("suggestions", ["Check what was spent (gsd-research usage; the Perplexity dashboard) "
                                          "before asking again", "Asking again sends a new, paid request"])
        super().__init__(message, **kwargs)

    @staticmethod
    def like(exc: GsdError, message: str) -> MaybeTaken:
        """`message` as a MaybeTaken of `exc`'s own class: a lost submit that timed out stays a TIMEOUT."""
        return _taken_kind(type(exc))(message, details=dict(exc.details))


@functools.cache
def _taken_kind(kind: type[GsdError]) -> type[MaybeTaken]:
    if issubclass(kind, MaybeTaken):
        return kind
    own = {name: getattr(kind, name) for name in ("code", "exit_status") if hasattr(kind, name)}
    return type(f"MaybeTaken{kind.__name__}", (MaybeTaken, kind), own)


class AttemptHooks(Protocol):
    """What an attempt tells its job as it goes (the job store persists it)."""

    def check(self) -> None:
        """Raise to stop the attempt (the job was cancelled, or the caller stops waiting)."""

    def submitting(self, key: str | None, api: str) -> None:
        """A paid submit is about to be sent (under idempotency `key`, or none)."""

    def remote(self, remote_id: str, api: str) -> None:
        """The provider gave the request this id."""

    def warn(self, started: float, timeout: float) -> None:
        """The attempt nears its timeout."""


def tolerate_not_found(fetch: Callable[[], dict | None]) -> Callable[[], dict | None]:
    """`fetch` (one poll of a known remote id) where a 404 counts as "still running" until NOT_FOUND_POLLS
    polls in a row answered it: then RemoteGone, which fails the job naming the id (never re-submitted)."""
    misses = 0

    def guarded() -> dict | None:
        nonlocal misses
        try:
            result = fetch()
        except RemoteNotFound as exc:
            misses += 1
            if misses < NOT_FOUND_POLLS:
                return None
            rid = exc.details.get("remote_id")
            raise RemoteGone(f"Perplexity answered 404 to {misses} polls in a row of research request {rid}: it no "
                             "longer knows it. It is not bought again by itself", details=dict(exc.details),
                             suggestions=["Asking again sends a new, paid request",
                                          "Check the Perplexity dashboard for the request"]) from None
        misses = 0
        return result

    return guarded


def _state_path():
    return home() / "jobs" / "api-state.json"


def sonar_known_gone() -> bool:
    state = read_json(_state_path()) or {}
    return time.time() - float(state.get("sonar_gone_at") or 0) < GONE_MEMORY_S


def remember_sonar_gone() -> None:
    path = _state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"sonar_gone_at": time.time(), "noted": now_iso()})


class DeepResearch:
    """Runs deep research through the configured API order and accounts for its cost."""

    def __init__(self, rt, settings: DeepSettings, http=None) -> None:
        self.rt = rt
        self.http = http
        self.s = settings
        self.table = costs.price_table(rt.config)
        self._client: Perplexity | None = None

    @property
    def client(self) -> Perplexity:
        if self._client is None:
            cfg = self.rt.config
            self._client = Perplexity(self.http or self.rt.http, cfg.base_url(PROVIDER), cfg.api_key(PROVIDER))
        return self._client

    def api_order(self, resume_api: str | None = None) -> list[str]:
        if self.s.api == "agent" or (self.s.api == "auto" and sonar_known_gone()) or resume_api == "agent":
            return ["agent"]
        return ["sonar"] if self.s.api == "sonar" else ["sonar", "agent"]

    def _with_fallback(self, order: list[str], run: Callable[[str], dict]) -> dict:
        for api in order:
            try:
                return run(api)
            except EndpointGone:
                if api != "sonar" or order[-1] == "sonar":
                    raise
                remember_sonar_gone()
        raise AssertionError("unreachable")  # pragma: no cover

    def resumable(self, job: dict, status: dict, hooks: AttemptHooks, stop_at: float | None = None) -> dict:
        """One attempt of a job: submit (or resume polling) its request, all within one deadline.

        The deadline (the job's timeout from now, or `stop_at` when sooner) bounds every request of the
        attempt: the submit, each poll and the Agent API fallback. Before a paid submit is sent, `hooks`
        persist what makes it safe to repeat (the idempotency key) or forbid repeating it (Agent API);
        its remote id is persisted as soon as it is known.
        """
        timeout = float(job.get("timeout") or self.s.timeout)
        started = time.monotonic()
        deadline = started + timeout if stop_at is None else min(started + timeout, stop_at)
        remote_id, remote_api = status.get("remoteId"), status.get("remoteApi")

        def wait_for(fetch: Callable[[], dict | None]) -> dict:
            return poll(tolerate_not_found(fetch), deadline=deadline, interval=self.s.poll_interval,
                        check=hooks.check, warn_at=started + WARN_SHARE * timeout,
                        on_warn=lambda: hooks.warn(started, timeout))

        def run(api: str) -> dict:
            if api == "sonar":
                return self._sonar(job, status, hooks, deadline, wait_for)
            if remote_api == "agent" and remote_id:
                rid = str(remote_id)
            else:
                rid, done = self._agent_submit(job, status, hooks, deadline)
                if done is not None:
                    return done
            return wait_for(lambda: self.client.agent_result(self.client.agent_get(rid, deadline)))

        resume_api = remote_api or ("agent" if status.get("agentSubmittedAt") else None)
        result = self._with_fallback(self.api_order(resume_api), run)
        result["fallback"] = result["api"] == "agent" and self.s.api == "auto"
        return result

    def _sonar(self, job: dict, status: dict, hooks: AttemptHooks, deadline: float, wait_for) -> dict:
        if status.get("remoteApi") == "sonar" and status.get("remoteId"):
            rid = str(status["remoteId"])
        else:
            key = status.get("submitKey") or f"{job['id']}-{int(status.get('submissions') or 0) + 1}"
            hooks.submitting(key, "sonar")
            rid, done = self.client.submit_async(job["query"], self.s.model, job.get("effort") or "medium", key,
                                                 deadline)
            hooks.remote(rid, "sonar")
            if done is not None:
                return done
        return wait_for(lambda: self.client.poll_async(rid, deadline))

    def _agent_submit(self, job: dict, status: dict, hooks: AttemptHooks, deadline: float) -> tuple[str, dict | None]:
        """Start the Agent API run: once only, as it has no idempotency key."""
        if status.get("agentSubmittedAt"):
            raise MaybeTaken(f"An Agent API request for this job was sent at {status['agentSubmittedAt']} and its "
                             "answer never arrived: Perplexity may have accepted (and billed) it, so it is not "
                             "sent again")
        hooks.submitting(None, "agent")
        try:
            body = self.client.agent_create(job["query"], self.s.preset(job.get("effort") or "medium"), deadline)
        except GsdError as exc:
            if exc.details.get("maybe_accepted"):
                raise MaybeTaken.like(exc, f"{exc.message}. Perplexity may have accepted (and billed) this Agent API "
                                      "request before its answer was lost, so it is not sent again") from None
            raise
        rid = str(body.get("id") or "")
        if not rid:
            raise MaybeTaken("Perplexity accepted an Agent API request but sent no id for it; it is not sent again")
        rid = checked_id(body.get("id"))  # BadRemoteId: the job fails (it is not sent again either)
        hooks.remote(rid, "agent")
        return rid, self.client.agent_result(body)

    # -- accounting ----------------------------------------------------------------------------
    def priced(self, result: dict) -> dict:
        """`result` with its cost: the API's figure, else the price table's estimate."""
        model = result.get("model") or self.s.model
        table_model = "agent" if result.get("api") == "agent" else model
        if costs.model_prices(self.table, PROVIDER, table_model) is None:
            table_model = self.s.model
        result["cost"] = costs.cost_of(self.table, PROVIDER, table_model, result.get("usage") or {})
        if not (result.get("report") or "").strip():
            result.setdefault("warnings", []).append("The answer held no report text (only reasoning or nothing)")
        if result["cost"]["usd"] > self.s.cost_warning_usd:
            result.setdefault("warnings", []).append(
                f"This call cost ${result['cost']['usd']:.2f} ({result['cost']['source']}), "
                f"over ${self.s.cost_warning_usd:.2f}")
        return result

    def record(self, result: dict, command: str, ref: str) -> None:
        usage = result.get("usage") or {}
        tokens_in = sum(int(usage.get(k) or 0) for k in ("prompt_tokens", "citation_tokens"))
        tokens_out = sum(int(usage.get(k) or 0) for k in ("completion_tokens", "reasoning_tokens"))
        usage_ledger.record(PROVIDER, result.get("model") or self.s.model, tokens_in, tokens_out, float(result["cost"]["usd"]), command, cost_source=result["cost"]["source"],
                            ref=ref, extra={"api": result.get("api"), "num_search_queries":
                                            int(usage.get("num_search_queries") or 0)})
