"""A GSD project's .planning/config.json `agent_skills`: our one short skill for its researchers, in the form
the project's GSD line resolves.

Both lines read `agent_skills[<agent type>]` as a string or a list of strings. The original
(`get-shit-done-cc`) resolves `global:<name>` to `~/.claude/skills/<name>/SKILL.md` only (the home directory's,
whatever CLAUDE_CONFIG_DIR says; `<name>` must match [A-Za-z0-9_-]+). GSD Core resolves that too, and also
`global:<plugin>:<skill>`, a Claude Code plugin's skill the agent loads by name."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from claude_settings import ShapeError, _kind, same

# the researcher agent types of both lines (GSD Core kept the names)
RESEARCHERS = ["gsd-phase-researcher", "gsd-project-researcher", "gsd-ui-researcher", "gsd-advisor-researcher",
               "gsd-ai-researcher", "gsd-domain-researcher"]
SKILL, PLUGIN = "research-tools", "research"  # skills/research-tools, the plugin's name in plugin.json
GLOBAL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def _project_line():
    """hooks/gsd_research_hooks/project_line.py, the one detector the hooks use too (stdlib only)."""
    path = Path(__file__).resolve().parents[1] / "hooks" / "gsd_research_hooks" / "project_line.py"
    spec = importlib.util.spec_from_file_location("project_line", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(project: Path) -> str:
    return _project_line().detect(str(project))


def entries(line: str, plugin_route: bool) -> list[str]:
    """The agent_skills entry for our skill: the plugin form only where GSD Core and the plugin serve it; else
    global:<name>, which both lines resolve from ~/.claude/skills/ (install.sh puts the skill there)."""
    if not GLOBAL_NAME.match(SKILL):
        raise ShapeError(f"skill name GSD cannot resolve as global:<name>: {SKILL}")
    if line == _project_line().CORE and plugin_route:
        return [f"global:{PLUGIN}:{SKILL}"]
    return [f"global:{SKILL}"]


def normalize(config) -> dict:
    """The config with `agent_skills` and our researchers' entries in canonical shape (absent stays absent)."""
    if not isinstance(config, dict):
        raise ShapeError(f"it holds {_kind(config)}, not a JSON object")
    out = dict(config)
    if "agent_skills" not in out:
        return out
    skills = out["agent_skills"]
    if skills is None or skills == [] or skills == {}:
        skills = {}
    elif not isinstance(skills, dict):
        raise ShapeError(f'"agent_skills" is {_kind(skills)}; GSD expects an object keyed by agent type')
    skills = dict(skills)
    for agent in set(RESEARCHERS) & set(skills):
        value = skills[agent]
        if value is None or value == []:
            skills[agent] = []
        elif isinstance(value, str):
            skills[agent] = [value]  # GSD reads a lone string as a one-entry list
        elif isinstance(value, list):
            skills[agent] = list(value)
        else:
            raise ShapeError(f'"agent_skills.{agent}" is {_kind(value)}; GSD expects a string or a list')
    out["agent_skills"] = skills
    return out


def wire(config: dict, ours: list[str]) -> dict:
    merged = json.loads(json.dumps(config))
    skills = merged.setdefault("agent_skills", {})
    for agent in RESEARCHERS:
        entry = skills.setdefault(agent, [])
        entry.extend(e for e in ours if e not in entry)
    return merged


def unwire(current: dict, original: dict, ours: list[str]) -> dict:
    """Normalized current config without our entries (those the user had before stay)."""
    cfg = json.loads(json.dumps(current))
    skills = cfg.get("agent_skills")
    if not isinstance(skills, dict):
        return cfg
    before = original.get("agent_skills") if isinstance(original.get("agent_skills"), dict) else {}
    for agent in RESEARCHERS:
        if isinstance(skills.get(agent), list):
            had = before.get(agent) if isinstance(before.get(agent), list) else []
            skills[agent] = [s for s in skills[agent] if s not in ours or s in had]
            if not skills[agent] and agent not in before:
                del skills[agent]
    if not skills and "agent_skills" not in original:
        del cfg["agent_skills"]
    return cfg


def restore_shapes(cleaned: dict, original_raw: dict) -> dict:
    out = json.loads(json.dumps(cleaned))
    raw = original_raw.get("agent_skills")
    if "agent_skills" in original_raw and same(out.get("agent_skills"), normalize({"agent_skills": raw})["agent_skills"]):
        out["agent_skills"] = raw
        return out
    if isinstance(raw, dict) and isinstance(out.get("agent_skills"), dict):
        for agent in RESEARCHERS:
            if isinstance(raw.get(agent), str) and same(out["agent_skills"].get(agent), [raw[agent]]):
                out["agent_skills"][agent] = raw[agent]
    return out
