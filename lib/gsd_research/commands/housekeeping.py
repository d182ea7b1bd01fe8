"""Housekeeping: `doctor`, `cache stats|clear`, `config show|set|path`."""

from __future__ import annotations

import os
import sys
import time

import click

from gsd_research import __version__
from gsd_research.config import PROVIDER_ENV, Config, config_path, default_at, home, load_user_config, redact
from gsd_research.errors import GsdError, UsageError
from gsd_research.runtime import agent_command

PROBE_TIMEOUT = 2.0
# Where a provider answers a cheap GET (any HTTP answer, even 401/404, means reachable).
PROBE_PATHS = {"ollama": "/api/tags"}
KEY_OPTIONAL = {"context7": "works anonymously (rate-limited)", "ollama": "local, no key needed"}
STATE_DIRS = {"config": "config.yaml", "cache": "cache", "logs": "logs", "jobs": "conversation-logs",
              "knowledge_base": "repositories"}


def _with_budget(rt, doc: dict) -> dict:
    """Record the document's token cost; a housekeeping answer that does not fit is a usage error."""
    from gsd_research.output import document_tokens

    meta = doc.setdefault("metadata", {})
    meta.update({"tokens_used": rt.max_tokens, "max_tokens": rt.max_tokens})
    meta["tokens_used"] = document_tokens(doc)
    if meta["tokens_used"] > rt.max_tokens:
        raise UsageError(f"--max-tokens {rt.max_tokens} is too small for this answer ({meta['tokens_used']} needed)",
                         suggestions=[f"Use --max-tokens {meta['tokens_used'] + 100}"])
    return doc


# -- doctor -----------------------------------------------------------------------------------------


def _load_config(problems: list[str]) -> Config:
    try:
        return Config()
    except GsdError as exc:
        problems.append(exc.message)
        return Config({})


def _probe(url: str, timeout: float) -> dict:
    """One short GET without credentials and without the cache: reachable or why not."""
    import requests

    started = time.monotonic()
    try:
        resp = requests.get(url, timeout=(timeout, timeout), allow_redirects=False,
                            headers={"User-Agent": f"gsd-research/{__version__} (doctor)"})
    except requests.Timeout:
        return {"reachable": False, "error": "timeout"}
    except requests.RequestException as exc:
        return {"reachable": False, "error": exc.__class__.__name__}
    return {"reachable": True, "status": resp.status_code, "ms": round((time.monotonic() - started) * 1000)}


def _providers(cfg: Config, probe: bool, timeout: float) -> list[dict]:
    rows = []
    for name in PROVIDER_ENV:
        source = cfg.key_source(name)
        row = {"name": name, "configured": bool(source) or name in KEY_OPTIONAL, "key": bool(source),
               "key_source": source, "base_url": _redact_url(cfg.base_url(name))}
        if not source and name in KEY_OPTIONAL:
            row["note"] = KEY_OPTIONAL[name]
        elif not source:
            row["note"] = f"set {PROVIDER_ENV[name][1][0]}"
        rows.append(row)
    if probe:
        _probe_all(rows, [cfg.base_url(r["name"]) + PROBE_PATHS.get(r["name"], "") for r in rows], timeout)
    return rows


def _probe_all(rows: list[dict], urls: list[str], timeout: float) -> None:
    """Probe in parallel daemon threads, bounded overall (a hanging DNS lookup cannot hold doctor up)."""
    import threading

    results: dict[int, dict] = {}

    def work(i: int, url: str) -> None:
        results[i] = _probe(url, timeout)

    threads = [threading.Thread(target=work, args=(i, u), daemon=True) for i, u in enumerate(urls)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 2 * timeout + 0.5
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    for i, row in enumerate(rows):
        row.update(results.get(i) or {"reachable": False, "error": "timeout"})


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


def _cache_summary(cfg: Config, problems: list[str]) -> dict:
    from gsd_research.http import cache_backend_name, cache_file

    backend = cache_backend_name(cfg)
    info: dict = {"backend": backend}
    if backend == "sqlite":
        path = cache_file()
        info.update({"path": str(path), "exists": path.exists()})
    elif backend == "redis":
        info["url"] = _redact_url(str(cfg.get("cache.redis_url")))
        try:
            import redis

            redis.Redis.from_url(str(cfg.get("cache.redis_url")), socket_connect_timeout=1, socket_timeout=1).ping()
            info["reachable"] = True
        except Exception as exc:  # noqa: BLE001 - any failure is reported, never raised
            info["reachable"] = False
            problems.append(f"Redis cache unreachable ({exc.__class__.__name__}); calls run uncached")
    elif backend != "off":
        problems.append(f"Unknown cache backend '{backend}'; set cache.backend to sqlite, redis or off")
    return info


def _state() -> dict:
    root = home()
    out = {"home": str(root), "home_exists": root.is_dir()}
    for label, rel in STATE_DIRS.items():
        path = root / rel
        out[label] = {"path": str(path), "exists": path.exists()}
    return out


@agent_command("doctor")
@click.option("--no-probe", is_flag=True, help="Skip the network reachability probes (instant, offline).")
@click.option("--timeout", type=click.FloatRange(min=0.1, max=30), default=PROBE_TIMEOUT, show_default=True,
              help="Seconds per reachability probe (probes run in parallel).")
def doctor(rt, no_probe: bool, timeout: float):
    """Which providers are configured and reachable, where state lives, which cache backend is used."""
    problems: list[str] = []
    cfg = _load_config(problems)
    providers = _providers(cfg, not no_probe, timeout)
    doc = {
        "version": __version__,
        "python": sys.version.split()[0],
        "state": _state(),
        "cache": _cache_summary(cfg, problems),
        "providers": providers,
        "ready": [p["name"] for p in providers if p["configured"] and p.get("reachable", True)],
        "problems": problems,
    }
    return _with_budget(rt, doc)


# -- cache ------------------------------------------------------------------------------------------


@click.group("cache")
def cache():
    """HTTP cache statistics and clearing."""


def _open_cache(rt):
    """The configured cache backend, or a clear error when it cannot be opened."""
    session = rt.http.session
    if rt.http.cache_broken:
        raise GsdError(f"The HTTP cache cannot be opened: {rt.http.cache_broken}", code="INTERNAL_ERROR",
                       suggestions=["gsd-research doctor", "gsd-research config set cache.backend sqlite"])
    return session.cache


def _storage_size(backend: str, cache_obj) -> int | None:
    if backend == "sqlite":
        from gsd_research.http import cache_file

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
    from gsd_research.http import cache_backend_name, cache_file, read_cache_stats

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
@click.option("--expired", is_flag=True, help="Remove only expired answers (keeps the counters).")
def clear(rt, expired: bool):
    """Empty the HTTP cache and reset its hit/miss counters."""
    from gsd_research.http import cache_backend_name, cache_file, record_cache_event

    backend = cache_backend_name(rt.config)
    if backend == "off" or (backend == "sqlite" and not cache_file().exists()):
        removed = 0
    else:
        cache_obj = _open_cache(rt)
        before = _entries(cache_obj)
        if expired:
            cache_obj.delete(expired=True)
        else:
            cache_obj.clear()
        removed = before - _entries(cache_obj)
    from gsd_research.deep import result_cache

    deep_removed = result_cache.clear(expired, rt.config.ttl("deep"))
    if not expired:
        record_cache_event("", reset=True)
    return _with_budget(rt, {"backend": backend, "removed": removed, "deep_results_removed": deep_removed,
                             "expired_only": expired, "counters_reset": not expired})


cache.add_command(stats)
cache.add_command(clear)


# -- config -----------------------------------------------------------------------------------------


@click.group("config")
def config():
    """Show, set and locate the configuration (GSD_RESEARCH_HOME/config.yaml)."""


def _environment() -> dict:
    """Which provider variables are set: URLs shown, keys only as 'set'."""
    out = {}
    for url_var, key_vars in PROVIDER_ENV.values():
        if url_var and os.environ.get(url_var):
            out[url_var] = _redact_url(os.environ[url_var])
        for var in key_vars:
            if os.environ.get(var, "").strip():
                out[var] = "set"
    if os.environ.get("GSD_RESEARCH_HOME"):
        out["GSD_RESEARCH_HOME"] = os.environ["GSD_RESEARCH_HOME"]
    return out


@agent_command("show")
def show(rt):
    """The effective configuration (defaults + config.yaml), keys redacted, and the variables that override it."""
    cfg = rt.config
    return _with_budget(rt, {"path": str(config_path()), "exists": config_path().is_file(),
                             "config": redact(cfg.data), "environment": _environment()})


@agent_command("path")
def path(rt):
    """Where the configuration file and all other state live."""
    return _with_budget(rt, {"path": str(config_path()), "exists": config_path().is_file(), "home": str(home())})


def validate(dotted: str, value) -> str | None:
    """Reject values that would break calls; return a note for keys gsd-research does not know."""
    default = default_at(dotted)
    if dotted == "cache.backend" and value not in ("sqlite", "redis", "off"):
        raise UsageError(f"cache.backend must be sqlite, redis or off, not {value!r}")
    if isinstance(default, dict):
        raise UsageError(f"'{dotted}' is a section; set one of its keys: {', '.join(sorted(default))}")
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise UsageError(f"'{dotted}' takes a number >= 0, not {value!r}")
    if dotted.endswith(".base_url") or dotted == "cache.redis_url":
        if not isinstance(value, str) or "://" not in value:
            raise UsageError(f"'{dotted}' takes a URL such as https://host/path, not {value!r}")
    if default is None and not dotted.startswith("providers."):
        return "not a key gsd-research sets by default; stored as given"
    return None


@agent_command("set")
@click.argument("key")
@click.argument("value")
def set_(rt, key: str, value: str):
    """Set KEY (dotted, e.g. cache.ttl.docs) to VALUE (a YAML scalar) in config.yaml."""
    from gsd_research.config import parse_value, set_value
    from gsd_research.secrets import register

    parsed = value if isinstance(default_at(key), str) else parse_value(value)
    note = validate(key, parsed)
    load_user_config()  # a broken file is reported before anything is written
    stored = set_value(key, value)
    secret = any(m in key.lower().rsplit(".", 1)[-1] for m in ("key", "token", "secret", "password"))
    if secret:
        register(stored)
    doc = {"key": key, "value": "***" if secret else stored, "path": str(config_path())}
    if secret:
        doc["note"] = "Stored in config.yaml (mode 600); environment variables are preferred for keys"
    elif note:
        doc["note"] = note
    return _with_budget(rt, doc)


config.add_command(show)
config.add_command(set_, "set")
config.add_command(path)
