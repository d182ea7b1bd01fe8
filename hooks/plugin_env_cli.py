"""The plugin's Python environment from a terminal, the launchers and the hooks (stdlib only):

    python3 plugin_env_cli.py build ROOT DATA            build it now (the fix after a failed build)
    python3 plugin_env_cli.py rebuild ROOT DATA          build it again even if it looks ready (a damaged one)
    python3 plugin_env_cli.py wait PROG ROOT DATA ARGS…   what a launcher runs while it is not ready
    python3 plugin_env_cli.py status ROOT [DATA]         one JSON line: ready, building, failed, missing, broken

ROOT is the plugin's directory (holding requirements.lock), DATA its ${CLAUDE_PLUGIN_DATA}.
This file parses on any Python 3 (the launchers run it with whatever python3 the system has): on one older
than 3.7 it hands over to a newer python3.1x on PATH, or answers that one is needed."""

import json
import os
import sys

NEWER = ("python3.13", "python3.12", "python3.11", "python3.10")


def works(path):
    import subprocess

    try:
        return subprocess.call([path, "-I", "-S", "-c", "import sys; sys.exit(sys.version_info < (3, 10))"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0
    except OSError:
        return False


def command_word(args):
    skip = False
    for arg in args:
        if skip or arg in ("--max-tokens", "--chroma-url"):
            skip = not skip
        elif not arg.startswith("-"):
            return arg
    return None


def too_old(argv):
    """Python < 3.7 (the modules need 3.7): run this with a newer Python, else say one is needed."""
    import shutil

    for name in NEWER:
        path = shutil.which(name)
        if path and works(path):  # not a version manager's shim that cannot run it
            os.execv(path, [path, "-I", "-S", "-B"] + argv)
    message = "gsd-research needs Python 3.10 or newer (found {} at {})".format(  # noqa: UP032 - parses on 3.5
        sys.version.split()[0], sys.executable)
    if len(argv) > 2 and argv[1] == "wait":
        print(json.dumps({"success": False, "command": command_word(argv[5:]), "error": {
            "code": "ENVIRONMENT_BUILD_FAILED", "message": message,
            "suggestions": ["Install Python 3.10 or newer (python3.1x on PATH), then run the command again",
                            "Until then continue with your other tools"]}}))
        return 3
    print(message, file=sys.stderr)
    return 1


def main(argv):
    sys.dont_write_bytecode = True
    if sys.version_info < (3, 7):  # noqa: UP036 - whatever python3 the system has
        return too_old(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    action, rest = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if action in ("build", "rebuild") and len(rest) == 2:
        from gsd_research_hooks.env_build import build, invalidate
        from gsd_research_hooks.plugin_env import current_link, lock_digest, plugin_status

        digest = lock_digest(rest[0])
        if action == "rebuild" and digest and os.path.isdir(current_link(rest[1], digest)):
            invalidate(current_link(rest[1], digest))  # set aside: the build below replaces it
        try:
            code = build(*rest)
        except OSError as exc:
            print(json.dumps({"success": False, "state": "failed", "error": "cannot build in {}: {}".format(rest[1], exc)}))  # noqa: UP032
            return 1
        status = plugin_status(*rest)
        print(json.dumps({"success": code == 0 and status.state == "ready", "state": status.state,
                          "venv": status.venv, **status.info}))
        return code
    if action == "wait" and len(rest) >= 3:
        from gsd_research_hooks.env_wait import wait

        return wait(rest[0], rest[1], rest[2], rest[3:])
    if action == "status" and len(rest) in (1, 2):
        from gsd_research_hooks.plugin_env import resolve

        status = resolve(rest[0], rest[1] if len(rest) == 2 else None)
        print(json.dumps({"state": status.state, "venv": status.venv, **status.info}))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
