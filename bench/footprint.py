"""The tokens the plugin adds to every session, as the real client lists them.

Runs the pinned Claude Code client (WT/.e2e, installed by tests/e2e/conftest.py) twice against the fake
Messages API on 127.0.0.1, once with `--plugin-dir <repo>` and once without, each in a fresh temporary
HOME/CLAUDE_CONFIG_DIR, and diffs the first Messages request (system prompt + tools + messages) in cl100k
tokens, split by what added each line: skill listing, commands, agent, SessionStart.

Usage: .venv/bin/python bench/footprint.py [--show]   (--show prints the added lines)
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLAUDE = ROOT / ".e2e" / "node_modules" / ".bin" / "claude"
PLUGIN = "research"  # the plugin's name: its entries are listed as research:<name>
HOME_MARK = "<HOME>"


def first_request(claude: Path, plugin: bool, env: dict | None = None) -> dict:
    """The first Messages request (the one with tools) of `claude -p hello`, the client's home path masked."""
    if str(ROOT) not in sys.path:  # the fake Messages API lives in tests/ (run as a script)
        sys.path.insert(0, str(ROOT))
    from tests.e2e.fake_anthropic import FakeAnthropic

    fake = FakeAnthropic().start()
    try:
        with tempfile.TemporaryDirectory() as home:
            (Path(home) / "project").mkdir()
            run_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                       "ANTHROPIC_API_KEY": "dummy", "DISABLE_AUTOUPDATER": "1", "HOME": home,
                       "CLAUDE_CONFIG_DIR": f"{home}/.claude", "GSD_RESEARCH_HOME": f"{home}/gsd",
                       **(env or {}), "ANTHROPIC_BASE_URL": fake.url}
            cmd = [str(claude), "-p", "hello", "--output-format", "json", "--no-session-persistence"]
            if plugin:
                cmd += ["--plugin-dir", str(ROOT)]
            proc = subprocess.run(cmd, env=run_env, cwd=f"{home}/project", capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise RuntimeError(f"claude failed ({proc.returncode}): {proc.stderr[-1000:]}")
            bodies = fake.messages()
            if not bodies:
                raise RuntimeError("the client sent no Messages request with tools")
            text = json.dumps(bodies[0]).replace(home, HOME_MARK)  # also as the project slug
            return json.loads(text.replace(re.sub(r"[^A-Za-z0-9]", "-", home), HOME_MARK))
    finally:
        fake.stop()


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def request_lines(body: dict) -> list[str]:
    """What the model reads of a request, one line a list entry: system prompt, tool definitions, messages."""
    parts = [_text(body.get("system"))]
    parts += [json.dumps(tool, indent=1, sort_keys=True) for tool in body.get("tools", [])]
    parts += [_text(m.get("content")) for m in body.get("messages", [])]
    return "\n".join(parts).splitlines()


def added_lines(with_plugin: dict, without: dict) -> list[str]:
    """Lines of the plugin run's request that the plain run's request lacks."""
    diff = difflib.ndiff(request_lines(without), request_lines(with_plugin))
    return [line[2:] for line in diff if line.startswith("+ ")]


def kind_of(line: str) -> str:
    """Which part of the plugin added a line."""
    skills = {p.parent.name for p in (ROOT / "skills").glob("*/SKILL.md")}
    commands = {p.stem for p in (ROOT / "commands").rglob("*.md")}
    agents = {p.stem for p in (ROOT / "agents").glob("*.md")}
    if line.startswith("SessionStart hook additional context:"):
        return "SessionStart"
    if line.startswith(f"- {PLUGIN}:"):
        name = line[len(f"- {PLUGIN}:"):].split(":", 1)[0]
        if name in agents:
            return "agent"
        if name in skills:
            return "skill listing"
        if name in commands:
            return "commands"
    return "other"


def cl100k():
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base")
    return lambda text: len(enc.encode(text, disallowed_special=()))


def footprint(claude: Path = CLAUDE, env: dict | None = None) -> dict:
    """Tokens per part and the total (the whole requests' difference), with the added lines."""
    count = cl100k()
    with_plugin, without = first_request(claude, True, env), first_request(claude, False, env)
    lines = added_lines(with_plugin, without)
    parts = {kind: 0 for kind in ("skill listing", "commands", "agent", "SessionStart", "other")}
    for line in lines:
        parts[kind_of(line)] += count(line + "\n")
    total = count("\n".join(request_lines(with_plugin))) - count("\n".join(request_lines(without)))
    return {"parts": parts, "total": total, "lines": lines}


def main() -> None:
    if not CLAUDE.exists():
        sys.exit(f"no Claude Code client at {CLAUDE}: run the e2e tests once (tests/e2e/conftest.py installs it)")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(ROOT.parent / "shared" / "tokenizers" / "tiktoken"))
    result = footprint()
    version = subprocess.run([str(CLAUDE), "--version"], capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()}).stdout.split()[:1]
    print(f"Claude Code {' '.join(version)}: cl100k tokens the plugin adds to the first request of a session")
    for kind, tokens in result["parts"].items():
        print(f"  {kind:<14} {tokens:>5}")
    print(f"  {'total':<14} {result['total']:>5}  (whole-request difference)")
    if "--show" in sys.argv:
        print("\n".join(result["lines"]))


if __name__ == "__main__":
    main()
