"""A GSD project's .planning/config.json `agent_skills`: our `global:<skill>` entries for its researchers.

Today's GSD (`gsd-sdk query agent-skills <agent type>`) reads `agent_skills[<agent type>]` as a string or a
list of strings and resolves `global:<name>` to `~/.claude/skills/<name>/SKILL.md` only (the home directory's,
whatever CLAUDE_CONFIG_DIR says; `<name>` must match [A-Za-z0-9_-]+): the skills must be there."""

from __future__ import annotations

import json
import re

from claude_settings import ShapeError, _kind, same

# the agent types GSD's research workflows ask for (plan-phase, new-project / new-milestone)
RESEARCHERS = ["gsd-phase-researcher", "gsd-project-researcher"]
GLOBAL_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def entries(names: list[str]) -> list[str]:
    bad = [n for n in names if not GLOBAL_NAME.match(n)]
    if bad:
        raise ShapeError(f"skill names GSD cannot resolve as global:<name>: {', '.join(bad)}")
    return [f"global:{n}" for n in names]


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
