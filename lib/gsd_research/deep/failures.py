"""What a failed attempt does to its job: retried after a backoff, or failed for good.

Failed for good: after `max_attempts`; at once for errors no retry can fix (a rejected key, a spent
budget, a usage error), for a paid submit that may have been accepted without an id (never re-sent), for a
Sonar submit answered without a usable request id (taken, so billed, but never trackable: `untracked`), for
a remote request Perplexity no longer knows (never bought again by itself), and when Perplexity asks
to wait longer than any backoff of ours (`deep.retry_backoff_max`): the error then says when to retry.
A request the provider accepted gets its ledger line when it ends without a report (`accounting`).

A blocking call's own job that fails before Perplexity gave its request an id ends at once ("ended"): the
caller gets the error now, and the same call asked again revives the job and retries at once, under the same
idempotency key (`questions.revivable`), instead of attaching to a retry scheduled minutes later.
"""

from __future__ import annotations

import time

from gsd_research.core.errors import BudgetExceeded, GsdError, InvalidApiKey, MissingApiKey, UsageError
from gsd_research.deep import accounting
from gsd_research.deep.perplexity import REMOTE_ID, BadRemoteId, RemoteGone, RemoteRunFailed, UntrackedRequest
from gsd_research.deep.research import MaybeTaken
from gsd_research.deep.settings import DeepSettings
from gsd_research.deep.store import JobStore, now_iso

PERMANENT = (UsageError, MissingApiKey, InvalidApiKey, BudgetExceeded)  # no retry fixes these
REMOTE_FIELDS = ("remoteId", "remoteApi", "submitKey", "agentSubmittedAt")


def iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d}Z"


def _too_long_a_wait(exc: GsdError, s: DeepSettings) -> float | None:
    """The provider's Retry-After when it is longer than any backoff of ours, else None."""
    after = float(exc.retry_after or 0)
    return after if after > s.retry_backoff_max else None


def _is_final(exc: GsdError, attempts: int, s: DeepSettings) -> bool:
    return (attempts >= s.max_attempts or isinstance(exc, (*PERMANENT, MaybeTaken, RemoteGone, BadRemoteId))
            or _too_long_a_wait(exc, s) is not None)


def _ended_marks(exc: GsdError) -> dict:
    """What a final failure says of the remote request: it will never answer (`remoteDone`: asking again is a new
    request), and it was taken without a usable id (`untracked`: its ledger line is named by its submit key)."""
    if isinstance(exc, UntrackedRequest):
        return {"remoteDone": True, "untracked": True}
    return {"remoteDone": True} if isinstance(exc, (RemoteRunFailed, RemoteGone)) else {}


def _ends_unaccepted(current: dict, remote_id, caller_waits: bool) -> bool:
    """A blocking call's own job that holds no request the provider accepted under an id: nothing to resume."""
    return caller_waits and current.get("mode") == "blocking" and not remote_id


def record(store: JobStore, s: DeepSettings, config, job_id: str, exc: GsdError, command: str) -> str:
    """Record a failed attempt (caller does not hold the job lock): "pending" (retried after a backoff),
    "failed" (for good), "ended" (failed now, revived by the same call asked again) or "cancelled"
    (cancelled meanwhile). `command` "deep" is a blocking caller waiting on the outcome."""
    with store.lock(job_id):
        current = store.read_status(job_id) or {}
        if current.get("status") == "cancelled":  # a submit taken without an id while the cancel ran: still paid
            if isinstance(exc, UntrackedRequest):
                accounting.record_unreported(config, job_id, {**current, **_ended_marks(exc)}, command,
                                             "untracked: its answer had no usable request id (cancelled meanwhile)")
            return "cancelled"
        attempts = int(current.get("attempts") or 0) + 1
        error = {"code": exc.code, "message": exc.message, "at": now_iso(), "attempt": attempts}
        remote_id = exc.details.get("remote_id") or current.get("remoteId")
        if remote_id and REMOTE_ID.fullmatch(str(remote_id)):  # a malformed one is never repeated
            error["remote_id"] = remote_id
        if exc.details.get("provider_message"):  # the provider's own words, fenced (core.external)
            error["provider_message"] = exc.details["provider_message"]
        after = _too_long_a_wait(exc, s)
        if after is not None:
            error["retryAfter"] = iso(time.time() + after)
            error["message"] += (f"; Perplexity asks to wait {after:.0f} s, longer than deep.retry_backoff_max "
                                 f"({s.retry_backoff_max:g} s): retry after {error['retryAfter']}")
        history = [*list(current.get("errors") or [])[-9:], error]
        final = _is_final(exc, attempts, s)
        if final or _ends_unaccepted(current, remote_id, command == "deep"):
            marks = _ended_marks(exc)
            reason = "untracked: its answer had no usable request id" if marks.get("untracked") else f"failed: {exc.code}"
            # the line first (once per ref): a process killed between the two still leaves the paid request counted
            accounting.record_unreported(config, job_id, {**current, **marks}, command, reason)
            store.finish(job_id, "failed", attempts=attempts, error=error, errors=history, **marks)
            return "failed" if final else "ended"
        wait = max(s.backoff(attempts), float(exc.retry_after or 0))
        changes = {"status": "pending", "attempts": attempts, "error": error, "errors": history,
                   "retryAt": iso(time.time() + wait),
                   "providerRetryAt": iso(time.time() + float(exc.retry_after)) if exc.retry_after else None}
        if isinstance(exc, RemoteRunFailed):  # the provider ended that run: the next try submits anew
            accounting.record_unreported(config, job_id, current, command, "ended by the provider")
            changes.update(dict.fromkeys(REMOTE_FIELDS), submissions=int(current.get("submissions") or 0) + 1)
        store.update_status(job_id, **changes)
        return "pending"
