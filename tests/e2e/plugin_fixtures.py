"""The marketplace route for end-to-end tests and benchmarks: a clean clone of the repository as the marketplace,
the plugin installed from it with the real client in a fresh HOME, sessions against the scripted fake API."""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT
from tests.e2e.conftest import E2E_DIR, client_home
from tests.e2e.fake_anthropic import FakeAnthropic, bash, request_text, result_json, tool_results

DATA_DIR = Path(".claude") / "plugins" / "data" / "research-gsd-research"
GSD_RESEARCHER = """---
name: gsd-phase-researcher
description: Researches how to implement a phase before planning (GSD-like test agent).
tools: Read, Write, Bash, Grep, Glob, WebSearch, WebFetch, mcp__context7__*
---
You are a GSD phase researcher. Use Context7 MCP tools first, else the ctx7 CLI.
"""
CALLS = (bash("gsd-research --version"), bash("gsd-research docs react 'useEffect cleanup' --max-tokens 400"))


def build_python() -> str | None:
    """The interpreter the plugin builds with here: the first python3 its hooks find (markers depend on it)."""
    return next((c for c in ("/usr/bin/python3", "/usr/local/bin/python3") if Path(c).exists()), None)


def locked_wheelhouse() -> Path:
    """The locked wheels for the build interpreter, fetched once from PyPI with the lock's hashes
    (`pip download --require-hashes`) into .e2e/wheelhouse/; RuntimeError when that is not possible."""
    lock = ROOT / "requirements.lock"
    python = build_python()
    if python is None:
        raise RuntimeError("no system python3 for the plugin to build its environment with")
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    target = E2E_DIR / "wheelhouse" / f"{hashlib.sha256(lock.read_bytes()).hexdigest()[:16]}-py{version}"
    E2E_DIR.mkdir(exist_ok=True)
    with open(E2E_DIR / ".wheelhouse.lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            pip_venv = E2E_DIR / f"pip-py{version}"
            if not (pip_venv / "bin" / "python").exists():
                subprocess.run([python, "-m", "venv", str(pip_venv)], check=True, timeout=300)
            proc = subprocess.run([str(pip_venv / "bin" / "python"), "-m", "pip", "download", "-q",
                                   "--require-hashes", "--only-binary=:all:", "-r", str(lock), "-d", str(target)],
                                  capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(f"could not download the locked wheels from PyPI: {proc.stderr.strip()[-300:]}")
            (target / ".complete").write_text("")
    return target


@dataclass
class Session:
    out: dict
    bodies: list[dict]
    seconds: float
    first_request: float  # seconds from start to the first Messages API request (the session has started)
    first_success: float | None  # ... to the first request carrying a successful gsd-research result
    results: list[dict] = field(default_factory=list)

    def context(self) -> str:
        return request_text(self.bodies[0])


@dataclass
class Install:
    claude: Path
    base: Path
    clone: Path
    home: Path
    env: dict

    @property
    def data(self) -> Path:
        return self.home / DATA_DIR

    def cli(self, *args: str) -> str:
        proc = subprocess.run([str(self.claude), *args], env=self.env, capture_output=True, text=True, timeout=120,
                              cwd=self.base, stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"claude {' '.join(args)}: {proc.stdout} {proc.stderr}"
        return proc.stdout

    def state(self) -> dict:
        return json.loads((self.data / "gsd-research-env.json").read_text())

    def session(self, prompt: str, *allowed: str, extra_env: dict | None = None) -> Session:
        api = FakeAnthropic().start()
        project = self.base / "project"
        project.mkdir(exist_ok=True)
        env = {**self.env, "ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "dummy", **(extra_env or {})}
        cmd = [str(self.claude), "-p", prompt, "--output-format", "json", "--no-session-persistence",
               "--debug-file", str(self.base / "debug.log")]
        if allowed:
            cmd += ["--allowedTools", *allowed]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, cwd=project, capture_output=True, text=True, timeout=900,
                                  stdin=subprocess.DEVNULL)
            seconds = time.monotonic() - t0
            arrivals = list(api.arrivals)
        finally:
            api.stop()
        assert proc.returncode == 0, f"claude failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
        bodies = [b for _, b in arrivals if b.get("tools")]
        first_success = next((t - t0 for t, b in arrivals if any(_succeeded(r) for r in tool_results(b))), None)
        main = [b for b in bodies if prompt[:20] in request_text(b)]
        return Session(json.loads(proc.stdout), bodies, seconds, arrivals[0][0] - t0 if arrivals else -1,
                       first_success, tool_results(main[-1]) if main else [])


def _succeeded(block: dict) -> bool:
    try:
        return result_json(block).get("success") is True
    except ValueError:
        return False


def install_from_clone(claude: Path, base: Path, extra_env: dict, hooks_json: str | None = None) -> Install:
    """A clean clone of the repository as the marketplace, the plugin installed from it in a fresh HOME
    (which also holds a GSD-like gsd-phase-researcher agent); `hooks_json` replaces the clone's (benchmarks)."""
    clone = base / "gsd-research"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    if hooks_json is not None:
        (clone / "hooks" / "hooks.json").write_text(hooks_json)
        subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam",
                        "variant"], check=True)
    home = base / "home"
    (home / ".claude" / "agents").mkdir(parents=True)
    (home / ".claude" / "agents" / "gsd-phase-researcher.md").write_text(GSD_RESEARCHER)  # as GSD installs it
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1", **client_home(home), **extra_env}
    inst = Install(claude, base, clone, home, env)
    assert "Successfully added marketplace: gsd-research" in inst.cli("plugin", "marketplace", "add", str(clone))
    assert "Successfully installed plugin: research@gsd-research" in inst.cli("plugin", "install",
                                                                              "research@gsd-research")
    return inst


# A loaded machine (CI beside other jobs) can take longer than the launcher's default 90 s wait for the first
# build: the tests wait longer (and the Bash tool with them) so they check the flow, not the machine's speed;
# the timings printed are the build's own. tests/test_plugin_env.py covers the ENVIRONMENT_PREPARING answer.
SLOW_MACHINE = {"GSD_RESEARCH_ENV_WAIT": "300", "BASH_DEFAULT_TIMEOUT_MS": "360000"}
