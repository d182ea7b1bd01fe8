"""`researcher config set KEY VALUE`: typed, validated edits of researcher.yaml."""

from __future__ import annotations

import re

from pydantic import ValidationError

from gsd_research.core.config import parse_value
from gsd_research.core.errors import UsageError
from gsd_research.researcher.config import PROVIDERS
from gsd_research.researcher.services.repository_service import RepositoryService, normalize_types

TOP_KEYS = ("default_embedding_provider", "default_embedding_model", "mcp_port", "chroma_url")
REPO_KEYS = ("path", "file_types", "embedding_provider", "embedding_model")
PORT_HINT = ["researcher config set mcp_port 8392  (a port from 1 to 65535)"]
PLAIN_DECIMAL = re.compile(r"[0-9]+")  # ASCII digits only (re.ASCII: no other scripts' digits)


def _port(raw: str) -> int:
    """A port as plain decimal digits only: YAML would also read 0x50, +80, 8_080 (and pydantic "080") as 80."""
    text = raw.strip()
    if not PLAIN_DECIMAL.fullmatch(text):
        raise UsageError(f"Invalid value for mcp_port: {text!r} is not a valid integer port (plain decimal digits, "
                         "from 1 to 65535)", suggestions=PORT_HINT)
    return int(text)


def _stored(config, key: str):
    """The value as saved (after validation), to echo what the file now holds."""
    parts = key.split(".")
    if len(parts) == 1:
        return getattr(config, key)
    repo = next(r for r in config.repositories if r.name == parts[1])
    return getattr(repo, parts[2])


def set_key(service: RepositoryService, key: str, raw: str) -> dict:
    config = service.load()
    if key == "mcp_port":
        value = _port(raw)
    else:
        value = None if raw.strip().lower() in ("", "null", "none", "~") else parse_value(raw)
    parts = key.split(".")
    if len(parts) == 1 and key in TOP_KEYS:
        target, field = config, key
    elif len(parts) == 3 and parts[0] == "repositories" and parts[2] in REPO_KEYS:
        target, field = service.get_repository(parts[1], config), parts[2]
        if field == "file_types":
            value = normalize_types(value if isinstance(value, list) else [str(value)])
    else:
        raise UsageError(f"Unknown configuration key '{key}'",
                         suggestions=[*TOP_KEYS, "repositories.NAME.file_types"])
    if field.endswith("embedding_provider") and value is not None and value not in PROVIDERS:
        raise UsageError(f"Unknown embedding provider '{value}'", suggestions=list(PROVIDERS))
    if isinstance(value, (int, float)) and field in ("default_embedding_model", "embedding_model", "chroma_url"):
        value = str(value)
    try:
        setattr(target, field, value)
        config = type(config).model_validate(config.model_dump(warnings=False))
    except ValidationError as exc:
        reason = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise UsageError(f"Invalid value for {key}: {reason[:200]}",
                         suggestions=PORT_HINT if field == "mcp_port" else []) from None
    except ValueError as exc:
        raise UsageError(f"Invalid value for {key}: {str(exc).splitlines()[0][:200]}") from None
    service.save(config)
    return {"key": key, "value": _stored(config, key), "path": str(service.path)}
