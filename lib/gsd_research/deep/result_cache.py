"""Finished deep research results kept for the `deep` TTL (identical query, effort and model)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from gsd_research.core.config import home
from gsd_research.deep.store import read_json, write_json


def cache_dir() -> Path:
    return home() / "cache" / "deep"


def key(query: str, effort: str, model: str) -> str:
    norm = " ".join(query.split()).lower()
    return hashlib.sha256(f"{model}\x00{effort}\x00{norm}".encode()).hexdigest()[:32]


def get(query: str, effort: str, model: str, ttl: float) -> dict | None:
    """The stored result (with its cost) when younger than `ttl` seconds; `conversation_id` names the
    conversation that holds it, when known."""
    doc = read_json(cache_dir() / f"{key(query, effort, model)}.json")
    if not doc or not isinstance(doc.get("result"), dict):
        return None
    if time.time() - float(doc.get("stored_at") or 0) > ttl:
        return None
    return dict(doc["result"], conversation_id=doc.get("conversation_id"))


def put(query: str, effort: str, model: str, result: dict, conversation_id: str | None = None) -> None:
    path = cache_dir() / f"{key(query, effort, model)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = {k: v for k, v in result.items() if k not in ("conversation_id", "cache_hit")}
    write_json(path, {"stored_at": time.time(), "query": query, "effort": effort, "model": model, "result": stored,
                      "conversation_id": conversation_id}, durable=False)


def link(query: str, effort: str, model: str, conversation_id: str) -> None:
    """Name the conversation that now holds the stored result (served again, it is not copied again)."""
    path = cache_dir() / f"{key(query, effort, model)}.json"
    doc = read_json(path)
    if doc is not None:
        write_json(path, dict(doc, conversation_id=conversation_id), durable=False)


def clear(expired_only: bool = False, ttl: float = 0) -> int:
    """Remove stored results (only those older than `ttl` with `expired_only`); returns how many."""
    removed = 0
    for path in cache_dir().glob("*.json"):
        if expired_only:
            doc = read_json(path) or {}
            if time.time() - float(doc.get("stored_at") or 0) <= ttl:
                continue
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    return removed
