"""`gsd-research usage [--since DATE]`: spend and tokens per provider and per day, from the usage ledger."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

import click

from gsd_research.core.errors import UsageError
from gsd_research.core.runtime import agent_command

RELATIVE = re.compile(r"^(\d{1,4})d$")


def parse_since(text: str | None) -> date | None:
    """YYYY-MM-DD, 'today', or Nd (the last N days including today), as a UTC day."""
    if not text:
        return None
    raw = text.strip().lower()
    today = datetime.now(timezone.utc).date()
    if raw == "today":
        return today
    match = RELATIVE.match(raw)
    if match:
        return today - timedelta(days=max(0, int(match.group(1)) - 1))
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise UsageError(f"--since takes a date such as 2026-11-01, 'today' or 7d, not '{text}'",
                         suggestions=["gsd-research usage --since 7d"]) from None


@agent_command("usage")
@click.option("--since", default=None, help="First UTC day to count: YYYY-MM-DD, 'today' or Nd (default: all).")
def usage(rt, since: str | None):
    """Totals of the usage ledger: calls, tokens and dollars per provider and per day."""
    from gsd_research.core import usage_ledger
    from gsd_research.core.output import document_tokens
    from gsd_research.deep.settings import load

    first = parse_since(since)
    summary = usage_ledger.summarize(first)
    doc = {"since": first.isoformat() if first else None, **summary}
    budget = load(rt.config).daily_budget_usd
    spent = usage_ledger.spent_on()
    doc["today"] = {"date": datetime.now(timezone.utc).date().isoformat(), "spent_usd": spent, "budget_usd": budget,
                    "remaining_usd": None}
    if budget is not None:  # queued deep jobs hold their typical cost until they settle (deep.guard)
        from gsd_research.deep.cost import price_table
        from gsd_research.deep.guard import held_usd

        held = held_usd(price_table(rt.config))
        doc["today"].update(held_usd=held, remaining_usd=round(max(0.0, budget - spent - held), 6))
    total_days = len(doc["days"])
    doc["metadata"] = {"ledger": str(usage_ledger.ledger_path()), "days_total": total_days,
                       "days_returned": total_days, "max_tokens": rt.max_tokens, "truncated": False,
                       "tokens_used": rt.max_tokens}  # a placeholder as wide as the real figure
    while document_tokens(doc) > rt.max_tokens and doc["days"]:
        doc["days"].pop()  # oldest day first; totals still cover every day
        doc["metadata"].update(days_returned=len(doc["days"]), truncated=True)
    used = document_tokens(doc)
    if used > rt.max_tokens:
        raise UsageError(f"--max-tokens {rt.max_tokens} is too small for this answer ({used} needed)",
                         suggestions=[f"Use --max-tokens {used + 100}"])
    doc["metadata"]["tokens_used"] = used
    return doc
