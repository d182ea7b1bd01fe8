"""The ledger lines of deep research jobs: one per request Perplexity accepted (and billed), whatever became
of it, each with a `ref` naming the job and its remote request so that it is written once.

A request that ended without a report (failed polls, cancelled mid-run, a lost submit answer, a run the
provider ended, a submit answered without a usable request id) has no usage figures: its line carries the price table's typical cost for the job's
effort, marked `estimated: true`, so that the daily budget counts it.
"""

from __future__ import annotations

from gsd_research.core import usage_ledger
from gsd_research.deep import cost as costs
from gsd_research.deep.perplexity import shown_id

PROVIDER = "perplexity"
DEFAULT_MODEL = "sonar-deep-research"


def typical_cost(table: dict, model: str | None, effort: str | None) -> float:
    """The price table's typical cost of one request: a request ended without a report is recorded at it, and
    a queued job holds it against the daily budget until its ledger line is written. A model the table does
    not price costs as its dearest priced one (never 0: it would hold nothing)."""
    effort = str(effort or "medium")
    known = costs.expected_cost(table, PROVIDER, model or DEFAULT_MODEL, effort)
    if known:
        return float(known)
    priced = [costs.expected_cost(table, PROVIDER, name, effort) for name in (table.get(PROVIDER) or {})]
    return float(max((p for p in priced if p), default=0.0))


def may_be_taken(status: dict) -> bool:
    """Whether the provider may already hold (and bill) the job's request: a resend reuses it, paying nothing
    more, so no budget check may stop it."""
    return any(status.get(field) for field in ("remoteId", "submitKey", "agentSubmittedAt"))


def ref_of(job_id: str, status: dict) -> str | None:
    """The ledger ref of the job's current remote request; None when the provider certainly has none
    (nothing accepted yet, or a Sonar submit whose answer never came: its idempotency key is reused)."""
    if status.get("remoteId"):
        return f"{job_id}:{status['remoteId']}"
    if status.get("untracked") and status.get("submitKey"):  # taken, but answered without a usable id
        return f"{job_id}:untracked:{status['submitKey']}"
    if status.get("agentSubmittedAt"):  # an Agent API submit that may have been accepted (no id came back)
        return f"{job_id}:agent@{status['agentSubmittedAt']}"
    return None


def record_unreported(config, job_id: str, status: dict, command: str, reason: str) -> dict | None:
    """One estimated line for the job's accepted request that ended without a report (once per ref)."""
    ref = ref_of(job_id, status)
    if ref is None:
        return None
    model = status.get("model") or DEFAULT_MODEL
    api = status.get("remoteApi") or ("agent" if status.get("agentSubmittedAt") else "sonar")
    usd = typical_cost(costs.price_table(config), model, status.get("effort"))
    return usage_ledger.record(PROVIDER, model, 0, 0, usd, command, cost_source="estimated", ref=ref,
                               extra={"api": api, "estimated": True, "reason": reason,
                                      "remote_id": shown_id(status.get("remoteId")),
                                      **({"untracked": True} if status.get("untracked") else {})})
