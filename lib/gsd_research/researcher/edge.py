"""`researcher`'s side of the one edge (core.edge): payloads as JSON (--json) or human output."""

from __future__ import annotations

import click

from gsd_research.core import edge
from gsd_research.core.runtime import DEFAULT_MAX_TOKENS


def _wants_json(kb, argv: list[str]) -> bool:
    return kb.json or kb.pretty or "--json" in argv or "--json-pretty" in argv


def _report(kb, argv: list[str], command: str | None, error: dict) -> None:
    from gsd_research.core.output import emit, failure

    if _wants_json(kb, argv):
        emit(failure(command or "researcher", error), kb.pretty or "--json-pretty" in argv)
    else:
        from gsd_research.researcher.render import print_error

        print_error(error)


def _budget(argv: list[str]) -> int:
    """search's --max-tokens when given (the other commands answer within the default)."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "--max-tokens" and argv[i + 1].isdigit():
            return max(100, int(argv[i + 1]))
    return DEFAULT_MAX_TOKENS


def invoke(group: click.Group, kb, argv: list[str]) -> int:
    from gsd_research.core import session

    kb.argv = list(argv)
    session.reset()
    try:
        return edge.run(edge.Edge(prog="researcher", name=lambda: kb.command, budget=lambda: _budget(argv),
                                  pretty=lambda: kb.pretty, render=lambda rv: _print(kb, rv),
                                  report=lambda cmd, error: _report(kb, argv, cmd, error)),
                        group, argv, kb)
    finally:
        session.reset()  # the session of this call ends with it (in-process callers make many calls)


def _print(kb, rv) -> int:
    """The answer, once its session has recorded what it returned (and its cursor, when cut)."""
    from gsd_research.core import session
    from gsd_research.core.output import emit, success

    if not isinstance(rv, dict):
        return 0
    if kb.json or kb.pretty:
        emit(session.commit(success(kb.command or "researcher", rv)), kb.pretty)
        return 0
    from gsd_research.researcher.render import render

    render(kb.command or "", session.commit(rv))
    return 0

