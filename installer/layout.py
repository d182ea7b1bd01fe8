"""Where install.sh puts things, from its arguments and the environment (computed once)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

action, root, data, venv, venv_created, claude_files = sys.argv[1:7]
ROOT, DATA = Path(root), Path(data)
HOME = Path(os.environ["HOME"])
CLAUDE = Path(os.environ.get("CLAUDE_CONFIG_DIR") or HOME / ".claude")
GSD_SKILLS = HOME / ".claude" / "skills"  # where GSD resolves global:<name>, whatever CLAUDE_CONFIG_DIR says
BIN_DIR = Path(os.environ.get("GSD_RESEARCH_BIN_DIR") or HOME / ".local" / "bin")
MODELS_FROM = os.environ.get("GSD_INSTALL_MODELS_FROM", "")
MANIFEST = DATA / "install-manifest.json"
JOURNAL = DATA / "install-journal.json"
SETTINGS = CLAUDE / "settings.json"
HOOK_DIR = CLAUDE / "hooks" / "gsd-research"
RUN = str(HOOK_DIR / "run")
BIN_DIR_FILE = "bin-dir"  # in HOOK_DIR: the hooks read it (gsd_research_hooks.reach)


def _unique(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        resolved = Path(p).resolve()
        if resolved not in out:  # the same project named twice (or by another path) is wired once
            out.append(resolved)
    return out


projects = _unique(sys.argv[7:])


def relative_settings() -> list[str]:
    """Variables holding a relative path: each process would resolve it against its own directory."""
    return [f"{name}={os.environ[name]}" for name in ("HOME", "CLAUDE_CONFIG_DIR", "GSD_RESEARCH_BIN_DIR")
            if os.environ.get(name) and not os.path.isabs(os.environ[name])]


def say(msg: str) -> None:
    print(f"[gsd-research] {msg}", file=sys.stderr)


def sha(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()
