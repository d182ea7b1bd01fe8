"""Frontmatter of every skill, agent and command file (including those other capabilities add): allowed keys,
kebab-case names, description length, allowed-tools pinned to the file's own command, no name collisions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from gsd_research.cli import COMMANDS
from tests.conftest import ROOT

SKILLS = sorted((ROOT / "skills").glob("*/SKILL.md"))
AGENTS = sorted((ROOT / "agents").glob("*.md"))
COMMAND_FILES = sorted((ROOT / "commands").rglob("*.md"))
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# Claude Code's documented keys (claude-code NOTES §4): skills and commands share one system.
SKILL_KEYS = {"name", "description", "when_to_use", "argument-hint", "arguments", "disable-model-invocation",
              "user-invocable", "allowed-tools", "disallowed-tools", "model", "effort", "context", "agent",
              "background", "hooks", "paths", "shell", "metadata", "license", "compatibility"}
# Plugin agents: hooks, mcpServers and permissionMode are ignored for plugin-shipped agents, so refused here.
AGENT_KEYS = {"name", "description", "model", "effort", "maxTurns", "tools", "disallowedTools", "skills", "memory",
              "background", "isolation", "color", "when_to_use"}

# The command(s) each known skill or slash command may pre-approve: its own, nothing wider.
OWN = {
    "skills/library-docs": {"gsd-research docs"},
    "skills/deep-research": {"gsd-research deep", "gsd-research jobs", "gsd-research usage"},
    "skills/web-search": {"gsd-research search"},
    "skills/read-url": {"gsd-research fetch", "gsd-research summarize", "gsd-research analyze", "gsd-research image",
                        "gsd-research web"},
    "skills/knowledge-base": {"researcher"},
    "skills/research-memory": {"gsd-research recall", "gsd-research verify"},
    "commands/docs": {"gsd-research docs"},
    "commands/deep": {"gsd-research deep", "gsd-research jobs"},
    "commands/search": {"gsd-research search"},
    "commands/fetch": {"gsd-research fetch"},
    "commands/kb": {"researcher"},
    "commands/verify": {"gsd-research verify"},
    "commands/setup": {"python3", "gsd-research doctor"},  # python3: installer/allow_rules.py, stdlib only
    "skills/research-tools": {"gsd-research docs", "gsd-research search", "gsd-research fetch", "gsd-research web",
                              "gsd-research deep", "gsd-research jobs", "gsd-research verify", "researcher"},
}
RULE = re.compile(r"^Bash\((?P<cmd>[a-z0-9][a-z0-9 -]*?)(?::\*| \*)?\)$")


def frontmatter(path: Path) -> tuple[dict, str]:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n(.*)$", text, re.S)
    assert match, f"{path}: no YAML frontmatter block at the top"
    meta = yaml.safe_load(match.group(1))
    assert isinstance(meta, dict), f"{path}: frontmatter is not a mapping"
    return meta, match.group(2)


def key_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return f"skills/{rel.parent.name}" if rel.name == "SKILL.md" else str(rel.with_suffix(""))


def rules(meta: dict) -> list[str]:
    value = meta.get("allowed-tools", [])
    if isinstance(value, str):
        value = [v.strip() for v in re.split(r",\s*(?![^()]*\))", value) if v.strip()]
    return list(value)


def ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def test_the_expected_files_exist():
    assert (ROOT / "skills" / "library-docs" / "SKILL.md") in SKILLS
    assert (ROOT / "agents" / "research-scout.md") in AGENTS
    assert {p.stem for p in COMMAND_FILES} >= {"docs", "deep", "search", "fetch", "kb"}


@pytest.mark.parametrize("path", SKILLS, ids=ids(SKILLS))
def test_skill_frontmatter(path):
    meta, body = frontmatter(path)

    assert set(meta) <= SKILL_KEYS, f"unknown keys {set(meta) - SKILL_KEYS}"
    assert meta.get("name") == path.parent.name and KEBAB.match(meta["name"]) and len(meta["name"]) <= 64
    description = meta.get("description")
    assert isinstance(description, str) and 50 <= len(description) <= 1024
    assert len(description) + len(meta.get("when_to_use", "")) <= 1536
    assert re.search(r"\buse\b.*\bwhen\b", description, re.I | re.S) or meta.get("when_to_use"), \
        "say when to use it (trigger phrases)"
    assert len(body.splitlines()) < 500
    assert "```bash" in body, "give exact command lines"


@pytest.mark.parametrize("path", COMMAND_FILES, ids=ids(COMMAND_FILES))
def test_command_frontmatter(path):
    meta, body = frontmatter(path)

    assert set(meta) <= SKILL_KEYS, f"unknown keys {set(meta) - SKILL_KEYS}"
    assert KEBAB.match(path.stem)
    assert isinstance(meta.get("description"), str) and 20 <= len(meta["description"]) <= 1024
    assert meta.get("argument-hint"), "say what arguments it takes"
    assert "$ARGUMENTS" in body and "first action" in body.lower()


@pytest.mark.parametrize("path", SKILLS + COMMAND_FILES, ids=ids(SKILLS + COMMAND_FILES))
def test_allowed_tools_are_pinned_to_the_files_own_command(path):
    meta, _ = frontmatter(path)
    found = rules(meta)

    assert found, "pre-approve the command the file teaches"
    commands = set()
    for rule in found:
        match = RULE.match(rule)
        assert match, f"{rule!r}: only Bash(<command>:*) rules, nothing wider"
        cmd = match.group("cmd").strip()
        words = cmd.split()
        if words[0] == "gsd-research":
            assert len(words) >= 2 and words[1] in COMMANDS, f"{rule!r}: name a gsd-research subcommand"
        else:
            assert words[0] == "researcher" or cmd in OWN.get(key_of(path), ()), \
                f"{rule!r}: not a gsd-research or researcher command"
        commands.add(cmd)
    own = OWN.get(key_of(path))
    if own is not None:
        assert commands <= own, f"{commands - own} is not this file's own command"


@pytest.mark.parametrize("path", AGENTS, ids=ids(AGENTS))
def test_agent_frontmatter(path):
    meta, _ = frontmatter(path)

    assert set(meta) <= AGENT_KEYS, f"unknown or ignored keys {set(meta) - AGENT_KEYS}"
    assert meta.get("name") == path.stem and KEBAB.match(meta["name"])
    assert isinstance(meta.get("description"), str) and 50 <= len(meta["description"]) <= 1024
    tools = [t.strip() for t in str(meta.get("tools", "")).split(",")] if meta.get("tools") else []
    if tools:
        assert "Bash" in tools, "the research tools are reached through Bash"
        assert not any(t.startswith("mcp__") for t in tools), "no MCP tools: they go missing in subagents"


def test_no_two_files_claim_the_same_slash_name():
    names = [p.parent.name for p in SKILLS] + [":".join(p.relative_to(ROOT / "commands").with_suffix("").parts)
                                                for p in COMMAND_FILES]
    assert len(names) == len(set(names)), sorted(names)


def test_researcher_agent_covers_every_tool_and_gsd_output():
    _, body = frontmatter(ROOT / "agents" / "research-scout.md")

    for cmd in ("docs", "deep", "jobs", "search", "fetch", "summarize", "analyze", "web"):
        assert f"gsd-research {cmd}" in body, cmd
        assert cmd in COMMANDS
    assert "researcher search" in body
    for heading in ("Tool Selection Guide", "Token Limit Strategy", "Confidence Levels", "Verification Protocol"):
        assert heading in body
    for output in ("RESEARCH.md", "STACK.md", "FEATURES.md", "ARCHITECTURE.md", "PITFALLS.md", "SUMMARY.md",
                   "## RESEARCH COMPLETE", "## RESEARCH BLOCKED", "[VERIFIED", "[CITED", "[ASSUMED]"):
        assert output in body, output
    assert "mcp__" not in body.split("<tool_strategy>")[0]


def test_root_plugin_json_matches_the_manifest():
    manifest = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert json.loads((ROOT / "plugin.json").read_text()) == manifest
    assert KEBAB.match(manifest["name"]) and manifest["version"]
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert [p["name"] for p in market["plugins"]] == [manifest["name"]]


def test_the_checker_rejects_bad_frontmatter(tmp_path):
    """The rules above fail on a wide allowed-tools rule and on a non-kebab name (the test can fail)."""
    bad = tmp_path / "SKILL.md"
    bad.write_text("---\nname: Bad_Name\ndescription: x\nallowed-tools: Bash, Bash(gsd-research:*)\n---\nbody\n")
    meta, _ = frontmatter(bad)
    assert not KEBAB.match(meta["name"])
    assert [r for r in rules(meta) if not RULE.match(r)] == ["Bash"]
    wide = RULE.match("Bash(gsd-research:*)").group("cmd").split()
    assert len(wide) == 1  # a bare gsd-research rule is refused by the length check above


def _options_of(words: list[str]) -> set[str] | None:
    """Option names the real CLI accepts for `gsd-research <words...>` (None: not a known command)."""
    import click

    from gsd_research.cli import cli

    ctx = click.Context(cli)
    command = cli.get_command(ctx, words[0])
    if command is None:
        return None
    if isinstance(command, click.Group) and len(words) > 1:
        command = command.get_command(ctx, words[1])
    names = {"--max-tokens", "--no-cache", "--json-pretty", "--help"}
    for param in command.params:
        names.update(o for o in param.opts + param.secondary_opts if o.startswith("--"))
    return names


@pytest.mark.parametrize("path", [ROOT / "agents" / "research-scout.md", ROOT / "skills" / "library-docs" / "SKILL.md",
                                  *[p for p in COMMAND_FILES if "gsd-research" in p.read_text()]],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_command_lines_use_real_subcommands_and_options(path):
    import shlex

    text = path.read_text(encoding="utf-8")
    lines = [m for block in re.findall(r"```bash\n(.*?)```", text, re.S) for m in block.splitlines()]
    lines += re.findall(r"`(gsd-research [^`]+)`", text)
    checked = 0
    for line in lines:
        line = line.split("  #")[0].strip()
        if not line.startswith("gsd-research "):
            continue
        words = shlex.split(line.replace("<", "").replace(">", ""))
        options = _options_of(words[1:])
        assert options is not None, f"{line!r}: unknown subcommand"
        for word in words:
            if word.startswith("--"):
                assert word.split("=")[0] in options, f"{line!r}: {word} is not an option of this command"
        checked += 1
    assert checked, "no gsd-research command line found"
