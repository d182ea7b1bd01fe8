"""Claude Code settings.json: our hooks and permission rules merged in and taken out again, any valid shape."""

from __future__ import annotations

import json
import math
import re
import shlex


class ShapeError(Exception):
    """A settings value of a shape we cannot merge into without guessing; nothing is changed."""


class NotPlainJson(Exception):
    """The file is not plain JSON (comments, trailing commas, a BOM, bad bytes); left untouched."""


# Deeper nesting than any settings file needs; Python's JSON parser and writer recurse, and a file nested
# near their limit would parse and then fail to be written back (after other files were copied).
MAX_DEPTH = 200
_SURROGATE = re.compile("[\ud800-\udfff]")


PERMISSIONS = ["Bash(gsd-research:*)", "Bash(researcher:*)"]
HOOK_EVENTS = [  # (event, matcher or None, hook sub-command)
    ("SessionStart", "startup|resume|clear|compact", "session-start"),
    ("UserPromptSubmit", None, "user-prompt-submit"),
    ("PreToolUse", "WebFetch", "pre-webfetch"),
    ("PreToolUse", "^mcp__(context7|plugin_context7_context7)__.*", "pre-context7"),
    # the plugin's hooks.json matcher and the handler's pattern: one rule on both install routes
    ("SubagentStart", "^([A-Za-z0-9_.-]+:)?gsd-[a-z0-9-]+-researcher$", "subagent-start"),
    ("PreToolUse", "Bash", "pre-bash"),
]
# handler filters (`if`) as in hooks.json: the hook starts only for our commands, not every Bash call
HOOK_IFS = {"pre-bash": ("Bash(gsd-research *)", "Bash(researcher *)")}


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} overflows a float")
    return value


def parse(raw: bytes):
    """The JSON value of a settings file (an empty file is `{}`); NotPlainJson when it is not JSON,
    ShapeError when it nests deeper than MAX_DEPTH."""
    try:
        text = raw.decode("utf-8")
        if not text.strip():
            return {}
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except (UnicodeDecodeError, ValueError) as exc:
        raise NotPlainJson(f"{exc.__class__.__name__}: {str(exc)[:120]}") from None
    except RecursionError:
        raise ShapeError(f"it nests arrays or objects more than {MAX_DEPTH} levels deep") from None
    if depth(value) > MAX_DEPTH:
        raise ShapeError(f"it nests arrays or objects more than {MAX_DEPTH} levels deep")
    return value


def depth(value) -> int:
    """How deeply arrays and objects nest in `value` (counted without recursion; stops past MAX_DEPTH)."""
    deepest, stack = 0, [(value, 1)]
    while stack and deepest <= MAX_DEPTH:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def dump(obj) -> bytes:
    """JSON text as UTF-8. A lone surrogate (valid JSON as the escape `\\ud800`, not encodable as UTF-8) is
    written back as that escape, so such a value survives unchanged."""
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    return (_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n").encode()


def same(a, b) -> bool:
    """Equal as JSON values: types count (`true` is not `1`, `1` is not `1.0`), and so does key order."""
    return json.dumps(a) == json.dumps(b)


def _list_of(value, where: str, strings: bool = False) -> list:
    """A list-valued key as a list: null and empty containers are no entries; a lone string (a permission
    rule) is one entry; anything else is refused."""
    if value is None or value == {} or value == []:
        return []
    if isinstance(value, list):
        return list(value)
    if strings and isinstance(value, str):
        return [value]
    raise ShapeError(f'"{where}" is {_kind(value)}; Claude Code expects a list there')


def _object_of(value, where: str) -> dict:
    if value is None or value == [] or value == {}:
        return {}
    if isinstance(value, dict):
        return dict(value)
    raise ShapeError(f'"{where}" is {_kind(value)}; Claude Code expects an object there')


def normalize(settings) -> dict:
    """The same settings with the keys we touch in their canonical shape (keys absent stay absent)."""
    if not isinstance(settings, dict):
        raise ShapeError(f"the file holds {_kind(settings)}, not a JSON object of settings")
    out = dict(settings)
    if "hooks" in out:
        hooks = _object_of(out["hooks"], "hooks")
        for event in {e for e, _, _ in HOOK_EVENTS} & set(hooks):
            hooks[event] = _list_of(hooks[event], f"hooks.{event}")
        out["hooks"] = hooks
    if "permissions" in out:
        perms = _object_of(out["permissions"], "permissions")
        if "allow" in perms:
            perms["allow"] = _list_of(perms["allow"], "permissions.allow", strings=True)
        out["permissions"] = perms
    return out


def hook_command(run: str, sub: str) -> str:
    return f"{shlex.quote(run)} {sub}"


def _handlers(groups: list):
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            yield from (h for h in group["hooks"] if isinstance(h, dict))


def is_ours(handler, run: str) -> bool:
    command = handler.get("command") if isinstance(handler, dict) else None
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return bool(words) and words[0] == run


def merge(settings: dict, run: str) -> dict:
    """Normalized settings plus our hook registrations and permission rules (each once)."""
    merged = json.loads(json.dumps(settings))
    hooks = merged.setdefault("hooks", {})
    for event, matcher, sub in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        mine = [g for g in groups if isinstance(g, dict) and isinstance(g.get("hooks"), list) and any(
            is_ours(h, run) and h.get("command", "").split()[-1:] == [sub] for h in _handlers([g]))]
        if mine:
            for group in mine:  # an earlier install's registration gets today's matcher
                if matcher and group.get("matcher") != matcher:
                    group["matcher"] = matcher
            continue
        handler = {"type": "command", "command": hook_command(run, sub), "timeout": 5}
        group = {"hooks": [{**handler, "if": cond} for cond in HOOK_IFS[sub]] if sub in HOOK_IFS else [handler]}
        if matcher:
            group = {"matcher": matcher, **group}
        groups.append(group)
    return allow(merged)


def allow(settings: dict) -> dict:
    """Normalized settings with our permission rules added (each once): install.sh and /research:setup."""
    merged = json.loads(json.dumps(settings))
    rules = merged.setdefault("permissions", {}).setdefault("allow", [])
    rules.extend(rule for rule in PERMISSIONS if rule not in rules)
    return merged


def revoke(current: dict, original: dict) -> dict:
    """Normalized current settings without the rules `allow` added to `original` (the user's own stay)."""
    cleaned = json.loads(json.dumps(current))
    _clean_permissions(cleaned, original)
    return cleaned


def _clean_hooks(settings: dict, original: dict, run: str) -> None:
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return
    before = original.get("hooks") if isinstance(original.get("hooks"), dict) else {}
    for event in list(hooks):
        if not isinstance(hooks[event], list):
            continue
        groups = []
        for group in hooks[event]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not is_ours(h, run)]
                if not kept and group["hooks"]:
                    continue  # a group that held only our handler
                group = {**group, "hooks": kept}
            groups.append(group)
        hooks[event] = groups
        if not groups and event not in before:
            del hooks[event]
    if not hooks and "hooks" not in original:
        del settings["hooks"]


def _clean_permissions(settings: dict, original: dict) -> None:
    perms = settings.get("permissions")
    if not isinstance(perms, dict) or not isinstance(perms.get("allow"), list):
        return
    was_perms = original.get("permissions") if isinstance(original.get("permissions"), dict) else {}
    was = was_perms.get("allow") if isinstance(was_perms.get("allow"), list) else []
    perms["allow"] = [r for r in perms["allow"] if r not in PERMISSIONS or r in was]
    if not perms["allow"] and "allow" not in was_perms:
        del perms["allow"]
    if not perms and "permissions" not in original:
        del settings["permissions"]


def clean(current: dict, original: dict, run: str) -> dict:
    """Normalized current settings without our hooks and rules; containers that we created and that are
    now empty are dropped (`original` is the normalized settings from before the install)."""
    cleaned = json.loads(json.dumps(current))
    _clean_hooks(cleaned, original, run)
    _clean_permissions(cleaned, original)
    return cleaned


def restore_shapes(cleaned: dict, original_raw: dict) -> dict:
    """Where a cleaned part equals the normalized form of the user's original (`"hooks": null`, a lone
    permission string), put the original back, so the user's later edits are kept and ours leave no trace."""
    out = dict(cleaned)
    for key in ("hooks", "permissions"):
        if key in original_raw and key in out:
            try:
                unchanged = same(normalize({key: original_raw[key]})[key], out[key])
            except ShapeError:
                unchanged = False
            if unchanged:
                out[key] = original_raw[key]
    perms, was = out.get("permissions"), original_raw.get("permissions")
    if isinstance(perms, dict) and isinstance(was, dict) and isinstance(was.get("allow"), str) \
            and same(perms.get("allow"), [was["allow"]]):
        out["permissions"] = {**perms, "allow": was["allow"]}
    return out


def notes(original_raw: dict) -> list[str]:
    """What the merge rewrites in a shape Claude Code reads the same way."""
    out = []
    perms = original_raw.get("permissions")
    if isinstance(perms, dict) and isinstance(perms.get("allow"), str):
        out.append('permissions.allow was a single string; it is written as a list holding it')
    for key in ("hooks", "permissions"):
        if key in original_raw and original_raw[key] in (None, []):
            out.append(f'"{key}" was {json.dumps(original_raw[key])}; it is written as an object')
    return out
