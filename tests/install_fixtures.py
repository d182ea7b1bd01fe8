"""Helpers for tests that run install.sh on a temporary HOME: the user's settings as they left them, the
installer as a real process, a snapshot of a tree, the checkout parts install.sh uses."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import MODEL_DIR, ROOT

INSTALL = ROOT / "install.sh"
USER_SETTINGS = """{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "/home/me/bin/guard.sh"}]}
        ]
    },
    "permissions": {"allow": ["Bash(ls:*)"], "deny": ["Read(./.env)"]},
    "statusLine": {"type": "command", "command": "echo hi"}
}
"""
GSD_CONFIG = """{
  "mode": "interactive",
  "workflow": {
    "research": true
  },
  "agent_skills": {
    "gsd-executor": ["skills/testing-standards"]
  }
}
"""
SETTINGS_REL = Path(".claude") / "settings.json"
RUN_REL = Path(".claude") / "hooks" / "gsd-research" / "run"


def install(*args: str, env: dict | None = None, script: Path = INSTALL) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("XDG_DATA_HOME", "CLAUDE_CONFIG_DIR",
                                                              "GSD_RESEARCH_VENV", "GSD_RESEARCH_BIN_DIR")}
    full.update(env or {})
    if not {"--models-from", "--uninstall"} & set(args) and "GSD_RESEARCH_MODELS_DIR" not in full:
        _model_already_there(Path(full["HOME"]))
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=full, timeout=120)


def _model_already_there(home: Path) -> None:
    """Chroma's model linked where Chroma looks, as on a machine that has it, so that a run which is not about the
    model does not copy its 90 MB from the shared/ folder beside the checkout (test_install_faults' model tests
    pass --models-from; chroma_model.source's default is test_the_model_is_found_beside_the_checkout)."""
    dest = home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
    if not (MODEL_DIR / "model.onnx").is_file() or os.path.lexists(dest / "model.onnx"):
        return
    dest.mkdir(parents=True, exist_ok=True)
    for f in MODEL_DIR.iterdir():
        if not os.path.lexists(dest / f.name):
            (dest / f.name).symlink_to(f)


def snapshot(root: Path) -> dict:
    """Every path under root: file bytes + mode + mtime, symlink targets, directory modes.

    ~/.cache is left out: the demo's knowledge-base run lets third-party runtimes (onnxruntime, Chroma's model
    cache) write there; that is theirs, not the installer's."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".cache" in dirnames:
            dirnames.remove(".cache")
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_dir():
                out[str(p)] = ("dir", st.st_mode)
            else:
                out[str(p)] = ("file", p.read_bytes(), st.st_mode, st.st_mtime_ns)
    return out


def our_commands(settings: dict) -> list[str]:
    hooks = settings.get("hooks") if isinstance(settings.get("hooks"), dict) else {}
    return sorted(h["command"] for groups in hooks.values() if isinstance(groups, list) for g in groups
                  if isinstance(g, dict) and isinstance(g.get("hooks"), list) for h in g["hooks"]
                  if isinstance(h, dict) and "gsd-research/run" in h.get("command", ""))


def assert_registered(user: Path, settings: dict) -> None:
    run = user / RUN_REL
    assert our_commands(settings) == sorted(f"{run} {sub}" for sub in (
        "session-start", "user-prompt-submit", "pre-webfetch", "pre-context7", "subagent-start", "pre-bash",
        "pre-bash"))  # one handler per `if` filter
    assert {"Bash(gsd-research:*)", "Bash(researcher:*)"} <= set(settings["permissions"]["allow"])


def copy_checkout(dest: Path) -> Path:
    """The parts of this checkout install.sh uses, with a requirements.lock (a stand-in when none is committed)."""
    import shutil

    dest.mkdir(parents=True)
    for name in ("install.sh", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("installer", "bin", "hooks", "agents", "commands", "skills"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    lock = ROOT / "requirements.lock"
    (dest / "requirements.lock").write_bytes(lock.read_bytes() if lock.is_file() else
                                             b"click==8.1.7 --hash=sha256:" + b"0" * 64 + b"\n")
    return dest
