"""Acceptance, end to end with the real client (pinned): install gsd-research the way Claude Code users do.

A clean clone of the repository becomes the marketplace (`claude plugin marketplace add`, `claude plugin install
research@gsd-research`) in a fresh HOME with no gsd-research environment anywhere (no install.sh, no .venv, no
GSD_RESEARCH_* variables). Sessions (`claude -p` against the scripted fake Messages API) call gsd-research through
the Bash tool against the fake Context7. The plugin builds its environment from requirements.lock with uv, the
route it takes when uv is on PATH, from uv's cache, which this test fills once with the same lock (UV_CACHE_DIR +
UV_OFFLINE, set for speed), so the product's path is the normal one; the venv + pip route is tested with a small
lock in tests/test_plugin_env.py. The only other variables are longer waits for a loaded machine (SLOW_MACHINE)
and the fake servers' URLs.

Note: the clone is of the committed tree (HEAD), not of uncommitted changes."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import BIN, ROOT
from tests.e2e.conftest import E2E_DIR, client_home
from tests.e2e.fake_anthropic import FakeAnthropic, request_text, tool_results

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REAL_ENV = dict(os.environ)  # before any test sets HOME: where the developer's uv cache is
DATA_DIR = Path(".claude") / "plugins" / "data" / "research-gsd-research"
GSD_RESEARCHER = """---
name: gsd-phase-researcher
description: Researches how to implement a phase before planning (GSD-like test agent).
tools: Read, Write, Bash, Grep, Glob, WebSearch, WebFetch, mcp__context7__*
---
You are a GSD phase researcher. Use Context7 MCP tools first, else the ctx7 CLI.
"""


def bash(command: str) -> dict:
    return {"tool": "Bash", "input": {"command": command, "description": "run gsd-research"}}


def steps(*calls: dict) -> str:
    return "<<STEPS:" + json.dumps(list(calls)) + ">>"


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


@pytest.fixture(scope="session")
def uv_route(tmp_path_factory) -> dict:
    """PATH with uv on it (and nothing else of ours), and uv's cache holding the locked wheels for the build
    interpreter: filled here once, with this shell's network settings, so the plugin's build runs offline."""
    uv, python = shutil.which("uv", path=f"{BIN}:{os.environ.get('PATH', '')}"), build_python()
    if uv is None or python is None:
        pytest.skip("uv (./test.sh installs it from the lock) or a system python3 is missing")
    cache = subprocess.run([uv, "cache", "dir"], env=REAL_ENV, capture_output=True, text=True, timeout=30)
    prime = tmp_path_factory.mktemp("uv-prime") / "venv"
    subprocess.run([uv, "venv", "-q", "--python", python, str(prime)], env=REAL_ENV, check=True, timeout=120)
    filled = subprocess.run([uv, "pip", "install", "-q", "--python", str(prime / "bin" / "python"), "--require-hashes",
                             "-r", str(ROOT / "requirements.lock")], env=REAL_ENV, capture_output=True, text=True,
                            timeout=900)
    if filled.returncode != 0:
        pytest.skip(f"could not fill uv's cache with the locked wheels: {filled.stderr.strip()[-300:]}")
    shutil.rmtree(prime.parent)
    folder = tmp_path_factory.mktemp("uv-bin")
    (folder / "uv").symlink_to(uv)
    return {"PATH": f"{folder}:/usr/bin:/bin", "UV_CACHE_DIR": cache.stdout.strip(), "UV_OFFLINE": "1"}


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


def result_json(block: dict) -> dict:
    """The JSON document of a Bash result (the tool puts 'Exit code N' and stderr lines around stdout)."""
    content = block["content"]
    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    documents = [line for line in text.splitlines() if line.startswith("{")]
    if len(documents) != 1:
        raise ValueError(f"expected one JSON document in {text!r}")
    return json.loads(documents[0])


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


@pytest.fixture(scope="module")
def installed(claude_bin, tmp_path_factory, fake_server, uv_route) -> Install:
    return install_from_clone(claude_bin, tmp_path_factory.mktemp("plugin-install"),
                              {"CONTEXT7_API_URL": fake_server.url + "/api", **uv_route, **SLOW_MACHINE})


CALLS = (bash("gsd-research --version"), bash("gsd-research docs react 'useEffect cleanup' --max-tokens 400"))
ALLOWED = "Bash(gsd-research:*)"


def assert_both_calls_succeeded(session: Session) -> None:
    assert session.out["subtype"] == "success", session.out
    version, docs = (result_json(b) for b in session.results)
    assert version["success"] is True and version["command"] == "version", version
    assert docs["success"] is True and docs["metadata"]["library_id"] == "/facebook/react", docs
    assert docs["metadata"]["tokens_used"] <= 400


def test_marketplace_install_builds_on_first_use_reuses_then_rebuilds_once_after_an_update(installed, capsys):
    first = installed.session("Research React effects. " + steps(*CALLS), ALLOWED)

    assert_both_calls_succeeded(first)
    said = first.context()
    assert "SessionStart hook additional context: gsd-research is being prepared" in said
    assert "gsd-research is available" not in said
    built = installed.state()
    assert built["state"] == "ready" and built["tool"] == "uv"
    assert (installed.data / "current" / built["lock_sha256"][:16] / ".gsd-research-ready").exists()

    second = installed.session("Research React effects. " + steps(*CALLS), ALLOWED)

    assert_both_calls_succeeded(second)
    assert "SessionStart hook additional context: gsd-research is available through Bash" in second.context()
    assert installed.state()["finished_at"] == built["finished_at"]  # no rebuild
    assert len(list((installed.data / "envs").iterdir())) == 1

    # a plugin update whose lock changed (here: the lock's bytes; the digest is what counts)
    lock = installed.clone / "requirements.lock"
    lock.write_text(lock.read_text() + "# lock updated\n")
    for manifest in (installed.clone / ".claude-plugin" / "plugin.json", installed.clone / "plugin.json"):
        manifest.write_text(manifest.read_text().replace('"version": "0.1.0"', '"version": "0.1.1"'))
    subprocess.run(["git", "-C", str(installed.clone), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam",
                    "update"], check=True)
    installed.cli("plugin", "marketplace", "update", "gsd-research")
    installed.cli("plugin", "update", "research@gsd-research")

    third = installed.session("Research React effects. " + steps(*CALLS), ALLOWED)
    rebuilt = installed.state()
    fourth = installed.session("Research React effects. " + steps(*CALLS), ALLOWED)

    assert_both_calls_succeeded(third)
    said3 = third.context()
    assert "gsd-research is being prepared" in said3 and "plugin update changed" in said3, \
        (said3[said3.find("SessionStart hook"):][:300], sorted(p.name for p in (installed.data / "current").iterdir()),
         built["lock_sha256"][:16], sorted(p.name for p in installed.data.iterdir()))
    assert rebuilt["finished_at"] > built["finished_at"] and rebuilt["lock_sha256"] != built["lock_sha256"]
    assert_both_calls_succeeded(fourth)
    assert installed.state()["finished_at"] == rebuilt["finished_at"]  # rebuilt once
    assert (installed.data / "current" / rebuilt["lock_sha256"][:16] / ".gsd-research-ready").exists()
    assert (installed.data / "current" / built["lock_sha256"][:16]).exists()  # the old version's, kept a while
    assert "gsd-research is available through Bash" in fourth.context()
    with capsys.disabled():
        print(f"\n[plugin install] first session: build {built['seconds']} s (uv, warm cache), first success "
              f"{first.first_success:.1f} s after start, session {first.seconds:.1f} s; second session: first "
              f"request {second.first_request:.1f} s, first success {second.first_success:.1f} s, session "
              f"{second.seconds:.1f} s; after the update: rebuild {rebuilt['seconds']} s, first success "
              f"{third.first_success:.1f} s")


def test_gsd_phase_researcher_gets_the_subagent_start_context(installed):
    sub = steps(bash("gsd-research docs /vercel/next.js 'middleware matcher' --max-tokens 300"))
    agent = {"tool": "Agent", "input": {"subagent_type": "gsd-phase-researcher", "description": "Research phase",
                                        "prompt": "Research Next.js middleware. " + sub, "run_in_background": False}}

    session = installed.session("Plan phase 1. " + steps(agent), ALLOWED, "Agent")

    assert session.out["subtype"] == "success"
    subagent = [b for b in session.bodies if "Research Next.js middleware" in request_text(b)
                and not any(t.get("name") == "Agent" for t in b["tools"])]
    assert subagent, "the GSD-like researcher never made a request"
    text = request_text(subagent[0])
    assert "SubagentStart hook additional context: gsd-research tools run through Bash" in text
    assert 'gsd-research docs LIB "QUESTION"' in text
    docs = result_json(tool_results(subagent[-1])[0])
    assert docs["success"] is True and docs["metadata"]["library_id"] == "/vercel/next.js"
    main = request_text(session.bodies[0])
    assert "SubagentStart hook additional context" not in main  # only the researcher gets it
