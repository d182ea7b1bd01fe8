"""Plugin install from a marketplace, with the real client: how long until gsd-research works in the first
session, and what the second session costs. Variants run side by side in one go, each in a fresh HOME on a
fresh clean clone:

    .venv/bin/python bench/plugin_install.py [--variants background-wheelhouse,background-pypi,...]

- background-*: the product. SessionStart starts the build in the background; the first gsd-research call
  waits for it (up to 90 s), then runs.
- sessionstart-wheelhouse: the alternative it was chosen over: SessionStart builds synchronously (hook timeout
  600 s), so the session starts only when the environment is ready.
- *-wheelhouse: pip installs the locked wheels from a local wheelhouse (PIP_NO_INDEX + PIP_FIND_LINKS; fetched
  once from PyPI with the lock's hashes, as in tests/e2e); *-pypi: pip downloads them from PyPI with an empty
  cache (what a user gets); *-uv: uv from PyPI with an empty cache (UV_NATIVE_TLS=1 for this machine's TLS).

Each variant runs two `claude -p` sessions against the scripted fake Messages API and the fake Context7; the
model's Bash calls are `gsd-research --version` then `gsd-research docs react ...`. Reported: the session's first
API request (the session has started: SessionStart hooks done), the first request carrying a successful
gsd-research result (time to first success), the build's own time and steps (from the plugin's state file),
all from the start of `claude -p`. The client must be installed (run the e2e tests once: .e2e/).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT
from tests.e2e.conftest import CLAUDE, CLAUDE_CODE_VERSION
from tests.e2e.fake_anthropic import result_json, steps
from tests.e2e.plugin_fixtures import CALLS, install_from_clone, locked_wheelhouse
from tests.fakes.server import make_server

SYNC_SESSION_START = {
    "type": "command", "command": "/bin/sh", "timeout": 600,
    "args": ["-c", 'python3 "$CLAUDE_PLUGIN_ROOT/bootstrap" build "$CLAUDE_PLUGIN_ROOT" '
                   '"$CLAUDE_PLUGIN_DATA" >/dev/null 2>&1; exec "$CLAUDE_PLUGIN_ROOT/hooks/run" session-start']}
VARIANTS = ("background-wheelhouse", "sessionstart-wheelhouse", "background-pypi", "background-uv")


def hooks_json(variant: str) -> str | None:
    if not variant.startswith("sessionstart"):
        return None
    spec = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    spec["hooks"]["SessionStart"][0]["hooks"] = [SYNC_SESSION_START]
    return json.dumps(spec, indent=2)


def source_env(variant: str, base: Path) -> dict:
    if variant.endswith("wheelhouse"):
        return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(locked_wheelhouse())}
    if variant.endswith("uv"):
        uv_bin = base / "uv-bin"
        uv_bin.mkdir()
        (uv_bin / "uv").symlink_to(Path(sys.executable).parent / "uv")
        return {"PATH": f"{uv_bin}:/usr/bin:/bin", "UV_NATIVE_TLS": "1", "UV_CACHE_DIR": str(base / "uv-cache")}
    return {}  # pip, PyPI, the fresh HOME's empty cache


def measure(variant: str, context7_url: str) -> dict:
    base = Path(tempfile.mkdtemp(prefix=f"bench-{variant}-"))
    try:
        inst = install_from_clone(CLAUDE, base, {"CONTEXT7_API_URL": context7_url, **source_env(variant, base)},
                                  hooks_json(variant))
        prompt = "Research React effects. " + steps(*CALLS)
        first = inst.session(prompt, "Bash(gsd-research:*)")
        built = inst.state()
        second = inst.session(prompt, "Bash(gsd-research:*)")
        rebuilt = inst.state()["finished_at"] != built["finished_at"]
        ok = [len(s.results) == 2 and all(result_json(r).get("success") for r in s.results) for s in (first, second)]
        return {"variant": variant, "ok": ok, "tool": built.get("tool"), "build_s": built.get("seconds"),
                "timings": built.get("timings"), "s1_start": first.first_request, "s1_success": first.first_success,
                "s2_start": second.first_request, "s2_success": second.first_success, "s2_rebuilt": rebuilt}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def fmt(value) -> str:
    return "—" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    if not CLAUDE.exists():
        print("the client is not installed: run `.venv/bin/python -m pytest tests/e2e -k validate` once", file=sys.stderr)
        return 2
    server = make_server()
    rows = []
    try:
        for variant in args.variants.split(","):
            rows.append(measure(variant, server.url + "/api"))
            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        server.stop()
    load = os.getloadavg()[0]
    print(f"Plugin install from a marketplace, Claude Code {CLAUDE_CODE_VERSION}, {time.strftime('%Y-%m-%d')}, "
          f"load average {load:.1f} on {os.cpu_count()} cores; seconds from the start of `claude -p`\n")
    print("| variant | build (tool) | build steps | session 1: started | session 1: first success | "
          "session 2: started | session 2: first success | session 2 rebuilt | all calls ok |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        steps_text = ", ".join(f"{k} {v}" for k, v in (r["timings"] or {}).items())
        print(f"| {r['variant']} | {fmt(r['build_s'])} ({r['tool']}) | {steps_text} | {fmt(r['s1_start'])} | "
              f"{fmt(r['s1_success'])} | {fmt(r['s2_start'])} | {fmt(r['s2_success'])} | "
              f"{'yes' if r['s2_rebuilt'] else 'no'} | {'yes' if all(r['ok']) else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
