"""Wall time of each hook script as Claude Code runs it (hooks/run EVENT, stdin JSON), median of N runs, side by
side with a bare interpreter start (`python -I -S -c pass`, the floor), and the bin/ launcher's overhead.

    .venv/bin/python bench/hooks.py [--runs 21]

Each hook runs against a GSD_RESEARCH_HOME holding 200 deep research jobs (150 already announced, 40 running,
10 finished) so the job scan is exercised, with a config.yaml in suggest mode.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "hooks" / "run"
PY = ROOT / ".venv" / "bin" / "python"

EVENTS = {
    "session-start": {"hook_event_name": "SessionStart", "source": "startup", "session_id": "s", "cwd": "/tmp"},
    "user-prompt-submit": {"hook_event_name": "UserPromptSubmit", "prompt": "plan phase 2", "session_id": "s"},
    "pre-webfetch": {"hook_event_name": "PreToolUse", "tool_name": "WebFetch", "tool_use_id": "t",
                     "tool_input": {"url": "https://fastapi.tiangolo.com/advanced/events/", "prompt": "lifespan"}},
    "pre-context7": {"hook_event_name": "PreToolUse", "tool_name": "mcp__context7__query-docs", "agent_id": "a1",
                     "agent_type": "gsd-phase-researcher",
                     "tool_input": {"libraryId": "/vercel/next.js", "query": "middleware"}},
    "subagent-start": {"hook_event_name": "SubagentStart", "agent_id": "a1", "agent_type": "gsd-phase-researcher",
                       "session_id": "s"},
}


def make_home(root: Path) -> Path:
    home = root / "gsd-home"
    logs = home / "conversation-logs"
    announced = []
    for i in range(200):
        job = logs / f"job{i:03d}"
        job.mkdir(parents=True)
        status = "completed" if i < 150 or i >= 190 else "running"
        (job / "status.json").write_text(json.dumps({"status": status, "attempts": 1}))
        if i < 150:
            announced.append(job.name)
    (home / "hooks-state.json").write_text(json.dumps({"announced": announced}))
    (home / "config.yaml").write_text("hooks:\n  webfetch_mode: suggest\n")
    return home


def hooks_of(ref: str, dest: Path) -> Path:
    """hooks/ as of git REF, extracted into dest (to run an earlier version side by side)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "hooks"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "hooks" / "run"


def plugin_data_copy(tmp: Path) -> Path:
    """A plugin root whose only environment is its data directory's (the launcher's last lookup), that
    environment borrowing .venv's packages through a .pth: bin/gsd-research as installed from a marketplace."""
    root = tmp / "plugin"
    for part in ("bin", "hooks"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "requirements.lock", root / "requirements.lock")
    (root / "lib").symlink_to(ROOT / "lib")
    data = tmp / "data"
    env_dir = data / "envs" / "bench"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    (site / "borrow.pth").write_text(next((ROOT / ".venv").glob("lib/python3*/site-packages")).as_posix() + "\n")
    digest = hashlib.sha256((root / "requirements.lock").read_bytes()).hexdigest()
    (env_dir / ".gsd-research-ready").write_text(json.dumps({"lock_sha256": digest}))
    (data / "current").mkdir()
    (data / "current" / digest[:16]).symlink_to("../envs/bench")  # the environment of this lock
    return root / "bin" / "gsd-research"


def time_once(cmd: list[str], stdin: bytes, env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - t0


def paired_floor(cmd: list[str], stdin: bytes, env: dict, runs: int, reset=None, floor_cmd=None,
                 floor_stdin: bytes = b"") -> tuple[float, float, float]:
    """Median of the hook and of the bare interpreter (or `floor_cmd`), runs interleaved (the same load for
    both), and the hook's max."""
    floor_cmd = floor_cmd or [str(PY), "-I", "-S", "-c", "pass"]
    hook, bare = [], []
    for _ in range(runs):
        if reset:
            reset()
        hook.append(time_once(cmd, stdin, env))
        if reset:
            reset()
        bare.append(time_once(floor_cmd, floor_stdin, env))
    return statistics.median(hook) * 1000, statistics.median(bare) * 1000, max(hook) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--compare", metavar="REF", help="also run the hooks of git REF, interleaved")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = make_home(Path(tmp))
        state = (home / "hooks-state.json").read_text()
        env = dict(os.environ, GSD_RESEARCH_HOME=str(home))

        def reset():  # the 10 finished jobs are announced afresh on every run
            (home / "hooks-state.json").write_text(state)

        print(f"Claude Code hooks, median of {args.runs} runs, each interleaved with a bare interpreter start; "
              f"200 jobs in the home; python {sys.version.split()[0]}\n")
        print("| hook | median ms | max ms | bare `python -I -S -c pass` ms | ratio |")
        print("|---|---|---|---|---|")
        cases = [(event, json.dumps(payload).encode()) for event, payload in EVENTS.items()]
        cases.append(("pre-webfetch", b"not json {"))
        for event, stdin in cases:
            med, floor, worst = paired_floor([str(RUN), event], stdin, env, args.runs, reset)
            label = f"`{event}`" + (", malformed stdin" if stdin.startswith(b"not") else "")
            print(f"| {label} | {med:.1f} | {worst:.1f} | {floor:.1f} | {med / floor:.2f}× |")
        if args.compare:
            old_run = hooks_of(args.compare, Path(tmp))
            print(f"\nThis tree's hooks vs. those of `{args.compare}`, interleaved, median of {args.runs}\n")
            print(f"| hook | this tree ms | `{args.compare}` ms | ratio |")
            print("|---|---|---|---|")
            for event, stdin in cases[:4]:
                new_ms, old_ms, _ = paired_floor([str(RUN), event], stdin, env, args.runs, reset,
                                                 floor_cmd=[str(old_run), event], floor_stdin=stdin)
                print(f"| `{event}` | {new_ms:.1f} | {old_ms:.1f} | {new_ms / old_ms:.2f}× |")

        from_data = plugin_data_copy(Path(tmp))
        data_env = dict(env, GSD_RESEARCH_PLUGIN_DATA=str(Path(tmp) / "data"))
        triples = [(time_once([str(ROOT / ".venv" / "bin" / "gsd-research"), "--version"], b"", env),
                    time_once([str(ROOT / "bin" / "gsd-research"), "--version"], b"", env),
                    time_once([str(from_data), "--version"], b"", data_env)) for _ in range(args.runs)]
        direct = statistics.median(t[0] for t in triples) * 1000  # interleaved: the same machine load for all
        launched = statistics.median(t[1] for t in triples) * 1000
        data_ms = statistics.median(t[2] for t in triples) * 1000
        print("\n| launcher | median ms |")
        print("|---|---|")
        print(f"| `.venv/bin/gsd-research --version` (console script, baseline) | {direct:.1f} |")
        print(f"| `bin/gsd-research --version` (plugin launcher, checkout .venv) | {launched:.1f} "
              f"({launched - direct:+.1f} ms, {launched / direct:.2f}×) |")
        print(f"| `bin/gsd-research --version` (plugin launcher, the plugin's data environment: lock check, "
              f"lib/ link) | {data_ms:.1f} ({data_ms - direct:+.1f} ms, {data_ms / direct:.2f}×) |")


if __name__ == "__main__":
    main()
