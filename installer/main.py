"""install.sh's file work: links, Claude Code files, settings.json, GSD projects, the manifest.

Run by install.sh as `python -E -s installer/main.py ACTION ROOT DATA VENV VENV_CREATED CLAUDE_FILES [PROJECT...]`.
Everything is checked before the first change; every change is journaled first and undone when a later
one fails (or, after a killed run, by the next run); a second install changes nothing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path

import claude_settings as cs
import gsd_config
from txn_journal import InstallError, Journal, real_target

action, root, data, venv, venv_created, claude_files = sys.argv[1:7]
projects = [Path(p).resolve() for p in sys.argv[7:]]
ROOT, DATA = Path(root), Path(data)
HOME = Path(os.environ["HOME"])
CLAUDE = Path(os.environ.get("CLAUDE_CONFIG_DIR") or HOME / ".claude")
GSD_SKILLS = HOME / ".claude" / "skills"  # where GSD resolves global:<name>, whatever CLAUDE_CONFIG_DIR says
BIN_DIR = Path(os.environ.get("GSD_RESEARCH_BIN_DIR") or HOME / ".local" / "bin")
MANIFEST = DATA / "install-manifest.json"
JOURNAL = DATA / "install-journal.json"
SETTINGS = CLAUDE / "settings.json"
HOOK_DIR = CLAUDE / "hooks" / "gsd-research"
RUN = str(HOOK_DIR / "run")


def say(msg: str) -> None:
    print(f"[gsd-research] {msg}", file=sys.stderr)


def sha(blob: bytes) -> str:
    return hashlib.sha256(blob).hexdigest()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def load_manifest() -> dict:
    manifest = {"files": {}, "dirs": [], "links": {}, "settings": None, "projects": {}, "venv": None}
    if MANIFEST.is_file():
        try:
            manifest.update(json.loads(MANIFEST.read_text()))
        except (ValueError, OSError):
            say(f"ignoring an unreadable {MANIFEST}")
    return manifest


# -- what gets installed --------------------------------------------------------------------------------

def skill_names() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "skills").glob("*/SKILL.md"))


def _tree(src_dir: Path, dst_dir: Path) -> list[tuple[Path, Path]]:
    return [(p, dst_dir / p.relative_to(src_dir)) for p in sorted(src_dir.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts]


def planned_files() -> list[tuple[Path, Path]]:
    """(source, destination) of everything copied into a Claude config directory."""
    pairs = []
    if claude_files == "1":
        pairs += [(src, dst) for src, dst in _tree(ROOT / "hooks", HOOK_DIR)  # the entry and its modules
                  if src != ROOT / "hooks" / "hooks.json"]
        pairs += [(p, CLAUDE / "agents" / p.name) for p in sorted((ROOT / "agents").glob("*.md"))]
        pairs += [(p, CLAUDE / "commands" / "research" / p.name) for p in sorted((ROOT / "commands").glob("*.md"))]
    skill_dirs = [CLAUDE / "skills"] if claude_files == "1" else []
    if projects and GSD_SKILLS not in skill_dirs:
        skill_dirs.append(GSD_SKILLS)
    for skills in skill_dirs:
        for name in skill_names():
            pairs += _tree(ROOT / "skills" / name, skills / name)
    return pairs


# -- checks before any change ---------------------------------------------------------------------------

def inspect_settings() -> tuple[dict | None, bytes | None]:
    """(parsed settings or None to leave them alone, original bytes or None when there is no file).
    Refuses (InstallError) shapes we cannot merge into; nothing has changed at that point."""
    if SETTINGS.is_symlink() and not SETTINGS.exists():
        raise InstallError(f"{SETTINGS} is a symlink to {os.readlink(SETTINGS)}, which does not exist: "
                           "create that file (it may hold just {}) or remove the link, then run install.sh again")
    if SETTINGS.exists() and not SETTINGS.is_file():
        raise InstallError(f"{SETTINGS} is not a file: move it away, then run install.sh again")
    if not SETTINGS.exists():
        return {}, None
    raw = SETTINGS.read_bytes()
    try:
        value = cs.parse(raw)
    except cs.NotPlainJson as exc:
        say(f"settings {SETTINGS} is not plain JSON ({exc}); left untouched: add the hooks and the "
            f"permissions {', '.join(cs.PERMISSIONS)} yourself, or fix the file and run install.sh again")
        return None, raw
    try:
        return cs.normalize(value), raw
    except cs.ShapeError as exc:
        raise InstallError(f"cannot merge into {SETTINGS}: {exc}. Nothing was changed; fix that value "
                           "(or remove it), then run install.sh again") from None


def inspect_project(project: Path) -> tuple[Path, dict, bytes]:
    cfg_path = project / ".planning" / "config.json"
    if not cfg_path.is_file():
        raise InstallError(f"{project} is not a GSD project (no .planning/config.json)")
    raw = cfg_path.read_bytes()
    try:
        return cfg_path, gsd_config.normalize(cs.parse(raw)), raw
    except cs.NotPlainJson as exc:
        raise InstallError(f"{cfg_path} is not plain JSON ({exc}); nothing was changed") from None
    except cs.ShapeError as exc:
        raise InstallError(f"cannot wire skills into {cfg_path}: {exc}; nothing was changed") from None


# -- changes --------------------------------------------------------------------------------------------

def copy_files(journal: Journal, manifest: dict) -> int:
    changed = 0
    for src, dst in planned_files():
        blob = src.read_bytes()
        if os.path.lexists(dst) and str(dst) not in manifest["files"] and (
                not dst.is_file() or dst.read_bytes() != blob):
            say(f"left alone (not ours, differs): {dst}")
            continue
        mode = 0o755 if os.access(src, os.X_OK) else 0o644
        if journal.write(dst, blob, mode=mode):
            changed += 1
        manifest["files"][str(dst)] = sha(blob)
    return changed


def link(journal: Journal, dst: Path, target: Path, manifest: dict) -> None:
    if dst.is_symlink() and os.readlink(dst) == str(target):
        manifest["links"][str(dst)] = str(target)
        return
    if os.path.lexists(dst):
        if str(dst) not in manifest["links"] or not dst.is_symlink():
            say(f"left alone (exists, not ours): {dst}")
            return
        journal.unlink_link(dst)
    journal.symlink(dst, target)
    manifest["links"][str(dst)] = str(target)


def install_settings(journal: Journal, manifest: dict, current: dict, raw: bytes | None) -> None:
    merged = cs.merge(current, RUN)
    if merged == current:
        return
    if manifest["settings"] is None:  # first change: keep the user's exact bytes, privately
        backup = DATA / "backup" / "settings.json"
        info = {"existed": raw is not None, "backup": None, "symlink": None, "mode": None, "mtime_ns": None}
        if raw is not None:
            journal.mkdirs(backup.parent, mode=0o700)
            journal.write(backup, raw, mode=0o600)
            target = real_target(SETTINGS)
            info.update(backup=str(backup), mode=mode_of(target), mtime_ns=target.stat().st_mtime_ns,
                        symlink=os.readlink(SETTINGS) if SETTINGS.is_symlink() else None)
        manifest["settings"] = info
    journal.write(SETTINGS, cs.dump(merged), new_mode=0o600)
    where = f" (a symlink: written to {real_target(SETTINGS)})" if SETTINGS.is_symlink() else ""
    for note in cs.notes(cs.parse(raw) if raw else {}):
        say(f"note: {note}")
    say(f"registered hooks and permissions in {SETTINGS}{where}; backup: "
        f"{manifest['settings']['backup'] or 'none, new file'}")


def wire_project(journal: Journal, manifest: dict, cfg_path: Path, cfg: dict, raw: bytes) -> None:
    ours = gsd_config.entries(skill_names())
    merged = gsd_config.wire(cfg, ours)
    if merged == cfg:
        return
    key = str(cfg_path.parent.parent)
    if key not in manifest["projects"]:
        backup = DATA / "backup" / f"gsd-config-{sha(key.encode())[:12]}.json"
        journal.mkdirs(backup.parent, mode=0o700)
        journal.write(backup, raw, mode=0o600)
        manifest["projects"][key] = {"config": str(cfg_path), "backup": str(backup), "skills": ours,
                                     "mtime_ns": real_target(cfg_path).stat().st_mtime_ns}
    journal.write(cfg_path, cs.dump(merged))
    say(f"wired {', '.join(ours)} into {cfg_path} agent_skills for {', '.join(gsd_config.RESEARCHERS)} "
        f"(GSD reads them from {GSD_SKILLS})")


def save_manifest(journal: Journal, manifest: dict) -> None:
    manifest["dirs"] = sorted(set(manifest["dirs"]) | set(journal.created_dirs()))
    journal.write(MANIFEST, cs.dump(manifest), mode=0o600)


def apply(journal: Journal, manifest: dict, settings: tuple, wired: list) -> None:
    journal.mkdirs(DATA, mode=0o700)
    venv_path, default_venv = Path(venv), DATA / "venv"
    if venv_created == "1" and venv_path == default_venv:
        manifest["venv"] = str(default_venv)
    manifest["dirs"] += [d for d in os.environ.get("GSD_INSTALL_CREATED_DIRS", "").split("\n") if d]
    if venv_path != default_venv:
        link(journal, default_venv, venv_path, manifest)  # hooks copied into ~/.claude find the environment here
    for name in ("gsd-research", "researcher"):
        link(journal, BIN_DIR / name, ROOT / "bin" / name, manifest)
    changed = copy_files(journal, manifest)
    if claude_files == "1":
        say(f"agents, skills, commands and hooks in {CLAUDE} ({changed} file(s) written)")
        if settings[0] is not None:
            install_settings(journal, manifest, *settings)
    for project in wired:
        wire_project(journal, manifest, *project)
    save_manifest(journal, manifest)


def install() -> None:
    recovered = Journal.recover(JOURNAL)
    if recovered is not None:
        say("rolled back an install that was interrupted" + (f"; not undone: {'; '.join(recovered)}"
                                                             if recovered else ""))
    wired = [inspect_project(p) for p in projects]
    settings = inspect_settings() if claude_files == "1" else (None, None)
    manifest = load_manifest()
    journal = Journal(JOURNAL)
    try:
        apply(journal, manifest, settings, wired)
    except (OSError, InstallError) as exc:
        failures = journal.rollback()
        detail = f"not undone: {'; '.join(failures)}" if failures else "every change was rolled back"
        raise InstallError(f"install failed ({describe(exc)}); {detail}") from None
    journal.commit()
    if str(BIN_DIR) not in os.environ.get("PATH", "").split(os.pathsep):
        say(f"note: {BIN_DIR} is not on your PATH; add it to use gsd-research outside Claude Code")


# -- uninstall ------------------------------------------------------------------------------------------

def _restore(path: Path, original: bytes, mtime_ns: int | None) -> None:
    """Put the user's exact bytes back, through a symlink, keeping the file's mode."""
    Journal(None).write(path, original)
    if mtime_ns:
        os.utime(real_target(path), ns=(mtime_ns, mtime_ns))


def _exactly(info: dict, original: bytes) -> list[str]:
    """What differs from the settings.json as it was before the install (empty: exactly restored)."""
    diffs = []
    target = real_target(SETTINGS)
    if target.read_bytes() != original:
        diffs.append("content")
    if info.get("mode") is not None and mode_of(target) != info["mode"]:
        diffs.append(f"mode {oct(mode_of(target))} (was {oct(info['mode'])})")
    link_now = os.readlink(SETTINGS) if SETTINGS.is_symlink() else None
    if "symlink" in info and link_now != info.get("symlink"):
        diffs.append("no longer a symlink" if link_now is None else f"now a symlink to {link_now}")
    return diffs


def uninstall_settings(manifest: dict) -> None:
    info = manifest.get("settings")
    if not info or not SETTINGS.is_file():
        return
    backup = Path(info["backup"]) if info.get("backup") else None
    original_bytes = backup.read_bytes() if backup and backup.is_file() else None
    try:
        original_raw = cs.parse(original_bytes) if original_bytes else {}
        original = cs.normalize(original_raw)
        current = cs.normalize(cs.parse(SETTINGS.read_bytes()))
    except (cs.NotPlainJson, cs.ShapeError) as exc:
        say(f"left {SETTINGS} alone ({exc}): remove the gsd-research hooks ({RUN}) and the permissions "
            f"{', '.join(cs.PERMISSIONS)} yourself" + (f"; your original is kept at {backup}" if backup else ""))
        return
    cleaned = cs.clean(current, original, RUN)
    if original_bytes is not None and cleaned == original:
        _restore(SETTINGS, original_bytes, info.get("mtime_ns"))
        diffs = _exactly(info, original_bytes)
        say(f"restored {SETTINGS} exactly as it was" if not diffs else
            f"restored {SETTINGS}'s content as it was; it differs in: {', '.join(diffs)}")
    elif not info.get("existed") and cleaned == {} and not SETTINGS.is_symlink():
        SETTINGS.unlink()
    else:
        _restore(SETTINGS, cs.dump(cs.restore_shapes(cleaned, original_raw)), None)
        say(f"removed gsd-research hooks and permissions from {SETTINGS} (your later changes kept)")
    if backup and backup.is_file():
        backup.unlink()


def unwire_project(info: dict) -> None:
    cfg_path, backup = Path(info["config"]), Path(info["backup"])
    if not cfg_path.is_file():
        return
    original_bytes = backup.read_bytes() if backup.is_file() else None
    try:
        original_raw = cs.parse(original_bytes) if original_bytes else {}
        original = gsd_config.normalize(original_raw)
        current = gsd_config.normalize(cs.parse(cfg_path.read_bytes()))
    except (cs.NotPlainJson, cs.ShapeError) as exc:
        say(f"left {cfg_path} alone ({exc}): remove {', '.join(info['skills'])} from its agent_skills yourself")
        return
    cleaned = gsd_config.unwire(current, original, info["skills"])
    if original_bytes is not None and cleaned == original:
        _restore(cfg_path, original_bytes, info.get("mtime_ns"))
    else:
        _restore(cfg_path, cs.dump(gsd_config.restore_shapes(cleaned, original_raw)), None)
    say(f"removed gsd-research skills from {cfg_path}")
    if backup.is_file():
        backup.unlink()


def remove_installed(manifest: dict) -> None:
    for path, digest in manifest["files"].items():
        p = Path(path)
        if p.is_file() and not p.is_symlink() and sha(p.read_bytes()) == digest:
            p.unlink()
        elif os.path.lexists(p):
            say(f"kept (changed since install): {p}")
    for path, target in manifest["links"].items():
        p = Path(path)
        if p.is_symlink() and os.readlink(p) == target:
            p.unlink()
    shutil.rmtree(DATA / "plugin-docs", ignore_errors=True)  # the demo's copy of the plugin's docs
    if manifest.get("venv") and Path(manifest["venv"]).is_dir():
        shutil.rmtree(manifest["venv"])
    MANIFEST.unlink()
    for d in sorted(set(manifest["dirs"]), key=lambda s: s.count(os.sep), reverse=True):
        shutil.rmtree(Path(d) / "__pycache__", ignore_errors=True)
        try:
            Path(d).rmdir()
        except OSError:
            pass


def uninstall() -> None:
    recovered = Journal.recover(JOURNAL)
    if recovered is not None:
        say("rolled back an install that was interrupted")
    if not MANIFEST.is_file():
        say(f"nothing to uninstall (no {MANIFEST})")
        return
    manifest = load_manifest()
    if projects:
        selected = {str(p) for p in projects}
        for key in [k for k in manifest["projects"] if k in selected]:
            unwire_project(manifest["projects"].pop(key))
        Journal(None).write(MANIFEST, cs.dump(manifest), mode=0o600)
        return
    for info in manifest["projects"].values():
        unwire_project(info)
    uninstall_settings(manifest)
    remove_installed(manifest)
    say("uninstalled")


def describe(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc)


def main() -> int:
    try:
        install() if action == "install" else uninstall()
    except (InstallError, OSError) as exc:
        say(f"error: {describe(exc)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
