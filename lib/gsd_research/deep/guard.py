"""Spending guards run before a deep research call: the daily budget and the likely-cost warning."""

from __future__ import annotations

from gsd_research.core import usage_ledger
from gsd_research.core.errors import BudgetExceeded
from gsd_research.deep import cost as costs
from gsd_research.deep.settings import DeepSettings

PROVIDER = "perplexity"


def check_budget(settings: DeepSettings) -> None:
    """BUDGET_EXCEEDED once today's recorded spend (every provider, UTC day) reaches deep.daily_budget_usd."""
    if settings.daily_budget_usd is None:
        return
    spent = usage_ledger.spent_on()
    if spent >= settings.daily_budget_usd:
        raise BudgetExceeded(
            f"Today's research budget is spent: ${spent:.2f} of ${settings.daily_budget_usd:.2f} (UTC day)",
            suggestions=["gsd-research usage", "Wait for the next UTC day",
                         "Raise it: gsd-research config set deep.daily_budget_usd 20"],
            details={"spent_usd": spent, "budget_usd": settings.daily_budget_usd})


def cost_warnings(settings: DeepSettings, table: dict, effort: str) -> tuple[float | None, list[str]]:
    """The typical cost of a call at `effort` and a warning when it is likely to exceed the threshold."""
    expected = costs.expected_cost(table, PROVIDER, settings.model, effort)
    if expected is not None and expected > settings.cost_warning_usd:
        return expected, [f"Deep research at effort '{effort}' typically costs about ${expected:.2f} "
                          f"(over ${settings.cost_warning_usd:.2f}); use --effort low or medium unless depth is needed"]
    return expected, []
