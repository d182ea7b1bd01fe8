"""The composition root of a gsd-research call: options, config and the shared HTTP client."""

from __future__ import annotations

from dataclasses import dataclass, field

import click

DEFAULT_MAX_TOKENS = 2000


@dataclass
class Runtime:
    """What every command needs, built lazily so a call pays only for what it uses."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    no_cache: bool = False
    pretty: bool = False
    command: str | None = None
    private_input: bool = False  # the call sends the user's own files to a model: never into a shared cache
    _config: object = field(default=None, repr=False)
    _http: object = field(default=None, repr=False)

    def __setattr__(self, name, value):
        if name in ("pretty", "command"):  # budgets must count the document exactly as it will be printed
            from gsd_research.core import output

            output.set_pretty(value) if name == "pretty" else output.set_command(value)
        super().__setattr__(name, value)

    @property
    def config(self):
        if self._config is None:
            from gsd_research.core.config import Config

            self._config = Config()
        return self._config

    @property
    def http(self):
        if self._http is None:
            from gsd_research.core.http import HttpClient

            self._http = HttpClient(self.config, no_cache=self.no_cache)
        return self._http


pass_runtime = click.make_pass_decorator(Runtime, ensure=True)


def _override(name: str):
    def callback(ctx: click.Context, _param, value):
        if value is not None and value is not False:
            rt = ctx.ensure_object(Runtime)
            setattr(rt, name, value)
        return value

    return callback


def _session_option(name: str):
    def callback(_ctx: click.Context, _param, value):
        if value is not None and value is not False:
            from gsd_research.core import session

            session.configure(**{name: value})
        return value

    return callback


def session_options(f):
    """--session and --fresh: which research session this call belongs to (core.session)."""
    f = click.option("--fresh", is_flag=True, default=False, expose_value=False, callback=_session_option("fresh"),
                     help="Return passages in full even if this session returned them before.")(f)
    f = click.option("--session", "session_id", default=None, metavar="ID", expose_value=False,
                     callback=_session_option("session_id"),
                     help="The research session (default $GSD_RESEARCH_SESSION): passages it returned "
                          "before come back as references.")(f)
    return f


def agent_options(f):
    """The global options, accepted after the subcommand too (`docs react hooks --max-tokens 4000`)."""
    f = session_options(f)
    f = click.option("--json-pretty", "pretty", is_flag=True, default=False, expose_value=False,
                     callback=_override("pretty"), help="Pretty-print the JSON answer.")(f)
    f = click.option("--no-cache", is_flag=True, default=False, expose_value=False,
                     callback=_override("no_cache"), help="Bypass cached answers.")(f)
    f = click.option("--max-tokens", type=click.IntRange(min=100), default=None, expose_value=False,
                     callback=_override("max_tokens"), help="Token budget of the answer (default 2000).")(f)
    return f


class AgentCommand(click.Command):
    """A command that names itself in the envelope as soon as its arguments are parsed."""

    context: type = Runtime  # the call's object, which records the name (researcher's: its KbContext)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rt = ctx.ensure_object(self.context)
        rt.command = ctx.command_path.split(" ", 1)[1] if " " in ctx.command_path else self.name
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        """The command's answer, held to --max-tokens here once for every command (core.budget.settle_answer)."""
        rv = super().invoke(ctx)
        if isinstance(rv, dict) and isinstance(ctx.obj, Runtime):
            from gsd_research.core.budget import settle_answer

            settle_answer(rv, ctx.obj.max_tokens)
        return rv


def agent_command(name: str | None = None, **kwargs):
    """Declare a subcommand: global options accepted, envelope name set, Runtime passed first.
    `cls` may name an AgentCommand subclass (e.g. one with a help text built at run time)."""
    kwargs.setdefault("cls", AgentCommand)

    def decorator(f):
        f = pass_runtime(f)
        f = agent_options(f)
        return click.command(name, **kwargs)(f)

    return decorator
