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


def tree_of(ref: str, dest: Path) -> Path:
    """bin/, hooks/ and bootstrap/ (where it has one) as of git REF, extracted into dest (run side by side)."""
    dest.mkdir(parents=True, exist_ok=True)
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", ref], capture_output=True, text=True,
                            check=True).stdout.split()
    parts = [p for p in ("bin", "hooks", "bootstrap", "requirements.lock") if p in listed]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, *parts], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def plugin_data_copy(tree: Path, tmp: Path) -> tuple[Path, Path]:
    """A plugin root whose only environment is its data directory's (the launcher's last lookup), that
    environment borrowing .venv's packages through a .pth: bin/gsd-research as installed from a marketplace.
    Returns the launcher and the data directory."""
    root = tmp / "plugin"
    for part in ("bin", "hooks", "bootstrap"):
        if (tree / part).is_dir():
            shutil.copytree(tree / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "requirements.lock", root / "requirements.lock")
    (root / "lib").symlink_to(ROOT / "lib")
    data = tmp / "data"
    env_dir = data / "envs" / "bench"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    (site / "borrow.pth").write_text(next((ROOT / ".venv").glob("lib/python3*/site-packages")).as_posix() + "\n")
    digest = hashlib.sha256((root / "requirements.lock").read_bytes()).hexdigest()
    version = ".".join(str(v) for v in sys.version_info[:3])
    (env_dir / ".gsd-research-ready").write_text(json.dumps({
        "lock_sha256": digest, "python": os.path.realpath(env_dir / "bin" / "python"), "python_version": version}))
    (data / "current").mkdir()
    (data / "current" / digest[:16]).symlink_to("../envs/bench")  # the environment of this lock
    (data / "plugin-roots.json").write_text(json.dumps({"roots": [str(root.resolve())]}))
    for path in (data, data / "envs", data / "current"):
        path.chmod(0o700)
    return root / "bin" / "gsd-research", data


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
            old_run = tree_of(args.compare, Path(tmp) / "old") / "hooks" / "run"
            print(f"\nThis tree's hooks vs. those of `{args.compare}`, interleaved, median of {args.runs}\n")
            print(f"| hook | this tree ms | `{args.compare}` ms | ratio |")
            print("|---|---|---|---|")
            for event, stdin in cases[:4]:
                new_ms, old_ms, _ = paired_floor([str(RUN), event], stdin, env, args.runs, reset,
                                                 floor_cmd=[str(old_run), event], floor_stdin=stdin)
                print(f"| `{event}` | {new_ms:.1f} | {old_ms:.1f} | {new_ms / old_ms:.2f}× |")

        trees = [("this tree", ROOT)] + ([(f"`{args.compare}`", Path(tmp) / "old")] if args.compare else [])
        venv_env = dict(env, GSD_RESEARCH_VENV=str(ROOT / ".venv"))
        cases = [("console script (baseline)", [str(ROOT / ".venv" / "bin" / "gsd-research")], env)]
        for i, (label, tree) in enumerate(trees):
            launcher, data = plugin_data_copy(tree, Path(tmp) / f"data-route-{i}")
            cases += [(f"{label}, checkout .venv", [str(tree / "bin" / "gsd-research")], venv_env),
                      (f"{label}, plugin data environment", [str(launcher)],
                       dict(env, GSD_RESEARCH_PLUGIN_DATA=str(data)))]
        samples = [[time_once([*cmd, "--version"], b"", case_env) for _, cmd, case_env in cases]
                   for _ in range(args.runs)]  # interleaved: the same machine load for all
        medians = [statistics.median(run[i] for run in samples) * 1000 for i in range(len(cases))]
        print("\n| `gsd-research --version` | median ms | vs. console script |")
        print("|---|---|---|")
        for (label, _, _), ms in zip(cases, medians, strict=True):
            print(f"| {label} | {ms:.1f} | {ms - medians[0]:+.1f} ms ({ms / medians[0]:.2f}×) |")


if __name__ == "__main__":
    main()
