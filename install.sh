#!/usr/bin/env bash
# gsd-research installer: Python environment, commands on PATH, Claude Code agents/skills/commands/hooks,
# settings.json hooks + permissions (merged, backed up), optional GSD project wiring, then a keyless demo.
#
#   ./install.sh                       install (idempotent: a second run changes nothing)
#   ./install.sh --uninstall           remove exactly what was added; settings.json restored byte for byte
#   ./install.sh --gsd-project DIR     also wire the skills into DIR/.planning/config.json agent_skills
#
# Options: --venv DIR (default ${XDG_DATA_HOME:-~/.local/share}/gsd-research/venv, or $GSD_RESEARCH_VENV)
#          --skip-venv   reuse an existing environment (GSD_RESEARCH_VENV, <repo>/.venv or the default) as is
#          --editable    install the package editable (tracks this checkout)
#          --no-demo     skip the closing doctor/docs/knowledge-base run
#          --models-from DIR  seed Chroma's default embedding model (all-MiniLM-L6-v2 ONNX files) from a local
#                        copy, for machines without internet (also $GSD_RESEARCH_MODELS_DIR, or a shared/models/chroma
#                        folder beside this checkout); with internet Chroma downloads it on first use
#          --no-claude   only the environment and the PATH links (for use as a Claude Code plugin, whose
#                        own hooks/agents/skills then apply): nothing written into ~/.claude
# Honours HOME, XDG_DATA_HOME, CLAUDE_CONFIG_DIR (default ~/.claude) and GSD_RESEARCH_BIN_DIR (default ~/.local/bin).
set -euo pipefail

ROOT=$(cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd -P)
DATA="${XDG_DATA_HOME:-$HOME/.local/share}/gsd-research"
DEFAULT_VENV="$DATA/venv"
VENV="${GSD_RESEARCH_VENV:-}"
ACTION=install SKIP_VENV=0 EDITABLE=0 DEMO=1 CLAUDE_FILES=1
MODELS_FROM="${GSD_RESEARCH_MODELS_DIR:-}"
GSD_PROJECTS=()

say() { printf '[gsd-research] %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --uninstall) ACTION=uninstall ;;
    --venv) [ $# -ge 2 ] || die "--venv needs a directory"; VENV=$2; shift ;;
    --venv=*) VENV=${1#--venv=} ;;
    --skip-venv|--no-deps) SKIP_VENV=1 ;;
    --editable) EDITABLE=1 ;;
    --no-demo) DEMO=0 ;;
    --no-claude) CLAUDE_FILES=0 ;;
    --models-from) [ $# -ge 2 ] || die "--models-from needs a directory"; MODELS_FROM=$2; shift ;;
    --models-from=*) MODELS_FROM=${1#--models-from=} ;;
    --gsd-project) [ $# -ge 2 ] || die "--gsd-project needs a directory"; GSD_PROJECTS+=("$2"); shift ;;
    --gsd-project=*) GSD_PROJECTS+=("${1#--gsd-project=}") ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
  shift
done

find_python() {  # an environment that can import gsd_research, in the launchers' lookup order
  local v
  for v in "$VENV" "$ROOT/.venv" "$DEFAULT_VENV"; do
    if [ -n "$v" ] && [ -x "$v/bin/python" ] && "$v/bin/python" -c 'import gsd_research' 2>/dev/null; then
      printf '%s\n' "$v"; return 0
    fi
  done
  return 1
}

VENV_CREATED=0
if [ "$ACTION" = install ]; then
  if [ "$SKIP_VENV" = 1 ]; then
    VENV=$(find_python) || die "--skip-venv: no environment with gsd-research found (GSD_RESEARCH_VENV, $ROOT/.venv, $DEFAULT_VENV)"
    say "reusing the Python environment $VENV"
  else
    VENV=${VENV:-$DEFAULT_VENV}
    [ -x "$VENV/bin/python" ] || VENV_CREATED=1
    SPEC="$ROOT"; [ "$EDITABLE" = 1 ] && SPEC="-e $ROOT"
    if command -v uv >/dev/null 2>&1; then
      say "installing with uv into $VENV"
      [ -x "$VENV/bin/python" ] || uv venv -q "$VENV"
      # shellcheck disable=SC2086
      uv pip install -q --python "$VENV/bin/python" $SPEC
    else
      command -v python3 >/dev/null 2>&1 || die "python3 (3.10+) is needed"
      say "installing with venv + pip into $VENV"
      [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
      # shellcheck disable=SC2086
      "$VENV/bin/python" -m pip install -q --disable-pip-version-check $SPEC
    fi
  fi
  PY="$VENV/bin/python"
else
  if [ ${#GSD_PROJECTS[@]} -eq 0 ] && "$ROOT/bin/researcher" --help >/dev/null 2>&1; then  # the demo's knowledge-base repository
    "$ROOT/bin/researcher" repo remove gsd-research-docs >/dev/null 2>&1 || true
  fi
  PY=""
  for v in "$VENV" "$DEFAULT_VENV" "$ROOT/.venv"; do
    if [ -n "$v" ] && [ -x "$v/bin/python" ]; then PY="$v/bin/python"; break; fi
  done
  [ -n "$PY" ] || PY=$(command -v python3) || die "python3 is needed to uninstall"
fi

# Everything else (files, symlinks, JSON merging, the manifest) is one Python program, so that JSON is
# parsed and written by a real parser and a second run is byte-for-byte a no-op.
"$PY" -I - "$ACTION" "$ROOT" "$DATA" "$VENV" "$VENV_CREATED" "$CLAUDE_FILES" "${GSD_PROJECTS[@]+"${GSD_PROJECTS[@]}"}" <<'PYEOF'
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

action, root, data, venv, venv_created, claude_files = sys.argv[1:7]
projects = [Path(p).resolve() for p in sys.argv[7:]]
ROOT, DATA = Path(root), Path(data)
HOME = Path(os.environ["HOME"])
CLAUDE = Path(os.environ.get("CLAUDE_CONFIG_DIR") or HOME / ".claude")
BIN_DIR = Path(os.environ.get("GSD_RESEARCH_BIN_DIR") or HOME / ".local" / "bin")
MANIFEST = DATA / "install-manifest.json"
SETTINGS = CLAUDE / "settings.json"
HOOK_DIR = CLAUDE / "hooks" / "gsd-research"
PERMISSIONS = ["Bash(gsd-research:*)", "Bash(researcher:*)"]
HOOK_EVENTS = [  # (event, matcher or None, hook sub-command)
    ("SessionStart", "startup|resume|clear|compact", "session-start"),
    ("UserPromptSubmit", None, "user-prompt-submit"),
    ("PreToolUse", "WebFetch", "pre-webfetch"),
    ("PreToolUse", "^mcp__(context7|plugin_context7_context7)__.*", "pre-context7"),
]
RESEARCHERS = ["gsd-phase-researcher", "gsd-project-researcher"]


def say(msg):
    print(f"[gsd-research] {msg}", file=sys.stderr)


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_if_changed(path, data: bytes):
    if path.is_file() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return True


def dump(obj):
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode()


def load_manifest():
    if MANIFEST.is_file():
        try:
            return json.loads(MANIFEST.read_text())
        except ValueError:
            say(f"ignoring an unreadable {MANIFEST}")
    return {"files": {}, "dirs": [], "links": {}, "settings": None, "projects": {}, "venv": None}


def ensure_dirs(path, manifest):
    """mkdir -p, remembering each directory this installer created."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        d.mkdir()
        manifest["dirs"].append(str(d))


def planned_files():
    """(source, destination) of everything copied into the Claude config directory."""
    pairs = [(ROOT / "hooks" / "run", HOOK_DIR / "run"),
             (ROOT / "hooks" / "gsd_research_hook.py", HOOK_DIR / "gsd_research_hook.py")]
    for agent in sorted((ROOT / "agents").glob("*.md")):
        pairs.append((agent, CLAUDE / "agents" / agent.name))
    for cmd in sorted((ROOT / "commands").glob("*.md")):
        pairs.append((cmd, CLAUDE / "commands" / "research" / cmd.name))
    for skill in sorted((ROOT / "skills").glob("*/SKILL.md")):
        for src in sorted(p for p in skill.parent.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            pairs.append((src, CLAUDE / "skills" / skill.parent.name / src.relative_to(skill.parent)))
    return pairs


def skill_names():
    return sorted(p.parent.name for p in (ROOT / "skills").glob("*/SKILL.md"))


def copy_files(manifest):
    changed = 0
    for src, dst in planned_files():
        data = src.read_bytes()
        ours = str(dst) in manifest["files"]
        if dst.exists() and not ours and dst.read_bytes() != data:
            say(f"left alone (not ours, differs): {dst}")
            continue
        ensure_dirs(dst.parent, manifest)
        if write_if_changed(dst, data):
            changed += 1
        mode = 0o755 if os.access(src, os.X_OK) else 0o644
        if (dst.stat().st_mode & 0o777) != mode:
            dst.chmod(mode)
        manifest["files"][str(dst)] = hashlib.sha256(data).hexdigest()
    return changed


def link(dst, target, manifest):
    if dst.is_symlink() and os.readlink(dst) == str(target):
        manifest["links"][str(dst)] = str(target)
        return
    if dst.exists() or dst.is_symlink():
        if str(dst) not in manifest["links"]:
            say(f"left alone (exists, not ours): {dst}")
            return
        dst.unlink()
    ensure_dirs(dst.parent, manifest)
    dst.symlink_to(target)
    manifest["links"][str(dst)] = str(target)


def hook_command(sub):
    return f'"{HOOK_DIR / "run"}" {sub}'


def is_ours(handler):
    return isinstance(handler, dict) and str(HOOK_DIR / "run") in str(handler.get("command", ""))


def merge_settings(settings):
    hooks = settings.setdefault("hooks", {})
    for event, matcher, sub in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if any(h.get("command") == hook_command(sub) for g in groups if isinstance(g, dict)
               for h in g.get("hooks", []) if isinstance(h, dict)):
            continue
        group = {"hooks": [{"type": "command", "command": hook_command(sub), "timeout": 5}]}
        if matcher:
            group = {"matcher": matcher, **group}
        groups.append(group)
    allow = settings.setdefault("permissions", {}).setdefault("allow", [])
    for rule in PERMISSIONS:
        if rule not in allow:
            allow.append(rule)
    return settings


def clean_settings(settings, original):
    """Remove our hooks and rules; drop containers that became empty and did not exist before."""
    hooks = settings.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = []
            for g in hooks[event] if isinstance(hooks[event], list) else []:
                if isinstance(g, dict) and isinstance(g.get("hooks"), list):
                    kept = [h for h in g["hooks"] if not is_ours(h)]
                    if not kept and len(kept) != len(g["hooks"]):
                        continue
                    g = {**g, "hooks": kept}
                groups.append(g)
            hooks[event] = groups
            if not groups and event not in (original.get("hooks") or {}):
                del hooks[event]
        if not hooks and "hooks" not in original:
            del settings["hooks"]
    perms = settings.get("permissions")
    if isinstance(perms, dict) and isinstance(perms.get("allow"), list):
        was = (original.get("permissions") or {}).get("allow") or []
        perms["allow"] = [r for r in perms["allow"] if r not in PERMISSIONS or r in was]
        if not perms["allow"] and "allow" not in (original.get("permissions") or {}):
            del perms["allow"]
        if not perms and "permissions" not in original:
            del settings["permissions"]
    return settings


def read_json(path, what):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        say(f"{what} {path} is not plain JSON ({exc.__class__.__name__}); left untouched")
        return None


def install_settings(manifest):
    backup = DATA / "backup" / "settings.json"
    existed = SETTINGS.is_file()
    current = read_json(SETTINGS, "settings") if existed else {}
    if current is None or not isinstance(current, dict):
        return
    merged = merge_settings(json.loads(json.dumps(current)))
    if merged == current:
        return
    if manifest["settings"] is None:  # first change: keep the user's exact bytes
        ensure_dirs(backup.parent, manifest)
        if existed:
            write_if_changed(backup, SETTINGS.read_bytes())
        manifest["settings"] = {"existed": existed, "backup": str(backup) if existed else None,
                                "mtime_ns": SETTINGS.stat().st_mtime_ns if existed else None}
    ensure_dirs(CLAUDE, manifest)
    write_if_changed(SETTINGS, dump(merged))
    say(f"registered hooks and permissions in {SETTINGS} (backup: {backup if existed else 'none, new file'})")


def uninstall_settings(manifest):
    info = manifest.get("settings")
    if not info or not SETTINGS.is_file():
        return
    current = read_json(SETTINGS, "settings")
    if not isinstance(current, dict):
        return
    backup = Path(info["backup"]) if info.get("backup") else None
    original_bytes = backup.read_bytes() if backup and backup.is_file() else None
    original = json.loads(original_bytes) if original_bytes else {}
    cleaned = clean_settings(current, original)
    if original_bytes is not None and cleaned == original:
        SETTINGS.write_bytes(original_bytes)
        if info.get("mtime_ns"):
            os.utime(SETTINGS, ns=(info["mtime_ns"], info["mtime_ns"]))
        say(f"restored {SETTINGS} exactly as it was")
    elif not info.get("existed") and cleaned == {}:
        SETTINGS.unlink()
    else:
        write_if_changed(SETTINGS, dump(cleaned))
        say(f"removed gsd-research hooks and permissions from {SETTINGS} (your later changes kept)")
    if backup and backup.is_file():
        backup.unlink()


def wire_project(project, manifest):
    cfg_path = project / ".planning" / "config.json"
    if not cfg_path.is_file():
        raise SystemExit(f"[gsd-research] error: {project} is not a GSD project (no .planning/config.json)")
    cfg = read_json(cfg_path, "GSD config")
    if not isinstance(cfg, dict):
        raise SystemExit(1)
    merged = json.loads(json.dumps(cfg))
    skills = merged.setdefault("agent_skills", {})
    for agent in RESEARCHERS:
        entry = skills.setdefault(agent, [])
        for name in skill_names():
            if f"global:{name}" not in entry:
                entry.append(f"global:{name}")
    if merged == cfg:
        return
    key = str(project)
    if key not in manifest["projects"]:
        backup = DATA / "backup" / f"gsd-config-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"
        ensure_dirs(backup.parent, manifest)
        write_if_changed(backup, cfg_path.read_bytes())
        manifest["projects"][key] = {"config": str(cfg_path), "backup": str(backup),
                                     "mtime_ns": cfg_path.stat().st_mtime_ns,
                                     "skills": [f"global:{n}" for n in skill_names()]}
    write_if_changed(cfg_path, dump(merged))
    say(f"wired {', '.join(skill_names())} into {cfg_path} agent_skills for {', '.join(RESEARCHERS)}")


def unwire_project(info):
    cfg_path, backup = Path(info["config"]), Path(info["backup"])
    if not cfg_path.is_file():
        return
    cfg = read_json(cfg_path, "GSD config")
    original_bytes = backup.read_bytes() if backup.is_file() else None
    original = json.loads(original_bytes) if original_bytes else {}
    if isinstance(cfg, dict):
        skills = cfg.get("agent_skills")
        if isinstance(skills, dict):
            before = original.get("agent_skills") or {}
            for agent in RESEARCHERS:
                if isinstance(skills.get(agent), list):
                    skills[agent] = [s for s in skills[agent] if s not in info["skills"]
                                     or s in (before.get(agent) or [])]
                    if not skills[agent] and agent not in before:
                        del skills[agent]
            if not skills and "agent_skills" not in original:
                del cfg["agent_skills"]
        if original_bytes is not None and cfg == original:
            cfg_path.write_bytes(original_bytes)
            os.utime(cfg_path, ns=(info["mtime_ns"], info["mtime_ns"]))
        else:
            write_if_changed(cfg_path, dump(cfg))
        say(f"removed gsd-research skills from {cfg_path}")
    if backup.is_file():
        backup.unlink()


def save_manifest(manifest):
    manifest["dirs"] = sorted(set(manifest["dirs"]))
    ensure_dirs(DATA, manifest)
    manifest["dirs"] = sorted(set(manifest["dirs"]))
    write_if_changed(MANIFEST, dump(manifest))


def install():
    for project in projects:
        if not (project / ".planning" / "config.json").is_file():
            raise SystemExit(f"[gsd-research] error: {project} is not a GSD project (no .planning/config.json)")
    manifest = load_manifest()
    preexisting_data = DATA.exists()
    if not preexisting_data:
        ensure_dirs(DATA, manifest)
    venv_path, default_venv = Path(venv), DATA / "venv"
    if venv_created == "1" and venv_path == default_venv:
        manifest["venv"] = str(default_venv)
    if venv_path != default_venv:
        link(default_venv, venv_path, manifest)  # hooks copied into ~/.claude find the environment here
    for name in ("gsd-research", "researcher"):
        link(BIN_DIR / name, ROOT / "bin" / name, manifest)
    if claude_files == "1":
        changed = copy_files(manifest)
        say(f"agents, skills, commands and hooks in {CLAUDE} ({changed} file(s) written)")
        install_settings(manifest)
    for project in projects:
        wire_project(project, manifest)
    save_manifest(manifest)
    if str(BIN_DIR) not in os.environ.get("PATH", "").split(os.pathsep):
        say(f"note: {BIN_DIR} is not on your PATH; add it to use gsd-research outside Claude Code")


def uninstall():
    if not MANIFEST.is_file():
        say(f"nothing to uninstall (no {MANIFEST})")
        return
    manifest = load_manifest()
    if projects:
        selected = {str(p) for p in projects}
        for key in [k for k in manifest["projects"] if k in selected]:
            unwire_project(manifest["projects"].pop(key))
        save_manifest(manifest)
        return
    for info in manifest["projects"].values():
        unwire_project(info)
    uninstall_settings(manifest)
    for path, digest in manifest["files"].items():
        p = Path(path)
        if p.is_file() and sha(p) == digest:
            p.unlink()
        elif p.exists():
            say(f"kept (changed since install): {p}")
    for path, target in manifest["links"].items():
        p = Path(path)
        if p.is_symlink() and os.readlink(p) == target:
            p.unlink()
    shutil.rmtree(DATA / "plugin-docs", ignore_errors=True)  # the demo's copy of the plugin's docs
    if manifest.get("venv") and Path(manifest["venv"]).is_dir():
        shutil.rmtree(manifest["venv"])
    MANIFEST.unlink()
    for d in sorted(manifest["dirs"], key=lambda s: s.count(os.sep), reverse=True):
        pycache = Path(d) / "__pycache__"
        if pycache.is_dir():
            shutil.rmtree(pycache, ignore_errors=True)
        backup = Path(d)
        try:
            backup.rmdir()
        except OSError:
            pass
    say("uninstalled")


install() if action == "install" else uninstall()
PYEOF

[ "$ACTION" = install ] || exit 0

# Chroma's default embedding model, from a local copy when Chroma's cache lacks it (air-gapped machines).
seed_chroma_model() {
  local dest="$HOME/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx" src="" cand f
  [ -f "$dest/model.onnx" ] && return 0
  local cands=("$MODELS_FROM")
  [ -n "$MODELS_FROM" ] || cands=("$ROOT/../shared/models/chroma")
  for cand in "${cands[@]}"; do
    for f in "$cand/all-MiniLM-L6-v2/onnx" "$cand/onnx" "$cand"; do
      if [ -f "$f/model.onnx" ] && [ -f "$f/tokenizer.json" ]; then src="$f"; break 2; fi
    done
  done
  if [ -z "$src" ]; then
    [ -n "$MODELS_FROM" ] && say "warning: no all-MiniLM-L6-v2 ONNX files (model.onnx, tokenizer.json) under $MODELS_FROM"
    return 0
  fi
  mkdir -p "$dest" && cp -p "$src"/* "$dest/" && say "seeded Chroma's embedding model from $src"
}
seed_chroma_model

[ "$DEMO" = 1 ] || exit 0

# The main job with no key, so you see it work: doctor, a keyless docs lookup (NETWORK_ERROR offline),
# and, when the knowledge base is available, indexing this plugin's own docs and searching them (offline).
GR="$ROOT/bin/gsd-research"
RS="$ROOT/bin/researcher"
export GSD_RESEARCH_VENV="$VENV"
say "demo 1/3: gsd-research doctor"
"$GR" doctor || true
say "demo 2/3: gsd-research docs react \"useState hook\" --max-tokens 300 (keyless; NETWORK_ERROR when offline)"
"$GR" docs react "useState hook" --max-tokens 300 || true
if "$RS" --help >/dev/null 2>&1; then
  DOCS="$DATA/plugin-docs"
  mkdir -p "$DOCS"
  cp -p "$ROOT/README.md" "$DOCS/" 2>/dev/null || true
  for d in skills agents; do mkdir -p "$DOCS/$d"; cp -Rp "$ROOT/$d/." "$DOCS/$d/"; done
  say "demo 3/3: researcher indexes the plugin's own docs ($DOCS) and searches them (offline)"
  "$RS" repo add gsd-research-docs "$DOCS" >/dev/null 2>&1 || true
  if "$RS" index gsd-research-docs; then
    "$RS" search "how do I look up library documentation" --repo gsd-research-docs --json || true
  else
    say "demo 3/3: indexing failed (above). Offline, Chroma cannot download its embedding model: run"
    say "  ./install.sh --models-from DIR   (DIR holds the all-MiniLM-L6-v2 ONNX files: model.onnx, tokenizer.json, ...)"
    say "  then: researcher index gsd-research-docs"
  fi
else
  say "demo 3/3: skipped (the researcher knowledge base is not available in this installation yet)"
fi
say "done: gsd-research and researcher are ready (Claude Code: restart it to load the agents, skills and hooks)"
