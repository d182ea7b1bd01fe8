"""Unexpected errors: state that cannot be written (STATE_NOT_WRITABLE, for every entry point), else the
traceback goes to GSD_RESEARCH_HOME/logs/errors.log (keys scrubbed), never to stdout."""

from __future__ import annotations


def log_internal_error(exc: BaseException) -> None:
    """Keep the traceback in a log file (keys scrubbed), out of the agent's stdout."""
    import os
    import traceback

    try:
        from gsd_research.core.config import home
        from gsd_research.core.private import open_private
        from gsd_research.core.secrets import scrub

        path = home() / "logs" / "errors.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with os.fdopen(open_private(path), "a", encoding="utf-8") as fh:  # never through a planted symlink
            fh.write(scrub("".join(traceback.format_exception(exc))) + "\n")
    except Exception:  # noqa: BLE001 - logging must never raise
        pass


def state_error(exc: BaseException):
    """A file-system failure inside GSD_RESEARCH_HOME (unwritable, not a directory, disk full) as a clear
    GsdError (STATE_NOT_WRITABLE); None for anything else."""
    from pathlib import Path

    from gsd_research.core.config import home
    from gsd_research.core.errors import StateNotWritable

    if not isinstance(exc, OSError):
        return None
    root = home()
    name = exc.filename
    if not name or not (Path(str(name)) == root or root in Path(str(name)).parents):
        return None
    return StateNotWritable(f"Cannot write gsd-research state at {name}: {exc.strerror or exc.__class__.__name__}",
                            suggestions=[f"Make {root} a writable directory (GSD_RESEARCH_HOME)",
                                 "Or point GSD_RESEARCH_HOME at a writable directory", "gsd-research doctor"])


def path_error(exc: BaseException):
    """A path too long for the file system (ENAMETOOLONG: one the caller gave, our own paths are short) as a
    usage error naming its start; None for anything else."""
    import errno

    from gsd_research.core.errors import UsageError

    if not isinstance(exc, OSError) or exc.errno != errno.ENAMETOOLONG:
        return None
    name = str(exc.filename or "")
    shown = name if len(name) <= 80 else name[:80] + "…"
    return UsageError(f"Path too long for the file system ({len(name)} characters): {shown}",
                      suggestions=["Give a shorter path (each name at most 255 bytes, the whole at most 4096)"])


def cache_error(exc: BaseException):
    """A Redis cache that refuses us (wrong password, unreachable) where no call could fall back (cache
    stats, cache clear) as a clear error: USAGE_ERROR for credentials, NETWORK_ERROR otherwise; else None."""
    import sys

    redis = sys.modules.get("redis")
    if redis is None or not isinstance(exc, redis.exceptions.RedisError):
        return None
    from gsd_research.core.errors import NetworkError, UsageError

    fix = ["Check cache.redis_url (gsd-research config show): redis://:PASSWORD@HOST:PORT/DB",
           "Or use the local cache: gsd-research config set cache.backend sqlite"]
    if isinstance(exc, redis.exceptions.AuthenticationError) or "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
        return UsageError("The Redis cache refused the credentials of cache.redis_url (wrong or missing password)",
                          suggestions=fix)
    return NetworkError(f"Cannot use the Redis cache of cache.redis_url ({exc.__class__.__name__})", suggestions=fix)

