"""Spending guards run before a deep research call: the daily budget and the likely-cost warning.

The budget caps admissions: a call is admitted only when what today's ledger holds, plus what the admitted calls
not yet settled may still cost, plus this call's typical cost fits under it. The calls not yet settled are
the queued jobs (job.json present), each counted at its typical cost (`accounting.typical_cost`) until its
ledger line replaces it; the decision and the job's creation happen under one lock of the home.
"""

from __future__ import annotations

import contextlib

from gsd_research.core import usage_ledger
from gsd_research.core.errors import BudgetExceeded
from gsd_research.deep import cost as costs
from gsd_research.deep.settings import DeepSettings

PROVIDER = "perplexity"


def _held(store, table: dict, exclude: str | None, taken_only: bool = False) -> float:
    """Dollars the queued jobs but `exclude` may still cost: those whose request has no ledger line yet (with
    `taken_only`, only those the provider may already have taken, or that passed their check to pay)."""
    from gsd_research.deep import accounting

    recorded = {entry["ref"] for entry in usage_ledger.entries() if entry.get("ref")}
    held = 0.0
    for job, status in store.queued():
        ref = accounting.ref_of(job["id"], status)
        if job["id"] == exclude or (ref is not None and ref in recorded) or \
                (taken_only and not (accounting.may_be_taken(status) or status.get("budgetAdmitted"))):
            continue
        held += accounting.typical_cost(table, status.get("model") or job.get("model"),
                                        status.get("effort") or job.get("effort"))
    return round(held, 6)


@contextlib.contextmanager
def admission(settings: DeepSettings, table: dict, effort: str, model: str | None = None, job_id: str | None = None):
    """Held while a call is admitted against the daily budget (BUDGET_EXCEEDED when it does not fit) and, by
    the caller, queued: no other call is admitted meanwhile. `job_id`: a queued job about to pay, checked again
    (the budget lowered, or calls cost more than typical): against what is spent and what the jobs already
    sent may still cost, first come first served; the jobs still waiting check when their turn comes."""
    if settings.daily_budget_usd is None:
        yield
        return
    from gsd_research.deep.accounting import typical_cost
    from gsd_research.deep.store import JobStore, file_lock

    store = JobStore()
    store.control.mkdir(parents=True, exist_ok=True)
    with file_lock(store.control / "budget.lock"):
        spent, held = usage_ledger.spent_on(), _held(store, table, job_id, taken_only=job_id is not None)
        this = typical_cost(table, model or settings.model, effort)
        cap = settings.daily_budget_usd
        if spent + held >= cap or spent + held + this > cap:
            raise BudgetExceeded(
                f"Today's research budget cannot take this call: ${spent:.2f} spent and ${held:.2f} held by queued "
                f"jobs, of ${cap:.2f} (UTC day); this call typically costs ${this:.2f}",
                suggestions=["gsd-research usage", "gsd-research jobs list (queued jobs hold their typical cost "
                             "until they run or are cancelled)", "Wait for the next UTC day",
                             "Raising deep.daily_budget_usd is the user's decision: ask the user, never raise it "
                             "yourself"],
                details={"spent_usd": spent, "held_usd": held, "call_usd": this, "budget_usd": cap})
        yield


def held_usd(table: dict) -> float:
    """What the queued jobs hold against the daily budget now (`usage` subtracts it from what remains)."""
    from gsd_research.deep.store import JobStore

    return _held(JobStore(), table, None)


def check_budget(settings: DeepSettings, table: dict, effort: str, model: str | None, job_id: str) -> None:
    """BUDGET_EXCEEDED when queued job `job_id` no longer fits the budget as it is about to pay (see admission);
    else it is marked admitted under the same lock, so the next job's check counts it."""
    with admission(settings, table, effort, model, job_id):
        if settings.daily_budget_usd is not None:
            from gsd_research.deep.store import JobStore

            store = JobStore()
            with store.lock(job_id):
                store.update_status(job_id, budgetAdmitted=True)


def cost_warnings(settings: DeepSettings, table: dict, effort: str) -> tuple[float | None, list[str]]:
    """The typical cost of a call at `effort` and a warning when it is likely to exceed the threshold."""
    expected = costs.expected_cost(table, PROVIDER, settings.model, effort)
    if expected is not None and expected > settings.cost_warning_usd:
        return expected, [f"Deep research at effort '{effort}' typically costs about ${expected:.2f} "
                          f"(over ${settings.cost_warning_usd:.2f}); use --effort low or medium unless depth is needed"]
    return expected, []
