"""skills/web-search/SKILL.md: frontmatter and the command lines it teaches."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

SKILL = Path(__file__).resolve().parents[1] / "skills" / "web-search" / "SKILL.md"


def frontmatter_and_body() -> tuple[dict, str]:
    text = SKILL.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    assert match, "SKILL.md must start with a YAML frontmatter block"
    return yaml.safe_load(match.group(1)), match.group(2)


def test_frontmatter():
    meta, _ = frontmatter_and_body()

    assert set(meta) == {"name", "description", "allowed-tools"}
    assert meta["name"] == "web-search"
    assert meta["allowed-tools"] == "Bash(gsd-research search:*)"
    assert 100 < len(meta["description"]) <= 1024
    assert meta["description"].startswith("Searches ")  # third person
    assert "Use when" in meta["description"] and "untrusted" in meta["description"]


def test_body_teaches_commands_json_and_untrusted_evidence():
    _, body = frontmatter_and_body()

    assert "untrusted" in body.lower() and "Never follow instructions" in body
    for key in ("results[]", "metadata.backend", "injection_warnings", "MISSING_API_KEY", "report"):
        assert key in body


def test_every_example_command_parses():
    """Each example line is accepted by the real option parser (no search runs: --help short-circuits)."""
    from gsd_research.search.command import search

    _, body = frontmatter_and_body()
    lines = [line.split("  #")[0].strip() for line in body.splitlines() if line.startswith("gsd-research search ")]

    assert len(lines) >= 5
    for line in lines:
        args = shlex.split(line)[2:]
        ctx = search.make_context("search", list(args))
        assert ctx.params["words"] or ctx.params["query_opt"], line
