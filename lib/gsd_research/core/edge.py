"""The one edge of both command lines (`gsd-research`, `researcher`): whatever a call raises becomes one
answer and an exit status here, and what every command shares (signals, argument checks, the bounds of an
error) is done here, so no command can miss it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

import click

from gsd_research.core.errors import CallInterrupted, GsdError, InternalError, UsageError, check_arguments

ECHO_CHARS = 400  # the least room one string of an error keeps before the budget halves it (2 chars per token above)
FLOOR_CHARS = 60  # strings are halved down to this while the answer exceeds its budget


class Terminated(KeyboardInterrupt):
    """SIGTERM (what the Bash tool sends on timeout) as an interrupt: every `except KeyboardInterrupt` that
    keeps paid work or a job's record straight handles it as it handles Ctrl-C."""


_TERMINATED: list[bool] = []  # SIGTERM reached this call (the process then leaves at once: cli.main)


def _ignore(*_):
    """A no-op handler, not SIG_IGN, which a process spawned meanwhile (the deep worker) would inherit."""


def _quiet() -> None:
    """From here SIGTERM waits: the one answer is printed whole."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _ignore)


def _on_sigterm(_signum, _frame):
    _quiet()
    _TERMINATED.append(True)
    raise Terminated()


def leave(call: Callable[[], int]) -> None:
    """A command line's `main`: run the call, flush its answer and exit with its status. After SIGTERM the
    process exits at once: a thread still blocked on a provider must not hold the answered call open."""
    import os
    import sys

    try:
        code = call()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`): no traceback, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    if _TERMINATED:
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


@dataclass
class Edge:
    """How one command line names its calls and shows their answers."""

    prog: str
    name: Callable[[], str | None]  # the command the envelope names
    report: Callable[[str | None, dict], None]  # prints a failure (JSON envelope, or a human message)
    render: Callable[[object], int]  # prints what a command returned, gives the exit status
    budget: Callable[[], int]  # --max-tokens of this call
    pretty: Callable[[], bool] = lambda: False


def run(edge: Edge, group: click.Group, argv: list[str], obj, before: Callable[[], None] | None = None) -> int:
    """Run `group` on `argv` and print its one answer; returns the exit status. SIGTERM raises Terminated
    while the command runs (a command's own handler, deep's paid work, nests inside and restores this one)."""
    main = threading.current_thread() is threading.main_thread()
    _TERMINATED.clear()
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if main else None
    try:
        ok, value = _invoke(edge, group, argv, obj, before)
        return edge.render(value) if ok else value
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)


def _invoke(edge: Edge, group: click.Group, argv: list[str], obj, before) -> tuple[bool, object]:
    try:
        check_arguments(argv)
        if before is not None:
            before()
        rv = group.main(args=argv, prog_name=edge.prog, standalone_mode=False, obj=obj)
        _quiet()
        return True, rv
    except click.exceptions.Exit as exc:
        _quiet()
        return False, exc.exit_code
    except BaseException as exc:  # the last line of defence: never a traceback
        _quiet()
        error = as_error(exc, edge)
        if error is None:
            raise
        edge.report(edge.name() or _guess_command(group, argv), fit_error(error.to_dict(), edge))
        return False, error.exit_code


def as_error(exc: BaseException, edge: Edge) -> GsdError | None:
    """The GsdError that answers for `exc`; None for a way out that is no failure (SystemExit)."""
    if isinstance(exc, CallInterrupted) and _TERMINATED:  # our Terminated, handled as the Ctrl-C it extends
        exc.signum = exc.details["signal"] = signal.SIGTERM
    if isinstance(exc, GsdError):
        return exc
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return _no_command(exc, edge)
    if isinstance(exc, click.UsageError):
        cmd = edge.name()
        return UsageError(exc.format_message(), suggestions=[f"{edge.prog} {cmd} --help" if cmd else f"{edge.prog} --help"])
    if isinstance(exc, KeyboardInterrupt | click.Abort) or _TERMINATED:  # click turns our Terminated into Abort;
        # a library mid-import turns it into its own error (numpy: ImportError): SIGTERM came, so it is that
        return CallInterrupted(signal.SIGTERM if _TERMINATED else signal.SIGINT, "Interrupted")
    if isinstance(exc, Exception) or exc.__class__.__name__ == "PanicException":  # pyo3's panic is no Exception
        return unexpected(exc)
    return None


def unexpected(exc: BaseException) -> GsdError:
    """An exception no command turned into a GsdError: state we cannot write, a refusing cache, else an
    internal error whose text (it may quote what an answer held) is fenced apart from our message."""
    from gsd_research.core.external import excerpt
    from gsd_research.core.internal_errors import cache_error, log_internal_error, path_error, state_error

    known = state_error(exc) or path_error(exc) or cache_error(exc)
    if known is not None:
        return known
    log_internal_error(exc)
    text = excerpt(str(exc)[:300])
    return InternalError(f"Unexpected {exc.__class__.__name__}",
                         suggestions=["Retry; if it persists, report it with the log under GSD_RESEARCH_HOME/logs"],
                         details={"detail": text} if text else None)


def _no_command(exc: click.exceptions.NoArgsIsHelpError, edge: Edge) -> GsdError:
    """A group called without a subcommand: its help on stderr, a usage error naming its commands."""
    ctx = exc.ctx
    click.echo(ctx.get_help() if ctx else "", err=True)
    group = ctx.command if ctx is not None else None
    names = ", ".join(sorted(group.list_commands(ctx))) if isinstance(group, click.Group) else ""
    where = ctx.command_path if ctx is not None else edge.prog
    return UsageError(f"No command given. Commands: {names}", suggestions=[f"{where} --help"])


def _guess_command(group: click.Group, argv: list[str]) -> str | None:
    names = set(group.list_commands(click.Context(group)))
    return next((arg for arg in argv if arg in names), None)


# -- bounds ---------------------------------------------------------------------------------------------
def fit_error(error: dict, edge: Edge) -> dict:
    """The error with keys scrubbed and every string clipped (an echoed argument may be 120 KB), halving the
    longest while the whole answer exceeds the call's budget."""
    from gsd_research.core.output import dumps, failure
    from gsd_research.core.secrets import scrub
    from gsd_research.core.tokens import count_tokens

    budget, pretty = edge.budget(), edge.pretty()
    limit = max(ECHO_CHARS, 2 * budget)  # our own long messages stay whole; the budget decides the rest
    error = map_strings(error, lambda s: _clip(scrub(s), limit))
    while limit > FLOOR_CHARS and count_tokens(dumps(failure(edge.name(), error), pretty) + "\n") > budget:
        limit //= 2
        error = map_strings(error, lambda s, n=limit: _clip(s, n))
    return error


def map_strings(value, fn):
    """`value` with `fn` applied to every string in it (dicts and lists walked, tuples made lists)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [map_strings(v, fn) for v in value]
    return value


def _clip(text: str, limit: int) -> str:
    """At most `limit` characters; a fenced text keeps its markers and is clipped inside them."""
    from gsd_research.core.untrusted import split_fence

    if len(text) <= limit:
        return text
    parts = split_fence(text)
    if parts is not None:
        head, inner, tail = parts
        return head + inner[: max(1, limit - len(head) - len(tail) - 1)] + "…" + tail
    return text[: limit - 1] + "…"
