"""/research:setup on the plugin route: our Bash permission rules written into Claude Code's settings.json as
install.sh writes them (claude_settings.allow), the original kept, and taken out again with `revoke`.

    python3 installer/allow_rules.py allow|revoke|show

Stdlib only (run by any python3). The settings file: $CLAUDE_CONFIG_DIR/settings.json, else ~/.claude/settings.json;
its original bytes go to $GSD_RESEARCH_HOME/backup/settings-permissions.json (0600) on the first change."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import claude_settings as cs
from txn_journal import Journal, real_target


def settings_path() -> Path:
    home = Path(os.path.expanduser("~"))
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "settings.json"


def backup_path() -> Path:
    root = os.environ.get("GSD_RESEARCH_HOME") or os.path.join(os.path.expanduser("~"), ".gsd-research")
    return Path(root) / "backup" / "settings-permissions.json"


def say(msg: str) -> None:
    print(f"[gsd-research] {msg}")


def _read(path: Path) -> tuple[dict, bytes | None]:
    raw = real_target(path).read_bytes() if path.exists() else None
    return cs.normalize(cs.parse(raw or b"")), raw


def allow(path: Path, backup: Path) -> int:
    current, raw = _read(path)
    merged = cs.allow(current)
    if cs.same(merged, current):
        say(f"already allowed in {path}: {', '.join(cs.PERMISSIONS)}")
        return 0
    journal = Journal(None)
    if not backup.exists():  # the user's bytes from before the first change, privately
        journal.mkdirs(backup.parent, mode=0o700)
        journal.write(backup, raw if raw is not None else b"", mode=0o600)
    journal.write(path, cs.dump(merged), new_mode=0o600, in_place=True)
    say(f"allowed {', '.join(cs.PERMISSIONS)} in {path} (backup of the original: {backup}); "
        "start a new session for it to apply; undo: allow_rules.py revoke")
    return 0


def revoke(path: Path, backup: Path) -> int:
    if not path.exists():
        say(f"nothing to revoke: {path} does not exist")
        return 0
    if not backup.is_file():  # setup changed nothing: the rules were the user's or install.sh's, not ours
        say(f"nothing to revoke: setup did not add the rules in {path} (install.sh's go with ./install.sh "
            "--uninstall)")
        return 0
    current, _ = _read(path)
    original_bytes = backup.read_bytes() if backup.is_file() else b""
    original_raw = cs.parse(original_bytes)
    original = cs.normalize(original_raw)
    cleaned = cs.revoke(current, original)
    journal = Journal(None)
    if backup.is_file() and cs.same(cleaned, original) and original_bytes:
        journal.write(path, original_bytes, in_place=True)  # exactly as it was
    else:
        journal.write(path, cs.dump(cs.restore_shapes(cleaned, original_raw)), in_place=True)
    if backup.is_file():
        backup.unlink()
    say(f"removed {', '.join(cs.PERMISSIONS)} from {path} (rules you had before are kept)")
    return 0


def main(argv: list[str]) -> int:
    action = argv[0] if argv else "allow"
    path, backup = settings_path(), backup_path()
    try:
        if action == "allow":
            return allow(path, backup)
        if action == "revoke":
            return revoke(path, backup)
        if action == "show":
            rules = cs.allow({})["permissions"]["allow"]
            allowed = _read(path)[0].get("permissions", {}).get("allow", []) if path.exists() else []
            say(f"{path}: " + "; ".join(f"{r} {'allowed' if r in allowed else 'NOT allowed'}" for r in rules))
            return 0
    except (cs.NotPlainJson, cs.ShapeError, OSError) as exc:
        say(f"error: {path} left unchanged ({exc}); add {', '.join(cs.PERMISSIONS)} to permissions.allow yourself")
        return 1
    say(f"usage: allow_rules.py allow|revoke|show (got {action!r})")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
