"""`python3 -I -S <root>/bootstrap SUBCOMMAND ...` (see bootstrap/cli.py). This file parses on any Python 3: on
one older than 3.7 it hands over to a newer python3.1x on PATH, or answers that one is needed (one JSON envelope
for a launcher)."""

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


def too_old(argv):
    import shutil

    for name in NEWER:
        path = shutil.which(name)
        if path and works(path):  # not a version manager's shim that cannot run it
            os.execv(path, [path, "-I", "-S"] + argv)
    message = "gsd-research needs Python 3.10 or newer (found {} at {})".format(  # noqa: UP032 - parses on 3.5
        sys.version.split()[0], sys.executable)
    if len(argv) > 2 and argv[1] in ("launch", "wait"):
        import json

        print(json.dumps({"success": False, "command": None, "error": {
            "code": "ENVIRONMENT_BUILD_FAILED", "message": message,
            "suggestions": ["Install Python 3.10 or newer (python3.1x on PATH), then run the command again",
                            "Until then continue with your other tools"]}}))
        return 3
    print(message, file=sys.stderr)
    return 1


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.version_info < (3, 7):  # noqa: UP036 - whatever python3 the system has
        return too_old([here] + argv[1:])
    sys.path[:] = [p for p in sys.path if p != here] + [os.path.dirname(here)]  # `bootstrap`, after the stdlib
    from bootstrap.cli import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
