"""One deep research call, blocking or as a resumable async request, with API fallback, cost and ledger."""

from __future__ import annotations

import time
from collections.abc import Callable

from gsd_research.core import usage_ledger
from gsd_research.core.config import home
from gsd_research.deep import cost as costs
from gsd_research.deep.perplexity import EndpointGone, Perplexity, poll
from gsd_research.deep.settings import DeepSettings
from gsd_research.deep.store import now_iso, read_json, write_json

PROVIDER = "perplexity"
GONE_MEMORY_S = 7 * 86400  # once Sonar said it is gone, go straight to the Agent API for a week


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

    # -- blocking ------------------------------------------------------------------------------
    def blocking(self, query: str, effort: str, timeout: float) -> dict:
        """One call that waits for the report (Sonar chat completions or a polled Agent API run)."""
        def run(api: str) -> dict:
            if api == "sonar":
                result = self.client.chat(query, self.s.model, effort, timeout)
                result["fallback"] = False
                return result
            deadline = time.monotonic() + timeout
            body = self.client.agent_create(query, self.s.preset(effort), background=False, timeout=timeout)
            result = self._agent_finish(body, deadline)
            result["fallback"] = self.s.api == "auto"
            return result

        return self._with_fallback(self.api_order(), run)

    def _agent_finish(self, body: dict, deadline: float, check=None) -> dict:
        done = self.client.agent_result(body)
        if done is not None:
            return done
        remote = str(body.get("id") or "")
        return poll(lambda: self.client.agent_result(self.client.agent_get(remote)), deadline=deadline,
                    interval=self.s.poll_interval, check=check)

    # -- background ----------------------------------------------------------------------------
    def resumable(self, job: dict, status: dict, *, check: Callable[[], None],
                  on_remote: Callable[[str, str], None]) -> dict:
        """Submit (or resume polling) the job's async request; `on_remote` records the remote id first."""
        query, effort = job["query"], job.get("effort") or "medium"
        timeout = float(job.get("timeout") or self.s.timeout)
        remote_id, remote_api = status.get("remoteId"), status.get("remoteApi")
        deadline = time.monotonic() + timeout
        key = f"{job['id']}-{int(status.get('attempts') or 0) + 1}"

        def run(api: str) -> dict:
            if api == "sonar":
                rid = remote_id if remote_api == "sonar" and remote_id else None
                if rid is None:
                    rid, done = self.client.submit_async(query, self.s.model, effort, key)
                    on_remote(rid, "sonar")
                    if done is not None:
                        return done
                return poll(lambda: self.client.poll_async(rid), deadline=deadline,
                            interval=self.s.poll_interval, check=check)
            if remote_api == "agent" and remote_id:
                body = self.client.agent_get(remote_id)
            else:
                body = self.client.agent_create(query, self.s.preset(effort), background=True)
                if body.get("id"):
                    on_remote(str(body["id"]), "agent")
            return self._agent_finish(body, deadline, check)

        result = self._with_fallback(self.api_order(remote_api), run)
        result["fallback"] = result["api"] == "agent" and self.s.api == "auto"
        return result

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
