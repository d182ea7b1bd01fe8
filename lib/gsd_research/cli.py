"""The gsd-research command line: a lazy click group that prints one JSON document per call."""

from __future__ import annotations

import importlib
import os
import sys

import click

from gsd_research import __version__
from gsd_research.core.errors import GsdError, check_arguments, reinstall_hint
from gsd_research.core.runtime import DEFAULT_MAX_TOKENS, Runtime

# name -> "module:attribute"; modules are imported only when their command runs (start-up time).
COMMANDS: dict[str, str] = {
    "docs": "gsd_research.docs.command:docs",
    "deep": "gsd_research.deep.command:deep",
    "jobs": "gsd_research.deep.jobs_command:jobs",
    "usage": "gsd_research.commands.usage:usage",
    "search": "gsd_research.search.command:search",
    "fetch": "gsd_research.read.command:fetch",
    "summarize": "gsd_research.read.command:summarize",
    "analyze": "gsd_research.read.command:analyze",
    "image": "gsd_research.read.command:image",
    "web": "gsd_research.read.command:web",
    "recall": "gsd_research.memory.recall_command:recall",
    "verify": "gsd_research.verify.command:verify",
    "doctor": "gsd_research.commands.doctor:doctor",
    "cache": "gsd_research.commands.housekeeping:cache",
    "config": "gsd_research.commands.housekeeping:config",
}

HELP = {
    "docs": "Library documentation from Context7 (LIB QUERY).",
    "deep": "Exhaustive research through Perplexity, blocking or as a background job.",
    "jobs": "List, inspect, wait for and cancel deep research jobs.",
    "usage": "Spend and tokens per provider and per day.",
    "search": "Web search with a cited Markdown report.",
    "fetch": "Read a URL: main content summarized, never the raw page.",
    "summarize": "Summarize a file or stdin through a cheaper model.",
    "analyze": "Answer a question about a file or stdin.",
    "image": "Describe or question an image through a vision model.",
    "web": "A grounded web answer with numbered sources (Gemini).",
    "recall": "Passages from what fetch, search and deep read before (research memory, offline).",
    "verify": "Check a research file's citations against their sources.",
    "doctor": "Which providers are configured and reachable; where state lives.",
    "cache": "HTTP cache statistics and clearing.",
    "config": "Show, set and locate the configuration.",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        target = COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith("gsd_research"):
                raise GsdError(f"The '{name}' command is not available in this installation",
                               suggestions=[reinstall_hint()]) from None
            raise
        return getattr(module, attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, HELP.get(name, "")) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _version(ctx: click.Context, _param, value):
    if not value or ctx.resilient_parsing:
        return
    from gsd_research.core.output import emit

    emit({"success": True, "command": "version", "version": __version__})
    ctx.exit(0)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--max-tokens", type=click.IntRange(min=100), default=DEFAULT_MAX_TOKENS, show_default=True,
              help="Token budget of the answer (cl100k tokens).")
@click.option("--no-cache", is_flag=True, help="Bypass cached answers (fresh request, cache refreshed).")
@click.option("--json-pretty", "pretty", is_flag=True, help="Pretty-print the JSON answer.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Print the version as JSON and exit.")
@click.pass_context
def cli(ctx: click.Context, max_tokens: int, no_cache: bool, pretty: bool):
    """Research tools for coding agents. Every command prints one JSON document on stdout."""
    rt = ctx.ensure_object(Runtime)
    rt.max_tokens, rt.no_cache, rt.pretty = max_tokens, no_cache, pretty


def _guess_command(argv: list[str]) -> str | None:
    for arg in argv:
        if arg in COMMANDS:
            return arg
    return None


def run(group: click.Group, argv: list[str] | None, prog_name: str, known: dict) -> int:
    """Invoke `group`, print the envelope, return the exit status. The one edge where errors become JSON."""
    from gsd_research.core.private import private_process

    argv = list(sys.argv[1:] if argv is None else argv)
    # state is 0700/0600 whoever writes it (this call, its worker, SQLite); --version and --help touch no folder
    previous_umask = private_process(close=not _informational(argv))
    try:
        return _run(group, argv, prog_name, known)
    except BaseException as exc:  # a Rust library's panic (pyo3's PanicException is no Exception): no traceback
        if exc.__class__.__name__ != "PanicException":
            raise
        return _unexpected(exc, Runtime(), argv)  # type: ignore[arg-type]
    finally:
        os.umask(previous_umask)


def _informational(argv: list[str]) -> bool:
    """--version or --help: answered without reading or touching any state."""
    args = argv[: argv.index("--")] if "--" in argv else argv
    return _wants_help(argv) or "--version" in args


def _refuse_unsafe_state(argv: list[str]) -> None:
    """A home or config another user controls is refused (STATE_UNSAFE) before anything reads it."""
    if not _informational(argv):
        from gsd_research.core.private import unsafe_state

        unsafe = unsafe_state()
        if unsafe is not None:
            raise unsafe


def _run(group: click.Group, argv: list[str], prog_name: str, known: dict) -> int:
    from gsd_research.core.output import emit, failure

    rt = Runtime()
    if _wants_help(argv):
        return _help(group, argv, prog_name, rt)
    try:
        _refuse_unsafe_state(argv)
        check_arguments(argv)
        rv = group.main(args=argv, prog_name=prog_name, standalone_mode=False, obj=rt)
    except click.exceptions.NoArgsIsHelpError as exc:
        return _no_command(exc, prog_name, known, rt)
    except click.UsageError as exc:
        cmd = rt.command or _guess_command(argv)
        hint = f"{prog_name} {cmd} --help" if cmd else f"{prog_name} --help"
        emit(failure(cmd, {"code": "USAGE_ERROR", "message": exc.format_message(), "suggestions": [hint]}), rt.pretty)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        emit(failure(rt.command, {"code": "INTERRUPTED", "message": "Aborted"}), rt.pretty)
        return 130
    except GsdError as exc:
        emit(failure(rt.command or _guess_command(argv), exc.to_dict()), rt.pretty)
        return exc.exit_code
    except KeyboardInterrupt:
        emit(failure(rt.command, {"code": "INTERRUPTED", "message": "Interrupted"}), rt.pretty)
        return 130
    except Exception as exc:  # the last line of defence: never a traceback
        return _unexpected(exc, rt, argv)
    return _render(rv, rt)


def _unexpected(exc: Exception, rt: Runtime, argv: list[str]) -> int:
    """An exception no command turned into a GsdError: state we cannot write, else an internal error."""
    from gsd_research.core.internal_errors import cache_error, log_internal_error, state_error
    from gsd_research.core.output import emit, failure

    state = state_error(exc) or cache_error(exc)
    if state is not None:
        emit(failure(rt.command or _guess_command(argv), state.to_dict()), rt.pretty)
        return state.exit_code
    from gsd_research.core.external import excerpt

    log_internal_error(exc)
    error = {"code": "INTERNAL_ERROR", "message": f"Unexpected {exc.__class__.__name__}",
             "suggestions": ["Retry; if it persists, report it with the log under GSD_RESEARCH_HOME/logs"]}
    if str(exc):  # it may quote what an answer held (a key, a value): fenced, apart from our message
        error["details"] = {"detail": excerpt(str(exc)[:300])}
    emit(failure(rt.command or _guess_command(argv), error), rt.pretty)
    return 1


def _render(rv, rt: Runtime) -> int:
    """Print what a command returned (a payload dict or a whole document) and give the exit status."""
    from gsd_research.core.output import emit, success

    if isinstance(rv, int):
        return rv
    if isinstance(rv, dict):
        doc = rv if "success" in rv else success(rt.command or "gsd-research", rv)
        emit(doc, rt.pretty)
        return 0 if doc.get("success", True) else int(doc.get("exit_code", 1))
    return 0


def _no_command(exc: click.exceptions.NoArgsIsHelpError, prog_name: str, known: dict, rt: Runtime) -> int:
    """A group called without a subcommand: its help on stderr, a usage error naming its commands on stdout."""
    from gsd_research.core.output import emit, failure

    click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
    sub = exc.ctx is not None and exc.ctx.parent is not None
    group = exc.ctx.command if exc.ctx is not None else None
    names = ", ".join(sorted(group.list_commands(exc.ctx) if isinstance(group, click.Group) else known))
    where = exc.ctx.command_path if sub else prog_name
    emit(failure(exc.ctx.command_path.split(" ", 1)[1] if sub else None,
                 {"code": "USAGE_ERROR", "message": f"No command given. Commands: {names}",
                  "suggestions": [f"{where} --help"]}), rt.pretty)
    return 2


def _wants_help(argv: list[str]) -> bool:
    args = argv[: argv.index("--")] if "--" in argv else argv
    return "--help" in args or "-h" in args


def _help(group: click.Group, argv: list[str], prog_name: str, rt: Runtime) -> int:
    """Help for the command named in argv: plain text on a terminal, else inside the one JSON document."""
    from gsd_research.core.output import emit

    ctx = click.Context(group, info_name=prog_name, obj=rt, **group.context_settings)
    cmd: click.Command = group
    for arg in argv:
        if arg.startswith("-") or not isinstance(cmd, click.Group):
            continue
        try:
            sub = cmd.get_command(ctx, arg)
        except GsdError:
            sub = None
        if sub is None:
            continue
        cmd, ctx = sub, click.Context(sub, info_name=arg, parent=ctx, obj=rt)
    text = cmd.get_help(ctx)
    if "--json-pretty" in argv:
        rt.pretty = True
    if sys.stdout.isatty():
        click.echo(text)
        return 0
    name = ctx.command_path.split(" ", 1)[1] if " " in ctx.command_path else "help"
    emit({"success": True, "command": name, "help": text}, rt.pretty)
    return 0


def main(argv: list[str] | None = None) -> None:
    try:
        code = run(cli, argv, "gsd-research", COMMANDS)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`| head`): no traceback, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)
