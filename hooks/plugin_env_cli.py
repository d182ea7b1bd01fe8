"""The plugin's Python environment from a terminal, the launchers and the hooks (stdlib only):

    python3 plugin_env_cli.py build ROOT DATA            build it now (the fix after a failed build)
    python3 plugin_env_cli.py wait PROG ROOT DATA ARGS…   what a launcher runs while it is not ready
    python3 plugin_env_cli.py status ROOT [DATA]         one JSON line: ready, building, failed, missing, broken

ROOT is the plugin's directory (holding requirements.lock), DATA its ${CLAUDE_PLUGIN_DATA}."""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    action, rest = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if action == "build" and len(rest) == 2:
        from gsd_research_hooks.env_build import build

        code = build(*rest)
        from gsd_research_hooks.plugin_env import plugin_status

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
