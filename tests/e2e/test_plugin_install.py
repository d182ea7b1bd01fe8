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

import os
import shutil
import subprocess

import pytest

from tests.conftest import BIN, ROOT
from tests.e2e.fake_anthropic import bash, request_text, result_json, steps, tool_results
from tests.e2e.plugin_fixtures import CALLS, SLOW_MACHINE, Install, Session, build_python, install_from_clone

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
REAL_ENV = dict(os.environ)  # before any test sets HOME: where the developer's uv cache is


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


@pytest.fixture(scope="module")
def installed(claude_bin, tmp_path_factory, fake_server, uv_route) -> Install:
    return install_from_clone(claude_bin, tmp_path_factory.mktemp("plugin-install"),
                              {"CONTEXT7_API_URL": fake_server.url + "/api", **uv_route, **SLOW_MACHINE})


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
