"""Cost of a deep research call: the API's own figure when given, else the published price table."""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

# usage field -> price-table field (USD per million tokens, or per thousand for searches)
TOKEN_PRICES = (
    ("prompt_tokens", "input_per_m", 1e6),
    ("completion_tokens", "output_per_m", 1e6),
    ("citation_tokens", "citation_per_m", 1e6),
    ("reasoning_tokens", "reasoning_per_m", 1e6),
    ("num_search_queries", "search_per_k", 1e3),
)


@lru_cache(maxsize=1)
def _packaged() -> dict:
    from pathlib import Path

    import yaml

    text = (Path(__file__).resolve().parents[1] / "data" / "pricing.yaml").read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader) or {}  # noqa: S506 - a safe loader


def _merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def price_table(config=None) -> dict:
    """The packaged price table with config.yaml's `pricing:` entries merged over it."""
    override = config.get("pricing", {}) if config is not None else {}
    return _merge(_packaged(), override if isinstance(override, dict) else {})


def model_prices(table: dict, provider: str, model: str) -> dict | None:
    entry = (table.get(provider) or {}).get(model)
    return entry if isinstance(entry, dict) else None


def estimate(table: dict, provider: str, model: str, usage: dict) -> float | None:
    """Dollars for `usage` (chat-completions field names) at the table's prices; None for an unknown model."""
    prices = model_prices(table, provider, model)
    if prices is None:
        return None
    total = float(prices.get("request") or 0)
    for field, price_key, per in TOKEN_PRICES:
        total += float(usage.get(field) or 0) * float(prices.get(price_key) or 0) / per
    return round(total, 6)


def api_cost(usage: dict) -> float | None:
    """The dollar figure the API reported itself (`usage.cost.total_cost`, or a bare number)."""
    cost = usage.get("cost") if isinstance(usage, dict) else None
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return float(cost)
    if isinstance(cost, dict):
        value = cost.get("total_cost")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def cost_of(table: dict, provider: str, model: str, usage: dict) -> dict[str, Any]:
    """{"usd": …, "source": "api"|"estimated"|"unknown"} for one finished call."""
    reported = api_cost(usage)
    if reported is not None:
        return {"usd": round(reported, 6), "source": "api"}
    estimated = estimate(table, provider, model, usage)
    if estimated is not None:
        return {"usd": estimated, "source": "estimated"}
    return {"usd": 0.0, "source": "unknown"}


def expected_cost(table: dict, provider: str, model: str, effort: str) -> float | None:
    """What one call at `effort` typically costs, from the table's typical usage per effort."""
    usage = (table.get("deep_effort_usage") or {}).get(effort)
    if not isinstance(usage, dict):
        return None
    return estimate(table, provider, model, usage)
