"""Spending guards run before a deep research call: the daily budget and the likely-cost warning.

The budget is a hard cap: a call is admitted only when what today's ledger holds, plus what the admitted calls
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


def _held(store, table: dict, exclude: str | None) -> float:
    """Dollars the queued jobs but `exclude` may still cost: those whose request has no ledger line yet."""
    from gsd_research.deep import accounting

    recorded = {entry["ref"] for entry in usage_ledger.entries() if entry.get("ref")}
    held = 0.0
    for job, status in store.queued():
        ref = accounting.ref_of(job["id"], status)
        if job["id"] != exclude and (ref is None or ref not in recorded):
            held += accounting.typical_cost(table, status.get("model") or job.get("model"),
                                            status.get("effort") or job.get("effort"))
    return round(held, 6)


@contextlib.contextmanager
def admission(settings: DeepSettings, table: dict, effort: str, model: str | None = None, job_id: str | None = None):
    """Held while a call is admitted against the daily budget (BUDGET_EXCEEDED when it does not fit) and, by
    the caller, queued: no other call is admitted meanwhile. `job_id`: the queued job asking to start, which
    is not counted twice."""
    if settings.daily_budget_usd is None:
        yield
        return
    from gsd_research.deep.accounting import typical_cost
    from gsd_research.deep.store import JobStore, file_lock

    store = JobStore()
    store.control.mkdir(parents=True, exist_ok=True)
    with file_lock(store.control / "budget.lock"):
        spent, held = usage_ledger.spent_on(), _held(store, table, job_id)
        this = typical_cost(table, model or settings.model, effort)
        cap = settings.daily_budget_usd
        if spent + held >= cap or spent + held + this > cap:
            raise BudgetExceeded(
                f"Today's research budget cannot take this call: ${spent:.2f} spent and ${held:.2f} held by queued "
                f"jobs, of ${cap:.2f} (UTC day); this call typically costs ${this:.2f}",
                suggestions=["gsd-research usage", "Wait for the next UTC day or for running jobs to finish",
                             "Raising deep.daily_budget_usd is the user's decision: ask the user, never raise it "
                             "yourself"],
                details={"spent_usd": spent, "held_usd": held, "call_usd": this, "budget_usd": cap})
        yield


def check_budget(settings: DeepSettings, table: dict, effort: str, model: str | None, job_id: str) -> None:
    """BUDGET_EXCEEDED when queued job `job_id` no longer fits the budget as it is about to pay (the budget was
    lowered, or calls cost more than their typical figure)."""
    with admission(settings, table, effort, model, job_id):
        pass


def cost_warnings(settings: DeepSettings, table: dict, effort: str) -> tuple[float | None, list[str]]:
    """The typical cost of a call at `effort` and a warning when it is likely to exceed the threshold."""
    expected = costs.expected_cost(table, PROVIDER, settings.model, effort)
    if expected is not None and expected > settings.cost_warning_usd:
        return expected, [f"Deep research at effort '{effort}' typically costs about ${expected:.2f} "
                          f"(over ${settings.cost_warning_usd:.2f}); use --effort low or medium unless depth is needed"]
    return expected, []
