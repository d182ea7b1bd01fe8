"""The plugin's footprint as the real client lists it (bench/footprint.py), and each skill still reachable:
its trigger phrases are in the listing the client sends, and a `Skill` call for it loads its body.

A scripted model cannot show that a real model *chooses* a skill for a phrase; these tests check what the
choice depends on: the phrase reaches the model next to the skill's name, and the client accepts the call."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
from bench.footprint import PLUGIN, first_request, footprint, request_lines

from tests.conftest import ROOT
from tests.e2e.conftest import clean_env
from tests.e2e.fake_anthropic import request_text

pytestmark = pytest.mark.e2e

MAX_SESSION_TOKENS = 800  # issue 26: what the plugin adds to every session, GSD work or not

# skill -> phrases a user or agent says that must reach the model in that skill's listing entry
TRIGGERS = {
    "deep-research": ["research X in depth", "do a deep dive on", "compare A vs B for production"],
    "knowledge-base": ["search my notes", "check our docs", "look in the knowledge base", "index this folder"],
    "library-docs": ["library API", "check the docs for X", "Context7 MCP"],
    "read-url": ["read this URL", "summarize this file", "describe this image", "WebFetch"],
    "research-memory": ["did we already read", "find the source we saw earlier", "verify the citations"],
    "research-tools": ["GSD researcher"],
    "web-search": ["search the web", "look up", "find sources for", "what is the latest on"],
}


def test_every_skill_has_a_trigger_row():
    assert set(TRIGGERS) == {p.parent.name for p in (ROOT / "skills").glob("*/SKILL.md")}


def test_the_plugin_adds_at_most_800_tokens_to_a_session(claude_bin):
    result = footprint(claude_bin, {"TIKTOKEN_CACHE_DIR": os.environ["TIKTOKEN_CACHE_DIR"]})

    print("plugin footprint (cl100k):", result["parts"], "total", result["total"])
    assert result["parts"]["skill listing"] > 0 and result["parts"]["SessionStart"] > 0  # the plugin did load
    assert result["total"] <= MAX_SESSION_TOKENS, "\n".join(result["lines"])


@pytest.fixture(scope="module")
def listing(claude_bin) -> dict[str, str]:
    """Skill name -> its entry in the listing of the first request the client sends with the plugin."""
    body = first_request(claude_bin, True, {"TIKTOKEN_CACHE_DIR": os.environ["TIKTOKEN_CACHE_DIR"]})
    entry = re.compile(rf"^- {PLUGIN}:([a-z0-9-]+): (.*)$")
    return {m.group(1): m.group(2) for m in map(entry.match, request_lines(body)) if m}


@pytest.mark.parametrize(("skill", "phrase"), [(s, p) for s, phrases in TRIGGERS.items() for p in phrases])
def test_a_trigger_phrase_reaches_the_model_in_its_skills_listing_entry(listing, skill, phrase):
    assert phrase.lower() in listing.get(skill, "").lower(), listing.get(skill)


def test_slash_commands_are_not_listed_to_the_model(listing):
    commands = {p.stem for p in (ROOT / "commands").glob("*.md")}

    assert listing and not commands & set(listing)


def _body_marker(skill: str) -> str:
    """The skill body's first heading: text only the loaded skill carries."""
    text = (ROOT / "skills" / skill / "SKILL.md").read_text(encoding="utf-8")
    return next(line for line in text.split("\n---\n", 1)[1].splitlines() if line.startswith("# "))


@pytest.mark.parametrize("skill", sorted(TRIGGERS))
def test_the_client_loads_a_skill_the_model_calls(claude_bin, fake_api, tmp_path, skill):
    call = {"tool": "Skill", "input": {"skill": f"{PLUGIN}:{skill}"}}
    project = tmp_path / "project"
    project.mkdir()

    proc = subprocess.run(
        [str(claude_bin), "-p", "Go. <<STEPS:" + json.dumps([call]) + ">>", "--plugin-dir", str(ROOT),
         "--output-format", "json", "--no-session-persistence", "--allowedTools", "Skill"],
        env=clean_env(ANTHROPIC_BASE_URL=fake_api.url), cwd=project, capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL)

    assert proc.returncode == 0, proc.stderr[-2000:]
    bodies = fake_api.messages()
    assert _body_marker(skill) not in request_text(bodies[0])
    assert _body_marker(skill) in request_text(bodies[-1])
