"""The HTTP cache: requests-cache backends (SQLite, Redis, off), credential-free cache keys, cache faults."""

from __future__ import annotations

import sys
import threading

from gsd_research import __version__
from gsd_research.core.config import Config, home
from gsd_research.core.errors import UsageError

# Credentials: never part of a cache key, redacted from stored responses.
IGNORED_PARAMETERS = (
    "Authorization",
    "Proxy-Authorization",
    "X-API-Key",
    "x-api-key",
    "x-goog-api-key",
    "api_key",
    "apikey",
    "api-key",
    "key",
    "access_token",
)
_IGNORED_LOWER = {name.lower(): name for name in IGNORED_PARAMETERS}
USER_AGENT = f"gsd-research/{__version__}"
# Optional requests-cache backends whose client libraries cost start-up time when nobody uses them.
_OPTIONAL_BACKEND_MODULES = ("redis", "pymongo", "boto3")


_IMPORT_LOCK = threading.Lock()


def import_requests_cache(need_redis: bool):
    """requests_cache without importing the client libraries of backends this call does not use.

    requests_cache imports every installed backend client at import time (redis alone costs ~130 ms
    of a ~450 ms start); with the module name mapped to None the import fails fast and requests_cache
    leaves a placeholder. The Redis backend is imported for real when it is configured.
    """
    with _IMPORT_LOCK:  # sys.modules is shared by every thread of a worker
        if "requests_cache" in sys.modules:
            return sys.modules["requests_cache"]
        blocked = [] if need_redis else [m for m in _OPTIONAL_BACKEND_MODULES if m not in sys.modules]
        for name in blocked:
            sys.modules[name] = None  # type: ignore[assignment]
        try:
            import requests_cache
        finally:
            for name in blocked:
                if sys.modules.get(name, 0) is None:
                    del sys.modules[name]
        return requests_cache


def cache_backend_name(config: Config) -> str:
    """sqlite, redis or off (YAML reads a bare `off` as false, so falsy values mean off too)."""
    raw = config.get("cache.backend", "sqlite")
    name = str(raw).strip().lower() if raw not in (False, None) else "off"
    return "off" if name in ("off", "none", "memory", "false", "no", "0", "") else name


def build_session(config: Config):
    """The shared requests-cache session: SQLite under GSD_RESEARCH_HOME, Redis, or off."""
    backend_name = cache_backend_name(config)
    requests_cache = import_requests_cache(backend_name == "redis")
    common = dict(
        allowable_codes=(200,),
        allowable_methods=("GET", "POST"),
        ignored_parameters=IGNORED_PARAMETERS,
        match_headers=False,
        expire_after=int(config.get("cache.ttl.default", 3600)),
        stale_if_error=False,
    )
    if backend_name == "redis":
        import redis
        from requests_cache.backends.redis import RedisCache

        url = str(config.get("cache.redis_url"))
        connection = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        backend = RedisCache(namespace="gsd_research", connection=connection)
    elif backend_name == "off":
        backend = requests_cache.backends.BaseCache()
    elif backend_name != "sqlite":
        raise UsageError(f"Unknown cache backend '{backend_name}'",
                         suggestions=["gsd-research config set cache.backend sqlite (or redis, off)"])
    else:
        from gsd_research.core.cache_stats import exclusive_lock

        path = cache_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Opening runs PRAGMA journal_mode=WAL, which fails at once ("database is locked", busy_timeout
        # notwithstanding) when processes race to open a new file: they open it one at a time.
        with exclusive_lock(path.with_name(path.name + ".lock")):
            backend = requests_cache.SQLiteCache(str(path), wal=True, busy_timeout=30000)
    session = requests_cache.CachedSession(backend=backend, **common)
    session.headers["User-Agent"] = USER_AGENT
    return session


def cache_file():
    return home() / "cache" / "http_cache.sqlite"


def canonical_headers(headers) -> dict:
    """Headers with credential names spelled as in IGNORED_PARAMETERS (requests-cache matches them exactly)."""
    out = {}
    for name, value in dict(headers).items():
        out[_IGNORED_LOWER.get(str(name).lower(), name)] = value
    return out


def is_cache_failure(exc: BaseException) -> bool:
    import sqlite3

    if isinstance(exc, (sqlite3.Error, OSError)):
        return True
    redis = sys.modules.get("redis")
    return bool(redis is not None and isinstance(exc, redis.exceptions.RedisError))


def safe_delete(cache, key: str) -> None:
    try:
        cache.delete(key)
    except Exception:  # noqa: BLE001 - eviction is best effort
        pass
