"""install.sh --uninstall: the manifest's files, links and folders removed, settings.json and GSD configs restored
(byte for byte when the user changed nothing else, else without our entries and with their later edits)."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import claude_settings as cs
import file_state
import gsd_config
from layout import DATA, JOURNAL, MANIFEST, RUN, SETTINGS, say, sha
from txn_journal import Journal, real_target


def _restore(journal: Journal, path: Path, original: bytes, mtime_ns: int | None) -> None:
    """Put the user's exact bytes back, through a symlink, into the same file (its mode, inode, links kept)."""
    journal.write(path, original, in_place=True)
    if mtime_ns:
        os.utime(real_target(path), ns=(mtime_ns, mtime_ns))


def _exactly(info: dict, original: bytes) -> list[str]:
    """What differs from the settings.json as it was before the install (empty: exactly restored)."""
    diffs = []
    target = real_target(SETTINGS)
    if target.read_bytes() != original:
        diffs.append("content")
    mode = stat.S_IMODE(target.stat().st_mode)
    if info.get("mode") is not None and mode != info["mode"]:
        diffs.append(f"mode {oct(mode)} (was {oct(info['mode'])})")
    link_now = os.readlink(SETTINGS) if SETTINGS.is_symlink() else None
    if "symlink" in info and link_now != info.get("symlink"):
        diffs.append("no longer a symlink" if link_now is None else f"now a symlink to {link_now}")
    return diffs + file_state.differences(info.get("identity"), target)


def uninstall_settings(journal: Journal, manifest: dict) -> None:
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
    if original_bytes is not None and cs.same(cleaned, original):
        _restore(journal, SETTINGS, original_bytes, info.get("mtime_ns"))
        diffs = _exactly(info, original_bytes)
        say(f"restored {SETTINGS} exactly as it was" if not diffs else
            f"restored {SETTINGS}'s content as it was; it differs in: {', '.join(diffs)}")
    elif not info.get("existed") and cleaned == {} and not SETTINGS.is_symlink():
        SETTINGS.unlink()
    else:
        _restore(journal, SETTINGS, cs.dump(cs.restore_shapes(cleaned, original_raw)), None)
        say(f"removed gsd-research hooks and permissions from {SETTINGS} (your later changes kept)")


def unwire_project(journal: Journal, info: dict) -> None:
    cfg_path, backup = Path(info["config"]), Path(info["backup"])
    if not cfg_path.is_file():
        say(f"{cfg_path} is gone; nothing to unwire there")
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
    if original_bytes is not None and cs.same(cleaned, original):
        _restore(journal, cfg_path, original_bytes, info.get("mtime_ns"))
    else:
        _restore(journal, cfg_path, cs.dump(gsd_config.restore_shapes(cleaned, original_raw)), None)
    say(f"removed gsd-research skills from {cfg_path}")


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


def remove_dirs(manifest: dict) -> None:
    for d in sorted(set(manifest["dirs"]), key=lambda s: s.count(os.sep), reverse=True):
        shutil.rmtree(Path(d) / "__pycache__", ignore_errors=True)
        try:
            Path(d).rmdir()
        except OSError:
            pass


def _unlink_backups(infos: list[dict | None]) -> None:
    for info in infos:
        if info and info.get("backup") and Path(info["backup"]).is_file():
            Path(info["backup"]).unlink()


def missing_projects(projects: list[Path], wired: dict | None = None) -> bool:
    """Say which projects given to --uninstall --gsd-project this install never wired; True when one does not
    even exist (an error)."""
    missing = False
    for p in projects:
        if wired is not None and str(p) in wired:
            continue
        if not p.exists():
            say(f"error: {p} does not exist; nothing to unwire there")
            missing = True
        else:
            say(f"{p}: not wired by gsd-research (nothing to undo there)")
    return missing


def uninstall(manifest: dict, projects: list[Path]) -> int:
    """Everything, or with `projects` only their wiring. Writes are journaled: a killed uninstall is rolled back
    by the next run, which then uninstalls again; backups go last, after the journal is closed."""
    journal = Journal(JOURNAL)
    if projects:
        status = 1 if missing_projects(projects, manifest["projects"]) else 0
        infos = [manifest["projects"].pop(str(p)) for p in projects if str(p) in manifest["projects"]]
        for info in infos:
            unwire_project(journal, info)
        journal.write(MANIFEST, cs.dump(manifest), mode=0o600)
        journal.commit()
        _unlink_backups(infos)
        return status
    for info in manifest["projects"].values():
        unwire_project(journal, info)
    uninstall_settings(journal, manifest)
    remove_installed(manifest)
    journal.commit()
    _unlink_backups([manifest.get("settings"), *manifest["projects"].values()])
    MANIFEST.unlink()
    remove_dirs(manifest)
    say("uninstalled")
    return 0
