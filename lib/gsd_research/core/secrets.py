"""Keep API keys out of everything the product writes: one scrubber used at every edge."""

from __future__ import annotations

import os
import re

from gsd_research.core.provider_env import PROVIDER_ENV

_MIN_SECRET = 6
_REGISTERED: set[str] = set()


def register(value) -> None:
    """Remember a secret seen at run time (a key from the config file) so every edge scrubs it."""
    if value and len(str(value).strip()) >= _MIN_SECRET:
        _REGISTERED.add(str(value).strip())


def known_secrets(config=None) -> list[str]:
    """Every key value configured through the environment, the config file or registered at run time."""
    values = set(_REGISTERED)
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
    """`text` with every known key replaced by *** (also in its JSON-escaped and URL-encoded forms)."""
    for secret in secrets if secrets is not None else known_secrets():
        for form in _forms(secret):
            if form in text:
                text = text.replace(form, "***")
    return text


def _forms(secret: str) -> list[str]:
    import json
    from urllib.parse import quote, quote_plus

    forms = {secret, json.dumps(secret)[1:-1], quote(secret, safe=""), quote_plus(secret)}
    return sorted(forms, key=len, reverse=True)


REDACTED = "REDACTED"  # requests-cache's own word for a value it left out
# Query parameters that carry a credential, whatever the site: `key`, `api_key`, `apiKey`, `access_token`,
# `X-Amz-Signature`, `client_secret`, `password` ...
_CREDENTIAL_PARAM = re.compile(r"(?:^|[_.-])(?:(?:api|access|auth|app|client|private|secret|session|refresh|id)"
                               r"[_.-]?)?(?:key|token|secret|password|passwd|pwd|signature|sig|auth|"
                               r"authorization|credentials?)$")
_PARAM = re.compile(r"(?P<name>[^&=#;]+)=(?P<value>[^&#;]*)")


def is_credential_param(name: str) -> bool:
    from urllib.parse import unquote_plus

    return bool(_CREDENTIAL_PARAM.search(unquote_plus(name).strip().lower()))


def redact_url(url: str, secrets: list[str] | None = None) -> str:
    """`url` with the value of every credential-named query parameter REDACTED and every known key
    scrubbed wherever it sits (path, another parameter, the fragment): a URL fit to store or key a cache by."""
    if not isinstance(url, str) or not url:
        return url
    base, sep, rest = url.partition("?")
    if sep:
        query, hash_, fragment = rest.partition("#")
        url = f"{base}?{redact_query(query)}{hash_}{fragment}"
    return scrub(url, secrets)


def redact_query(query: str) -> str:
    """A URL's query with the value of every credential-named parameter REDACTED."""
    return _PARAM.sub(lambda m: f"{m['name']}={REDACTED}" if is_credential_param(m["name"]) else m[0], query)
