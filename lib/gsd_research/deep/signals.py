"""Signals around paid work: SIGTERM (what the Bash tool's timeout sends) raised as an exception, and
interrupts deferred while a job and its index are being written, so an interrupt always knows whether a
job exists (and says so truthfully)."""

from __future__ import annotations

import contextlib
import signal
import threading

NOTHING_SENT = "Interrupted before a job was created: nothing was sent to Perplexity, nothing was paid"


class Interrupted(BaseException):  # noqa: N818 - like KeyboardInterrupt
    """SIGTERM reached the process while it ran or waited on deep research."""


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


_FIRED: list[bool] = []  # set once SIGTERM has interrupted this process


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM raises Interrupted in the main thread while the block runs. One is enough: from then on the
    process ignores SIGTERM (by a no-op handler, not SIG_IGN, which a worker spawned meanwhile would
    inherit) until it exits, so a second one cannot kill it while it hands its job over or prints its
    answer."""
    if not _main_thread():
        yield
        return

    def handler(_signum, _frame):
        signal.signal(signal.SIGTERM, lambda *_: None)
        _FIRED.append(True)
        raise Interrupted()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        if not _FIRED:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def deferred_signals():
    """SIGTERM and SIGINT wait until the block is over (main thread only): what the block writes is
    written whole before an interrupt can report on it."""
    if not _main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
