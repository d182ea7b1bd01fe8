"""Keep API keys out of everything the product writes: one scrubber used at every edge."""

from __future__ import annotations

import os

from gsd_research.config import PROVIDER_ENV

_MIN_SECRET = 6


def known_secrets(config=None) -> list[str]:
    """Every key value configured through the environment or the config file."""
    values = set()
    for _, names in PROVIDER_ENV.values():
        for name in names:
            value = os.environ.get(name, "").strip()
            if len(value) >= _MIN_SECRET:
                values.add(value)
    if config is not None:
        for provider in PROVIDER_ENV:
            value = config.get(f"providers.{provider}.api_key")
            if value and len(str(value)) >= _MIN_SECRET:
                values.add(str(value))
    return sorted(values, key=len, reverse=True)


def scrub(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every known key replaced by ***."""
    for secret in secrets if secrets is not None else known_secrets():
        if secret in text:
            text = text.replace(secret, "***")
    return text
