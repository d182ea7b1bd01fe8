"""Housekeeping: `cache stats|clear`, `config show|set|path` (and the helpers `doctor` shares)."""

from __future__ import annotations

import os

import click

from gsd_research.core.config import (
    config_path,
    default_at,
    home,
    is_secret_key,
    load_user_config,
    redact,
)
from gsd_research.core.errors import InternalError, UsageError
from gsd_research.core.provider_env import PROVIDER_ENV
from gsd_research.core.runtime import agent_command


def _with_budget(rt, doc: dict) -> dict:
    """Record the document's token cost; a housekeeping answer that does not fit is a usage error."""
    from gsd_research.core.output import document_tokens

    meta = doc.setdefault("metadata", {})
    meta.update({"tokens_used": rt.max_tokens, "max_tokens": rt.max_tokens})
    meta["tokens_used"] = document_tokens(doc)
    if meta["tokens_used"] > rt.max_tokens:
        raise UsageError(f"--max-tokens {rt.max_tokens} is too small for this answer ({meta['tokens_used']} needed)",
                         suggestions=[f"Use --max-tokens {meta['tokens_used'] + 100}"])
    return doc


def _redact_url(url: str) -> str:
    """A URL without user:password and query string."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "(invalid URL)"
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _sqlite_damage(path) -> str | None:
    """Why the SQLite cache file cannot be read, or None when it opens as a database."""
    import sqlite3

    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2) as conn:
            conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.Error as exc:
        return f"{exc.__class__.__name__}: {exc}"
    return None


# -- cache ------------------------------------------------------------------------------------------


@click.group("cache")
def cache():
    """HTTP cache statistics and clearing."""


def _open_cache(rt):
    """The configured cache backend, or a clear error when it cannot be opened."""
    session = rt.http.session
    if rt.http.cache_broken:
        raise InternalError(f"The HTTP cache cannot be opened: {rt.http.cache_broken}",
                            suggestions=["gsd-research cache clear (removes a damaged SQLite cache file)",
                                    "gsd-research doctor", "gsd-research config set cache.backend sqlite"])
    return session.cache


def _storage_size(backend: str, cache_obj) -> int | None:
    if backend == "sqlite":
        from gsd_research.core.http_cache import cache_file

        base = cache_file()
        return sum(p.stat().st_size for p in (base, base.with_name(base.name + "-wal")) if p.exists())
    if backend == "redis":
        responses = cache_obj.responses
        conn = responses.connection
        keys = list(conn.scan_iter(match=f"{responses.namespace}:*", count=1000))[:10000]
        pipe = conn.pipeline()
        for key in keys:
            pipe.strlen(key)
        return int(sum(pipe.execute()))
    return None


def _entries(cache_obj) -> int:
    return len(cache_obj.responses)


@agent_command("stats")
def stats(rt):
    """Entries, size and hit rate of the HTTP cache (hits and misses of every call since the last clear)."""
    from gsd_research.core.cache_stats import read_cache_stats
    from gsd_research.core.http_cache import cache_backend_name, cache_file

    backend = cache_backend_name(rt.config)
    counters = read_cache_stats()
    looked_up = counters["hits"] + counters["misses"]
    doc: dict = {"backend": backend}
    if backend == "sqlite" and not cache_file().exists():
        doc.update({"entries": 0, "size_bytes": 0})
    elif backend == "off":
        doc.update({"entries": 0, "size_bytes": None})
    else:
        cache_obj = _open_cache(rt)
        doc.update({"entries": _entries(cache_obj), "size_bytes": _storage_size(backend, cache_obj)})
    if backend == "sqlite":
        doc["path"] = str(cache_file())
    elif backend == "redis":
        doc["url"] = _redact_url(str(rt.config.get("cache.redis_url")))
    doc.update({"hits": counters["hits"], "misses": counters["misses"], "refreshes": counters["refreshes"],
                "hit_rate": round(counters["hits"] / looked_up, 4) if looked_up else None,
                "since": counters["since"]})
    return _with_budget(rt, doc)


@agent_command("clear")
@click.option("--expired", is_flag=True,
              help="Remove only expired answers, and the kept docs answers made from them (keeps the counters).")
def clear(rt, expired: bool):
    """Empty the HTTP cache (and the kept docs and deep answers) and reset its hit/miss counters."""
    from gsd_research.core.cache_stats import record_cache_event
    from gsd_research.core.http_cache import cache_backend_name, cache_file

    backend = cache_backend_name(rt.config)
    # --expired needs the TTLs: a bad one fails here, before anything is removed; a plain clear reads none
    deep_ttl, docs_ttl = (rt.config.ttl("deep"), rt.config.ttl("docs")) if expired else (0, -1)
    if backend == "off" or (backend == "sqlite" and not cache_file().exists()):
        removed = 0
    elif backend == "sqlite" and not expired and _sqlite_damage(cache_file()):
        removed = _remove_damaged(cache_file())  # None: how many entries it held is unknown
    else:
        cache_obj = _open_cache(rt)
        before = _entries(cache_obj)
        if expired:
            cache_obj.delete(expired=True, invalid=True)  # and entries that are not ours
        else:
            cache_obj.clear()
        removed = before - _entries(cache_obj)
    from gsd_research.deep import result_cache
    from gsd_research.docs import answer_memo

    deep_removed = result_cache.clear(expired, deep_ttl)
    docs_removed = answer_memo.clear(expired, docs_ttl)  # --expired: those of expired HTTP answers
    if not expired:
        record_cache_event("", reset=True)
    doc = {"backend": backend, "removed": removed, "deep_results_removed": deep_removed,
           "docs_answers_removed": docs_removed,
           "expired_only": expired, "counters_reset": not expired}
    if removed is None:
        doc["note"] = "The cache file was damaged (not a SQLite database) and was deleted; a new one starts now"
    return _with_budget(rt, doc)


def _remove_damaged(base) -> None:
    """Delete a SQLite cache file that is not a database, with its WAL files; the next call starts a new one."""
    for p in (base, base.with_name(base.name + "-wal"), base.with_name(base.name + "-shm")):
        p.unlink(missing_ok=True)


cache.add_command(stats)
cache.add_command(clear)


# -- config -----------------------------------------------------------------------------------------


@click.group("config")
def config():
    """Show, get, set and locate the configuration (GSD_RESEARCH_HOME/config.yaml)."""


def _environment() -> dict:
    """Which provider variables are set: URLs shown, keys only as 'set'."""
    out = {}
    for url_var, key_vars in PROVIDER_ENV.values():
        if url_var and os.environ.get(url_var):
            out[url_var] = _redact_url(os.environ[url_var])
        for var in key_vars:
            if os.environ.get(var, "").strip():
                out[var] = "set"
    for var in ("GSD_RESEARCH_HOME", "OLLAMA_MODEL", "PERPLEXITY_ENABLE_ASYNC_DEEP_RESEARCH",
                "PERPLEXITY_POLLING_TIMEOUT_MS", "GSD_RESEARCH_ALLOW_HOSTS"):
        if os.environ.get(var):
            out[var] = os.environ[var]
    return out


def capability_defaults() -> dict:
    """Built-in defaults of the settings that live beside their capability's code (deep, search, llm, fetch)."""
    from gsd_research.deep.settings import DEFAULTS as DEEP
    from gsd_research.llm.router import DEFAULT_CHAINS, DEFAULT_MODELS

    return {
        "deep": dict(DEEP),
        "search": {"providers": ["tavily", "ddgs"], "fallback": True, "max_sources": 5, "depth": "basic",
                   "ddgs": {"timeout": 10, "region": "us-en", "safesearch": "moderate", "engines": "auto"}},
        "llm": {"chains": {k: list(v) for k, v in DEFAULT_CHAINS.items()}, "models": dict(DEFAULT_MODELS),
                "max_input_tokens": 24000},
        "fetch": {"max_bytes": 10_000_000, "max_redirects": 5},
    }


def all_defaults() -> dict:
    from gsd_research.core.config import DEFAULTS, _merge

    return _merge(DEFAULTS, capability_defaults())


def _known_default(dotted: str) -> tuple[bool, object]:
    """(whether gsd-research knows the dotted key, its built-in default)."""
    node: object = all_defaults()
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


@agent_command("show")
def show(rt):
    """The effective configuration (every capability's defaults + config.yaml), keys redacted, and the
    environment variables that override it."""
    from gsd_research.core.config import _merge

    cfg = rt.config
    return _with_budget(rt, {"path": str(config_path()), "exists": config_path().is_file(),
                             "config": redact(_merge(all_defaults(), cfg.user)), "environment": _environment()})


@agent_command("get")
@click.argument("key")
def get(rt, key: str):
    """KEY's value (dotted, e.g. hooks.webfetch_mode): config.yaml's, else the default. Environment variables
    override some keys (provider URLs and keys, OLLAMA_MODEL): `config show` lists those set."""
    from gsd_research.core.config import _merge

    node = redact(_merge(all_defaults(), rt.config.user))
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            raise UsageError(f"No configuration key '{key}' in config.yaml or the defaults",
                             suggestions=["gsd-research config show (every key)"])
        node = node[part]
    return _with_budget(rt, {"key": key, "value": node, "path": str(config_path())})


@agent_command("path")
def path(rt):
    """Where the configuration file and all other state live."""
    return _with_budget(rt, {"path": str(config_path()), "exists": config_path().is_file(), "home": str(home())})


HOOK_MODES = ("off", "suggest", "enforce")  # as MODES in hooks/gsd_research_hooks/common.py (a test keeps them equal)
# Keys whose value is one of a few words; a value outside silently meant the default before.
ENUMS: dict[str, tuple[str, ...]] = {
    "hooks.webfetch_mode": HOOK_MODES,
    "hooks.context7_mode": HOOK_MODES,
    "cache.backend": ("sqlite", "redis", "off"),
    "search.depth": ("basic", "advanced", "fast", "ultra-fast"),
    "search.ddgs.safesearch": ("on", "moderate", "off"),
    "deep.api": ("auto", "sonar", "agent"),
    "memory.embed": ("background", "off"),
}
# Keys whose value is a list (or a comma-separated string) of some of these words.
LIST_ENUMS: dict[str, tuple[str, ...]] = {
    "search.providers": ("tavily", "ddgs", "keyless", "duckduckgo"),
    "llm.chains.": ("gemini", "ollama", "openai"),  # any task's chain
}


def _check_words(dotted: str, value) -> None:
    """Enumerated keys take only their words; boolean keys only a boolean."""
    allowed = ENUMS.get(dotted)
    if allowed is not None and (not isinstance(value, str) or value.strip().lower() not in allowed):
        raise UsageError(f"'{dotted}' must be {', '.join(allowed[:-1])} or {allowed[-1]}, not {value!r}",
                         suggestions=[f"gsd-research config set {dotted} {allowed[0]}"])
    words = next((w for key, w in LIST_ENUMS.items() if dotted == key or (key.endswith(".") and
                                                                           dotted.startswith(key))), None)
    if words is not None:
        items = value if isinstance(value, list) else str(value or "").replace(",", " ").split()
        bad = [i for i in items if not isinstance(i, str) or i.strip().lower() not in words]
        if bad or not items:
            raise UsageError(f"'{dotted}' takes a list of {', '.join(words)}, not {value!r}",
                             suggestions=[f"gsd-research config set {dotted} '[{words[0]}, {words[1]}]'"])


def validate(dotted: str, value) -> str | None:
    """Reject values that would break calls; return a note for keys gsd-research does not know."""
    known, default = _known_default(dotted)
    _check_words(dotted, value)
    if isinstance(default, bool) and not isinstance(value, bool):
        raise UsageError(f"'{dotted}' takes true or false, not {value!r}",
                         suggestions=[f"gsd-research config set {dotted} {str(default).lower()}"])
    if isinstance(default, dict):
        raise UsageError(f"'{dotted}' is a section; set one of its keys: {', '.join(sorted(default))}")
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise UsageError(f"'{dotted}' takes a number >= 0, not {value!r}",
                             suggestions=[f"gsd-research config set {dotted} {default}"])
    if dotted.endswith(".base_url") or dotted == "cache.redis_url":
        if not isinstance(value, str) or "://" not in value:
            raise UsageError(f"'{dotted}' takes a URL such as https://host/path, not {value!r}")
    if not known and not dotted.startswith("providers."):
        return "not a key gsd-research sets by default; stored as given"
    return None


@agent_command("set", context_settings={"ignore_unknown_options": True})  # VALUE may be negative: -1
@click.argument("key")
@click.argument("value")
def set_(rt, key: str, value: str):
    """Set KEY (dotted, e.g. cache.ttl.docs) to VALUE (a YAML scalar) in config.yaml."""
    from gsd_research.core.config import parse_value, set_value
    from gsd_research.core.secrets import register

    parsed = value if isinstance(default_at(key), str) else parse_value(value)
    note = validate(key, parsed)
    if key in ENUMS:
        value = parsed.strip().lower()  # stored as the code compares it: `ENFORCE` is `enforce`
    load_user_config()  # a broken file is reported before anything is written
    stored = set_value(key, value)
    secret = is_secret_key(key)
    if secret:
        register(stored)
    doc = {"key": key, "value": "***" if secret else stored, "path": str(config_path())}
    if secret:
        doc["note"] = "Stored in config.yaml (mode 600); environment variables are preferred for keys"
    elif note:
        doc["note"] = note
    return _with_budget(rt, doc)


config.add_command(show)
config.add_command(get)
config.add_command(set_, "set")
config.add_command(path)
