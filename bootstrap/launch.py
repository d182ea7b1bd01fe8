"""The launchers' entry (bin/* exec `python3 -I -S <root>/bootstrap launch PROG ARGS...` with a system Python).

It finds the environment (locate), decides whether it is safe and ready (verdict), and only then executes that
environment's interpreter, which runs `run`: the plugin's lib/ first on sys.path, site-packages, the CLI. An
environment not ready is waited for (wait); every failure is one JSON envelope on stdout."""

from __future__ import annotations

import os
import sys

from bootstrap.locate import (
    choose,
    entry,
    first_venv,
    fix_command,
    install_command,
    plugin_root,
    python_of,
    register,
)
from bootstrap.verdict import EXIT, Status, envelope, plugin_status, venv_status

MODULES = {"gsd-research": "gsd_research.cli", "researcher": "gsd_research.researcher.cli"}
VALUE_OPTIONS = ("--max-tokens", "--chroma-url")  # top-level options that take a value
WAITED = "GSD_RESEARCH_ENV_WAITED"  # set by the wait before it runs the command: no second wait
USED_EVERY = 3600  # seconds between two touches of USED_FILE (unused environments get collected)


def command_of(args: list[str]) -> str | None:
    """The command word of a launcher's arguments: the first that is neither an option nor an option's value."""
    words = iter(args)
    for arg in words:
        if arg == "--":
            return next(words, None)
        if arg in VALUE_OPTIONS:
            next(words, None)
        elif not arg.startswith("-"):
            return arg
    return None


def answer(prog: str, args: list[str], status: Status, root: str, data: str | None) -> int:
    import json  # imports re: only on a failure (start-up time)

    doc = envelope(prog, command_of(args), status, root, data)
    print(json.dumps(doc))
    return EXIT[doc["error"]["code"]]


def exec_env(prog: str, root: str, venv: str, data: str | None, args: list[str]) -> None:
    """Run the command on `venv`, judged safe and ready: its own interpreter executes `run`."""
    venv = os.path.realpath(venv) if data else venv  # a later swap leaves this process on its own environment
    python = python_of(venv)
    os.execv(python, [python, "-I", "-S", entry(), "run", prog, venv, data or "", *args])


def launch(prog: str, args: list[str]) -> int:
    """The first environment found decides; the plugin's own is waited for while it is not ready."""
    root = plugin_root()
    venv = first_venv(root)
    if venv is None:
        return plugin(prog, root, os.environ.get("GSD_RESEARCH_PLUGIN_DATA") or None, args)
    status = venv_status(venv)
    if status.state == "ready":
        exec_env(prog, root, venv, None, args)
    return answer(prog, args, status, root, None)


def plugin(prog: str, root: str, given: str | None, args: list[str]) -> int:
    """The plugin's own environment: run on it when ready, else wait for its build (or say why not)."""
    from bootstrap.verdict import private_problem

    data, why = choose(root, given)
    if data is None and given and private_problem(given):  # as SessionStart says of it: not safe to build in
        return answer(prog, args, Status("failed", error=why, decided=True), root, given)
    if data is None:
        if not given:
            why = (f"none found (looked in $GSD_RESEARCH_VENV, {root}/.venv, ${{XDG_DATA_HOME:-~/.local/share}}/"
                   "gsd-research/venv and the plugin's data directory)")
        return answer(prog, args, Status("missing", reason=why), root, None)
    register(data, root)
    status = plugin_status(root, data)
    if status.state == "ready":
        exec_env(prog, root, status.venv, data, args)
    from bootstrap.wait import Waiter

    return Waiter(prog, root, data, args).run()


def touch_used(venv: str) -> None:
    """Record the environment's use, at most hourly (the garbage collection keeps what is used)."""
    import time

    from bootstrap.locate import USED_FILE

    used = os.path.join(venv, USED_FILE)
    try:
        if os.stat(used).st_mtime > time.time() - USED_EVERY:
            return
    except OSError:
        pass
    try:
        os.close(os.open(used, os.O_WRONLY | os.O_CREAT, 0o600))
        os.utime(used)
    except OSError:
        pass


def run(prog: str, venv: str, data: str, args: list[str]) -> int:
    """In the environment's own interpreter: the plugin's lib/ first (its detached workers too), then
    site-packages, then the CLI. A plugin environment that does not import goes back to the wait (rebuilt)."""
    root = plugin_root()
    waited = os.environ.pop(WAITED, None)
    sys.path[:] = [p for p in sys.path if p != root]  # bootstrap's folder is no package of the CLI
    if data:
        touch_used(venv)
        lib = os.path.join(root, "lib")
        sys.path.insert(0, lib)
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = lib + (os.pathsep + path if path else "")
        os.environ["GSD_RESEARCH_PLUGIN_ROOT"], os.environ["GSD_RESEARCH_PLUGIN_DATA"] = root, data
    sys.argv = [prog, *args]
    import site

    site.main()
    try:
        from importlib import import_module

        main = import_module(MODULES[prog]).main
    except ImportError as exc:
        if data and not waited:
            from bootstrap.wait import Waiter

            return Waiter(prog, root, data, args, broken=str(exc)).run()
        import json

        fix = fix_command(root, data, "rebuild") if data else install_command(root)
        print(json.dumps({"success": False, "command": command_of(args), "error": {
            "code": "ENVIRONMENT_MISSING",
            "message": f"The Python environment of {sys.executable} lacks the gsd-research package ({exc})",
            "suggestions": [fix]}}))
        return 3
    return main()
