#!/usr/bin/env bash
# gsd-research installer: Python environment (from the pinned, hashed requirements.lock), commands on PATH,
# Claude Code agents/skills/commands/hooks, settings.json hooks + permissions (merged, backed up), optional GSD
# project wiring, then a keyless demo. settings.json is written in place (mode, owner, hard links, extended
# attributes kept) and, when it is a symlink (dotfiles), stays one: writes go to its target. A shape it cannot
# merge into is refused before anything changes; any failure rolls back every change (and the environment it
# created); one run at a time (a second waits for the first).
#
#   ./install.sh                       install (idempotent: a second run changes nothing)
#   ./install.sh --uninstall           remove exactly what was added; settings.json restored byte for byte
#   ./install.sh --gsd-project DIR     also wire the research-tools skill into DIR/.planning/config.json agent_skills
#                                      of every GSD researcher type (global:research-tools; on GSD Core with --no-claude, the plugin form global:research:research-tools)
#
# Options: --venv DIR (default ${XDG_DATA_HOME:-~/.local/share}/gsd-research/venv, or $GSD_RESEARCH_VENV)
#          --skip-venv   reuse an existing environment (GSD_RESEARCH_VENV, <repo>/.venv or the default) as is
#          --editable    install the package editable (tracks this checkout)
#          --no-demo     skip the closing doctor/docs/knowledge-base run
#          --models-from DIR  seed Chroma's default embedding model (all-MiniLM-L6-v2 ONNX files) from a local
#                        copy, for machines without internet (also $GSD_RESEARCH_MODELS_DIR, or a shared/models/chroma
#                        folder beside this checkout); with internet Chroma downloads it on first use
#          --no-claude   only the environment and the PATH links (for use as a Claude Code plugin, whose
#                        own hooks/agents/skills then apply): nothing written into ~/.claude (but the skills
#                        into ~/.claude/skills/ when --gsd-project asks for them)
# Honours HOME, XDG_DATA_HOME, CLAUDE_CONFIG_DIR (default ~/.claude) and GSD_RESEARCH_BIN_DIR (default ~/.local/bin),
# which must be absolute paths. A model it seeds is recorded and removed by --uninstall; one already there is not.
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

for var in HOME CLAUDE_CONFIG_DIR GSD_RESEARCH_BIN_DIR; do  # a relative path means another place to every program
  case "${!var:-/}" in
    /*) ;;
    *) die "$var=${!var} is a relative path, which every program would resolve against its own working directory; set an absolute path (e.g. \"\$PWD/${!var}\"), then run install.sh again" ;;
  esac
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

LOCK="$ROOT/requirements.lock"
VENV_CREATED=0
CREATED_DIRS=()  # directories this run created before the file step (the new venv and its parents)
STEP_DONE=0
undo_environment() {  # a failed install leaves nothing behind: the venv it created, the folders it made
  [ "$ACTION" = install ] && [ "$STEP_DONE" = 0 ] && [ "$VENV_CREATED" = 1 ] || return 0
  rm -rf -- "$VENV"
  local i
  for (( i=${#CREATED_DIRS[@]}-1; i>=0; i-- )); do rmdir -- "${CREATED_DIRS[$i]}" 2>/dev/null || true; done
  say "the Python environment this run created was removed"
}
trap undo_environment EXIT

if [ "$ACTION" = install ]; then
  if [ "$SKIP_VENV" = 1 ]; then
    VENV=$(find_python) || die "--skip-venv: no environment with gsd-research found (GSD_RESEARCH_VENV, $ROOT/.venv, $DEFAULT_VENV)"
    say "reusing the Python environment $VENV"
  else
    [ -f "$LOCK" ] || die "$LOCK is missing (the pinned, hashed dependency lock this checkout installs from)"
    VENV=${VENV:-$DEFAULT_VENV}
    if [ ! -x "$VENV/bin/python" ]; then
      VENV_CREATED=1
      d=$VENV
      while [ ! -e "$d" ] && [ ! -L "$d" ]; do CREATED_DIRS=("$d" "${CREATED_DIRS[@]+"${CREATED_DIRS[@]}"}"); d=$(dirname -- "$d"); done
    fi
    SPEC=("$ROOT"); [ "$EDITABLE" = 1 ] && SPEC=(-e "$ROOT")
    # The pinned lock first (every transitive version and hash: the versions the tests ran), then the
    # package itself without resolving anything again.
    if command -v uv >/dev/null 2>&1; then
      say "installing the pinned dependencies (requirements.lock) with uv into $VENV"
      [ -x "$VENV/bin/python" ] || uv venv -q "$VENV"
      uv pip install -q --python "$VENV/bin/python" --require-hashes -r "$LOCK"
      uv pip install -q --python "$VENV/bin/python" --no-deps "${SPEC[@]}"
    else
      command -v python3 >/dev/null 2>&1 || die "python3 (3.10+) is needed"
      say "installing the pinned dependencies (requirements.lock) with venv + pip into $VENV"
      [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
      PIP_USER=0 "$VENV/bin/python" -m pip install -q --disable-pip-version-check --require-hashes -r "$LOCK"
      PIP_USER=0 "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "${SPEC[@]}"
    fi
  fi
  PY="$VENV/bin/python"
else
  # The demo's knowledge-base repository, only when the knowledge base names it (researcher.yaml): no
  # knowledge-base start-up for an uninstall that has nothing of it to remove.
  if [ ${#GSD_PROJECTS[@]} -eq 0 ] && grep -qs "gsd-research-docs" "${GSD_RESEARCH_HOME:-$HOME/.gsd-research}/researcher.yaml" \
     && "$ROOT/bin/researcher" --help >/dev/null 2>&1; then
    "$ROOT/bin/researcher" repo remove gsd-research-docs >/dev/null 2>&1 || true
  fi
  PY=""
  for v in "$VENV" "$DEFAULT_VENV" "$ROOT/.venv"; do
    if [ -n "$v" ] && [ -x "$v/bin/python" ]; then PY="$v/bin/python"; break; fi
  done
  [ -n "$PY" ] || PY=$(command -v python3) || die "python3 is needed to uninstall"
fi

# Everything else (links, files, JSON merging, the manifest) is one Python program (installer/): JSON is
# parsed and written by a real parser, every change is journaled and rolled back when a later one fails, one
# run at a time. It also seeds Chroma's embedding model from a local copy (recorded, so uninstall removes it).
NEW_DIRS=""
for d in "${CREATED_DIRS[@]+"${CREATED_DIRS[@]}"}"; do [ "$d" = "$VENV" ] || NEW_DIRS+="$d"$'\n'; done
GSD_INSTALL_CREATED_DIRS="$NEW_DIRS" GSD_INSTALL_MODELS_FROM="$MODELS_FROM" "$PY" -E -s "$ROOT/installer/main.py" "$ACTION" "$ROOT" "$DATA" "$VENV" \
  "$VENV_CREATED" "$CLAUDE_FILES" "${GSD_PROJECTS[@]+"${GSD_PROJECTS[@]}"}"
STEP_DONE=1

[ "$ACTION" = install ] || exit 0

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
