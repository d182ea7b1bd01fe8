"""Typed errors: each carries the envelope code, an actionable message and the exit status."""

from __future__ import annotations

# Exit status of DESIGN.md: 0 ok, 2 usage, 3 missing configuration, 4 not found,
# 5 provider failure after retries, 6 timeout, 1 anything else.
EXIT_CODES: dict[str, int] = {
    "USAGE_ERROR": 2,
    "BLOCKED_URL": 2,
    "MISSING_API_KEY": 3,
    "INVALID_API_KEY": 3,
    "ENVIRONMENT_MISSING": 3,
    "LIBRARY_NOT_FOUND": 4,
    "JOB_NOT_FOUND": 4,
    "JOB_CANCELLED": 1,
    "JOB_RUNNING": 6,  # jobs wait: still running, wait again
    "JOB_FAILED": 5,  # jobs wait/result: the job failed for good (cause in the message and details)
    "NOT_FOUND": 4,
    "REPOSITORY_NOT_FOUND": 4,
    "DOCUMENT_NOT_FOUND": 4,
    "RATE_LIMITED": 5,
    "UPSTREAM_ERROR": 5,
    "NETWORK_ERROR": 5,
    "QUOTA_EXCEEDED": 5,
    "NO_BACKEND": 5,
    "LIBRARY_NOT_READY": 5,
    "TIMEOUT": 6,
    "EXTRACTION_FAILED": 1,
    "REPORT_FAILED": 1,
    "BUDGET_EXCEEDED": 1,
    "INTERNAL_ERROR": 1,
    "STATE_NOT_WRITABLE": 1,
    "STATE_UNSAFE": 1,
    "ACCESS_DENIED": 5,
    "INTERRUPTED": 130,  # SIGINT; SIGTERM: 143
}


class GsdError(Exception):
    """An error that becomes the JSON error envelope."""

    code = "INTERNAL_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        suggestions: list[str] | None = None,
        details: dict | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.suggestions = list(suggestions or [])
        self.details = dict(details or {})
        self.retry_after = retry_after

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.code, 1)

    def to_dict(self) -> dict:
        err: dict = {"code": self.code, "message": self.message}
        if self.suggestions:
            err["suggestions"] = self.suggestions
        if self.retry_after is not None:
            err["retry_after"] = self.retry_after
        if self.details:
            err["details"] = self.details
        return err


class UsageError(GsdError):
    code = "USAGE_ERROR"


def check_arguments(argv: list[str]) -> None:
    """An argument whose bytes are not UTF-8 (Python keeps them as lone surrogates) can be neither sent to a
    provider or a model nor printed back: a usage error naming which one, instead of an internal error later."""
    for number, arg in enumerate(argv, start=1):
        if any("\udc80" <= c <= "\udcff" for c in arg):
            raise UsageError(f"Argument {number} is not valid UTF-8 text",
                             suggestions=["Pass every argument as UTF-8 text (check the locale: LANG, LC_ALL)"])


class MissingApiKey(GsdError):
    code = "MISSING_API_KEY"


class InvalidApiKey(GsdError):
    code = "INVALID_API_KEY"


class NotFound(GsdError):
    code = "NOT_FOUND"


class ProviderError(GsdError):
    code = "UPSTREAM_ERROR"


class RateLimited(ProviderError):
    code = "RATE_LIMITED"


class NetworkError(ProviderError):
    code = "NETWORK_ERROR"


class TimeoutError_(GsdError):
    code = "TIMEOUT"


class BlockedUrl(GsdError):
    code = "BLOCKED_URL"


class ExtractionFailed(GsdError):
    code = "EXTRACTION_FAILED"


class BudgetExceeded(GsdError):
    code = "BUDGET_EXCEEDED"


class JobNotFound(NotFound):
    code = "JOB_NOT_FOUND"


class CallInterrupted(GsdError):
    """A signal stopped the call; the exit status is 128 + its number (130 SIGINT, 143 SIGTERM)."""

    code = "INTERRUPTED"

    def __init__(self, signum: int, message: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.signum = int(signum)
        self.details.setdefault("signal", self.signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def reinstall_hint() -> str:
    """How to repair a damaged installation, for the route this call came by: the plugin's environment (its
    launcher sets GSD_RESEARCH_PLUGIN_ROOT and GSD_RESEARCH_PLUGIN_DATA) is rebuilt by the plugin, anything else by
    install.sh."""
    import os
    import shlex

    root, data = os.environ.get("GSD_RESEARCH_PLUGIN_ROOT"), os.environ.get("GSD_RESEARCH_PLUGIN_DATA")
    if root and data:
        cli = os.path.join(root, "bootstrap")
        return "Rebuild the plugin's Python environment: " + " ".join(
            shlex.quote(p) for p in ("python3", cli, "rebuild", root, data))
    return "Reinstall with install.sh"
