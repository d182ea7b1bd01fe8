"""Typed errors: one class per envelope code, carrying its exit status; callers raise and catch classes."""

from __future__ import annotations


class GsdError(Exception):
    """An error that becomes the JSON error envelope. Exit status of DESIGN.md: 0 ok, 2 usage, 3 missing
    configuration, 4 not found, 5 provider failure after retries, 6 timeout, 1 anything else."""

    code = "INTERNAL_ERROR"
    exit_status = 1

    def __init__(
        self,
        message: str,
        *,
        suggestions: list[str] | None = None,
        details: dict | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.suggestions = list(suggestions or [])
        self.details = dict(details or {})
        self.retry_after = retry_after

    @property
    def exit_code(self) -> int:
        return self.exit_status

    def to_dict(self) -> dict:
        err: dict = {"code": self.code, "message": self.message}
        if self.suggestions:
            err["suggestions"] = self.suggestions
        if self.retry_after is not None:
            err["retry_after"] = self.retry_after
        if self.details:
            err["details"] = self.details
        return err


class InternalError(GsdError):
    """Anything no other class names; the edge's answer to an unexpected exception."""


# -- usage (2) ---------------------------------------------------------------------------------------
class UsageError(GsdError):
    code, exit_status = "USAGE_ERROR", 2


class BlockedUrl(GsdError):
    code, exit_status = "BLOCKED_URL", 2


# -- configuration (3) ---------------------------------------------------------------------------------
class MissingApiKey(GsdError):
    code, exit_status = "MISSING_API_KEY", 3


class InvalidApiKey(GsdError):
    code, exit_status = "INVALID_API_KEY", 3


class EnvironmentMissing(GsdError):
    code, exit_status = "ENVIRONMENT_MISSING", 3


# -- not found (4) -------------------------------------------------------------------------------------
class NotFound(GsdError):
    code, exit_status = "NOT_FOUND", 4


class LibraryNotFound(NotFound):
    code = "LIBRARY_NOT_FOUND"


class JobNotFound(NotFound):
    code = "JOB_NOT_FOUND"


class RepositoryNotFound(NotFound):
    code = "REPOSITORY_NOT_FOUND"


class DocumentNotFound(NotFound):
    code = "DOCUMENT_NOT_FOUND"


# -- providers (5) -------------------------------------------------------------------------------------
class ProviderError(GsdError):
    code, exit_status = "UPSTREAM_ERROR", 5


class RateLimited(ProviderError):
    code = "RATE_LIMITED"


class NetworkError(ProviderError):
    code = "NETWORK_ERROR"


class QuotaExceeded(ProviderError):
    code = "QUOTA_EXCEEDED"


class AccessDenied(GsdError):
    code, exit_status = "ACCESS_DENIED", 5


class NoBackend(GsdError):
    """No model backend can serve this call (unconfigured, unreachable, no such capability)."""

    code, exit_status = "NO_BACKEND", 5


class LibraryNotReady(GsdError):
    code, exit_status = "LIBRARY_NOT_READY", 5


class JobFailed(GsdError):
    """jobs wait/result: the job failed for good (cause in the message and details)."""

    code, exit_status = "JOB_FAILED", 5


# -- time (6) ------------------------------------------------------------------------------------------
class TimeoutError_(GsdError):  # noqa: N801 - the builtin TimeoutError is another thing
    code, exit_status = "TIMEOUT", 6


class JobRunning(GsdError):
    """jobs wait: still running, wait again."""

    code, exit_status = "JOB_RUNNING", 6


# -- everything else (1) -------------------------------------------------------------------------------
class JobCancelled(GsdError):
    code = "JOB_CANCELLED"


class ExtractionFailed(GsdError):
    code = "EXTRACTION_FAILED"


class ReportFailed(GsdError):
    code = "REPORT_FAILED"


class BudgetExceeded(GsdError):
    code = "BUDGET_EXCEEDED"


class StateNotWritable(GsdError):
    code = "STATE_NOT_WRITABLE"


class StateUnsafe(GsdError):
    code = "STATE_UNSAFE"


class Locked(GsdError):
    """Another run holds the repository's lock; run again when it has finished."""

    code = "LOCKED"


class IndexDamaged(GsdError):
    """A knowledge-base index cannot be trusted to answer (a store lost, damaged, foreign or stale); the fix
    is the index run its suggestions name."""

    code = "INDEX_DAMAGED"


class MemoryCorrupt(GsdError):
    code = "MEMORY_CORRUPT"


class CallInterrupted(GsdError):
    """A signal stopped the call; the exit status is 128 + its number (130 SIGINT, 143 SIGTERM)."""

    code, exit_status = "INTERRUPTED", 130

    def __new__(cls, signum: int, message: str, **kwargs):
        return super().__new__(cls)

    def __init__(self, signum: int, message: str, **kwargs) -> None:
        super().__init__(message, **kwargs)
        self.signum = int(signum)
        self.details.setdefault("signal", self.signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _classes(base: type[GsdError]) -> list[type[GsdError]]:
    found = []
    for sub in base.__subclasses__():
        found += [sub, *_classes(sub)]
    return found


# code -> its class and exit status, derived from the classes above (defined in this module only).
_BY_CODE: dict[str, type[GsdError]] = {GsdError.code: InternalError} | {
    c.code: c for c in _classes(GsdError) if c.__module__ == __name__ and c is not InternalError}
EXIT_CODES: dict[str, int] = {code: c.exit_status for code, c in _BY_CODE.items()}


def error_class(code: str) -> type[GsdError]:
    """The class of an envelope code (a stored job's error, read back); InternalError for one we do not know."""
    return _BY_CODE.get(code, InternalError)


def check_arguments(argv: list[str]) -> None:
    """An argument whose bytes are not UTF-8 (Python keeps them as lone surrogates) can be neither sent to a
    provider or a model nor printed back: a usage error naming which one, instead of an internal error later."""
    for number, arg in enumerate(argv, start=1):
        if any("\udc80" <= c <= "\udcff" for c in arg):
            raise UsageError(f"Argument {number} is not valid UTF-8 text",
                             suggestions=["Pass every argument as UTF-8 text (check the locale: LANG, LC_ALL)"])


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

