"""Unexpected errors: the traceback goes to GSD_RESEARCH_HOME/logs/errors.log (keys scrubbed), never to stdout."""

from __future__ import annotations


def log_internal_error(exc: BaseException) -> None:
    """Keep the traceback in a log file (keys scrubbed), out of the agent's stdout."""
    import traceback

    try:
        from gsd_research.core.config import home
        from gsd_research.core.secrets import scrub

        path = home() / "logs" / "errors.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(scrub("".join(traceback.format_exception(exc))) + "\n")
    except Exception:  # noqa: BLE001 - logging must never raise
        pass
