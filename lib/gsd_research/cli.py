"""The gsd-research command line: a lazy click group that prints one JSON document per call."""

from __future__ import annotations

import importlib
import os
import sys

import click

from gsd_research import __version__
from gsd_research.core import edge
from gsd_research.core.errors import GsdError, reinstall_hint
from gsd_research.core.runtime import DEFAULT_MAX_TOKENS, Runtime, session_options

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
    "expand": "gsd_research.commands.expand:expand",
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
    "expand": "A passage again by its session reference, or the rest of a cut answer (metadata.next).",
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
@session_options
@click.pass_context
def cli(ctx: click.Context, max_tokens: int, no_cache: bool, pretty: bool):
    """Research tools for coding agents. Every command prints one JSON document on stdout."""
    rt = ctx.ensure_object(Runtime)
    rt.max_tokens, rt.no_cache, rt.pretty = max_tokens, no_cache, pretty


def run(group: click.Group, argv: list[str] | None, prog_name: str, known: dict) -> int:
    """Invoke `group`, print the envelope, return the exit status (errors become JSON at core.edge)."""
    from gsd_research.core.private import private_process

    argv = list(sys.argv[1:] if argv is None else argv)
    # state is 0700/0600 whoever writes it (this call, its worker, SQLite); --version and --help touch no folder
    from gsd_research.core import session

    previous_umask = private_process(close=not _informational(argv))
    try:
        session.reset()
        rt = Runtime()
        if _wants_help(argv):
            return _help(group, argv, prog_name, rt)
        return edge.run(_edge(prog_name, rt), group, argv, rt, before=lambda: _refuse_unsafe_state(argv))
    finally:
        session.reset()  # the session of this call ends with it (in-process callers make many calls)
        os.umask(previous_umask)


def _edge(prog_name: str, rt: Runtime) -> edge.Edge:
    from gsd_research.core.output import emit, failure

    return edge.Edge(prog=prog_name, name=lambda: rt.command, budget=lambda: rt.max_tokens,
                     pretty=lambda: rt.pretty, render=lambda rv: _render(rv, rt),
                     report=lambda cmd, error: emit(failure(cmd, error), rt.pretty))


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


def _render(rv, rt: Runtime) -> int:
    """Print what a command returned (a payload dict or a whole document) and give the exit status."""
    from gsd_research.core import session
    from gsd_research.core.output import document_tokens, emit, success

    if isinstance(rv, int):
        return rv
    if isinstance(rv, dict):
        doc = session.commit(rv if "success" in rv else success(rt.command or "gsd-research", rv), document_tokens)
        emit(doc, rt.pretty)
        return 0 if doc.get("success", True) else int(doc.get("exit_code", 1))
    return 0


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
    edge.leave(lambda: run(cli, argv, "gsd-research", COMMANDS))
