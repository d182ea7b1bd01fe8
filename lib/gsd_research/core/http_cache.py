"""The HTTP cache: requests-cache backends (SQLite, Redis, off), credential-free cache keys, cache faults.

Entries are JSON (requests-cache's cattrs JSON stage) behind a format tag, never pickles: whoever can write
to a shared Redis or to the SQLite file can poison an answer, but cannot run code in the readers. A value
without the tag (a pickle from an older version or a planted one) reads as a miss and is overwritten; a
SQLite file of an older version (PRAGMA user_version below CACHE_FORMAT) is deleted unread on open.
"""

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
CACHE_FORMAT = 2  # SQLite user_version of a cache holding tagged JSON entries (0: requests-cache's pickles)
FORMAT_TAG = "gsd-research-cache/json\n"


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


def safe_serializer():
    """requests-cache's JSON serializer behind FORMAT_TAG; loading anything else (a pickle, a foreign or
    malformed value, an answer whose status is not 200) gives None, which requests-cache treats as a miss.
    Nothing it reads can run code."""
    from requests_cache.serializers.pipeline import SerializerPipeline, Stage
    from requests_cache.serializers.preconf import json_preconf_stage

    class TaggedJson(SerializerPipeline):
        def copy(self):  # requests-cache copies the pipeline it is given: keep the safe loads
            return TaggedJson([stage.copy() for stage in self.stages], name=self.name, is_binary=False)

        def loads(self, value):
            try:
                loaded = super().loads(value)
            except Exception:  # noqa: BLE001 - whatever is not ours is a miss, never a crash
                return None
            # only 200 answers are ever stored: any other status (a planted 500, an empty `{}` read as
            # status 0 that would never expire) is a miss, and the next answer overwrites it
            return loaded if getattr(loaded, "status_code", None) == 200 else None

    return TaggedJson([json_preconf_stage, Stage(dumps=_dumps, loads=_loads)], name="gsd-json", is_binary=False)


def _dumps(obj) -> str:
    """Every entry is stored through here: its URLs (request, redirects, Location) lose their credentials and
    any known key is scrubbed from the whole entry, whatever stored it (the session, fetch, keyless search)."""
    import json

    from gsd_research.core.secrets import known_secrets, scrub

    secrets = known_secrets()
    _redact_urls(obj, secrets)
    return FORMAT_TAG + scrub(json.dumps(obj, separators=(",", ":"), ensure_ascii=False), secrets)


_URL_FIELDS = frozenset({"url", "location", "content-location"})


def _redact_urls(obj, secrets: list[str]) -> None:
    from gsd_research.core.secrets import redact_url

    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for name, value in list(items):
        if isinstance(value, str) and str(name).lower() in _URL_FIELDS:
            obj[name] = redact_url(value, secrets)
        elif isinstance(value, (dict, list)):
            _redact_urls(value, secrets)


def cache_key(request, **kwargs) -> str:
    """requests-cache's key of `request` with its URL redacted first (core.secrets.redact_url): a key in a
    URL neither reaches the cache nor splits one page into an entry per key."""
    from requests_cache.cache_keys import create_key

    from gsd_research.core.secrets import redact_url

    url = getattr(request, "url", None)
    if url and redact_url(url) != url:
        request = request.copy()
        request.url = redact_url(url)
    return create_key(request, **kwargs)


def _loads(value):
    import json

    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8")
    if not isinstance(value, str) or not value.startswith(FORMAT_TAG):
        raise ValueError("not a gsd-research cache entry")
    return json.loads(value[len(FORMAT_TAG):])


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
        key_fn=cache_key,
        match_headers=False,
        expire_after=config.ttl("default"),
        stale_if_error=False,
    )
    if backend_name == "redis":
        import redis
        from requests_cache.backends.redis import RedisCache

        url = str(config.get("cache.redis_url"))
        connection = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        backend = RedisCache(namespace="gsd_research", connection=connection, serializer=safe_serializer())
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
            unlink_symlinks(path)
            current = file_format(path)
            if current is not None and current < CACHE_FORMAT:
                discard(path)
            backend = requests_cache.SQLiteCache(str(path), wal=True, busy_timeout=30000,
                                                 serializer=safe_serializer())
            if current != CACHE_FORMAT:
                mark_format(path)
    session = requests_cache.CachedSession(backend=backend, **common)
    session.headers["User-Agent"] = USER_AGENT
    return session


def unlink_symlinks(path) -> None:
    """The cache database (and its -wal and -shm files) is ours alone: a symlink in its place, which would make
    SQLite write our tables into another application's database, is removed and a new cache starts."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        if p.is_symlink():
            p.unlink()  # the link, never its target
            print(f"gsd-research: {p.name} was a symbolic link; it was removed (the HTTP cache is a file of its "
                  "own) and a new cache starts", file=sys.stderr)


def file_format(path) -> int | None:
    """The format of an existing cache file: its user_version, 0 for an older version's pickles; None for
    no file, an empty one, or one that is not a database (left to `cache clear` and `doctor`)."""
    import sqlite3

    if not path.exists():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'responses'").fetchone()[0]
    except sqlite3.Error:
        return None
    return int(version) if tables or version else None


def discard(path) -> None:
    """Delete a cache file an older version wrote (pickled entries) before anything reads it."""
    for p in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        p.unlink(missing_ok=True)
    print("gsd-research: discarded an HTTP cache written by an older version (pickled entries, an unsafe "
          "format); a new one starts now", file=sys.stderr)


def mark_format(path) -> None:
    import sqlite3

    conn = sqlite3.connect(str(path), timeout=30)
    try:
        if conn.execute("PRAGMA user_version").fetchone()[0] != CACHE_FORMAT:
            conn.execute(f"PRAGMA user_version = {CACHE_FORMAT}")
            conn.commit()
    finally:
        conn.close()


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
