"""The one edge of `researcher`: exceptions to exit codes, payloads to JSON or human output."""

from __future__ import annotations

import sys

import click

from gsd_research.core.errors import GsdError, check_arguments


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv or "--json-pretty" in argv


def _fail(kb, argv: list[str], error: dict, code: int) -> int:
    from gsd_research.core.output import emit, failure

    if kb.json or _wants_json(argv):
        emit(failure(kb.command or "researcher", error), kb.pretty)
    else:
        from gsd_research.researcher.render import print_error

        print_error(error)
    return code


def invoke(group: click.Group, kb, argv: list[str]) -> int:
    kb.argv = list(argv)
    try:
        check_arguments(argv)
        rv = group.main(args=argv, prog_name="researcher", standalone_mode=False, obj=kb)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else "", err=True)
        return 2
    except click.UsageError as exc:
        hint = f"researcher {kb.command} --help" if kb.command else "researcher --help"
        return _fail(kb, argv, {"code": "USAGE_ERROR", "message": exc.format_message(), "suggestions": [hint]}, 2)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        return _fail(kb, argv, {"code": "INTERRUPTED", "message": "Interrupted"}, 130)
    except GsdError as exc:
        return _fail(kb, argv, exc.to_dict(), exc.exit_code)
    except Exception as exc:  # the last line of defence: never a traceback
        return _internal(kb, argv, exc)
    except BaseException as exc:  # a Rust library's panic (pyo3's PanicException is no Exception)
        if exc.__class__.__name__ != "PanicException":
            raise
        return _internal(kb, argv, exc)
    if isinstance(rv, dict):
        _print(kb, rv)
    return 0


def _internal(kb, argv: list[str], exc: BaseException) -> int:
    from gsd_research.core.internal_errors import log_internal_error, state_error

    state = state_error(exc) if isinstance(exc, Exception) else None
    if state is not None:  # GSD_RESEARCH_HOME unwritable: the same answer as gsd-research's
        return _fail(kb, argv, state.to_dict(), state.exit_code)
    log_internal_error(exc)
    return _fail(kb, argv, {"code": "INTERNAL_ERROR",
                            "message": f"Unexpected {exc.__class__.__name__}: {str(exc)[:300]}",
                            "suggestions": ["See GSD_RESEARCH_HOME/logs/errors.log"]}, 1)


def _print(kb, payload: dict) -> None:
    from gsd_research.core.output import emit, success

    if kb.json or kb.pretty:
        emit(success(kb.command or "researcher", payload), kb.pretty)
        return
    from gsd_research.researcher.render import render

    render(kb.command or "", payload)


def stdout_isatty() -> bool:
    return sys.stdout.isatty()
