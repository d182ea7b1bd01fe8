"""Entry of the gsd-research hooks: `entry.py EVENT` (what hooks/run executes).

Runs one event's module from gsd_research_hooks/ (imported alone: start-up time counts on every event),
prints at most one JSON document, and never breaks a session: malformed input, unreadable files or a bug
end in exit 0 with no output. Only `pre-webfetch` / `pre-context7` in `enforce` mode block, on purpose,
with a JSON `permissionDecision: "deny"`. Stdlib only, run under `python -I -S`, which puts neither this
directory nor site-packages on sys.path: the hooks' own package and bootstrap/ are added here from this file's
location (bootstrap/ is the plugin's, beside hooks/, or install.sh's copy beside this file).
This file parses on any Python 3 (no f-strings, no annotations): on one older than 3.7 (the modules need 3.7) a hook does nothing."""

import json
import os
import sys


def main(argv):
    if sys.version_info < (3, 7):  # noqa: UP036 - whatever python3 the system has
        return 0
    os.umask(0o077)  # hooks-state.json is private state like the rest of GSD_RESEARCH_HOME
    try:
        sys.dont_write_bytecode = True  # no __pycache__ in the plugin or ~/.claude/hooks (uninstall removes all)
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, here)  # its package (and install.sh's copy of bootstrap/)
        sys.path.append(os.path.dirname(here))  # the plugin's bootstrap/, after the stdlib: nothing shadows it
        from importlib import import_module

        from gsd_research_hooks import EVENTS
        from gsd_research_hooks.common import read_event

        name = EVENTS.get(argv[1] if len(argv) > 1 else "")
        if name is None:
            return 0
        result = import_module("gsd_research_hooks." + name).handle(read_event())
        if result:
            sys.stdout.write(json.dumps(result) + "\n")
    except Exception:  # noqa: BLE001 - a hook never breaks the session
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
