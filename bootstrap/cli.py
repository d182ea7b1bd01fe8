"""The plugin's Python environment from a terminal, the launchers and the hooks: `python3 <root>/bootstrap ...`

    build ROOT DATA            build it now (the fix after a failed build)
    rebuild ROOT DATA          build it again even if it looks ready (a damaged one)
    status ROOT [DATA]         one JSON line: ready, building, failed, missing, broken
    wait PROG ROOT DATA ARGS   run PROG once the plugin's environment is ready (or say why not)
    launch PROG ARGS           what bin/PROG runs: find, judge, then run on the environment
    run PROG VENV DATA ARGS    launch's second half, in the environment's own interpreter

ROOT is the plugin's directory (holding requirements.lock), DATA its ${CLAUDE_PLUGIN_DATA}."""

from __future__ import annotations

import os
import sys


def build(action: str, root: str, data: str) -> int:
    import json

    from bootstrap.build import build, invalidate
    from bootstrap.locate import current_link, lock_digest
    from bootstrap.verdict import plugin_status

    digest = lock_digest(root)
    if action == "rebuild" and digest and os.path.isdir(current_link(data, digest)):
        invalidate(current_link(data, digest))  # set aside: the build below replaces it
    try:
        code = build(root, data)
    except OSError as exc:
        print(json.dumps({"success": False, "state": "failed", "error": f"cannot build in {data}: {exc}"}))
        return 1
    status = plugin_status(root, data)
    print(json.dumps({"success": code == 0 and status.state == "ready", "state": status.state,
                      "venv": status.venv, **status.info}))
    return code


def main(argv: list[str]) -> int:
    action, rest = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    if action == "launch" and rest:
        from bootstrap.launch import launch

        return launch(rest[0], rest[1:])
    if action == "run" and len(rest) >= 3:
        from bootstrap.launch import run

        return run(rest[0], rest[1], rest[2], rest[3:])
    if action in ("build", "rebuild") and len(rest) == 2:
        return build(action, *rest)
    if action == "wait" and len(rest) >= 3:
        from bootstrap.launch import plugin

        return plugin(rest[0], rest[1], rest[2], rest[3:])
    if action == "status" and len(rest) in (1, 2):
        import json

        from bootstrap.verdict import resolve

        status = resolve(rest[0], rest[1] if len(rest) == 2 else None)
        print(json.dumps({"state": status.state, "venv": status.venv, **status.info}))
        return 0
    print(__doc__, file=sys.stderr)
    return 2
