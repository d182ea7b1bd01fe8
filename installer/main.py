"""install.sh's file work: links, Claude Code files, settings.json, GSD projects, the manifest.

Run by install.sh as `python -E -s installer/main.py ACTION ROOT DATA VENV VENV_CREATED CLAUDE_FILES [PROJECT...]`.
One run at a time (a lock on the data folder). Everything is checked before the first change; every change is
journaled first and undone when a later one fails, whatever the failure (or, after a killed run, by the next
run); a second install changes nothing."""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path

import chroma_model
import claude_settings as cs
import file_state
import gsd_config
import uninstall as removal
from install_lock import InstallLock
from layout import (
    BIN_DIR,
    BIN_DIR_FILE,
    CLAUDE,
    DATA,
    GSD_SKILLS,
    HOOK_DIR,
    JOURNAL,
    MANIFEST,
    MODELS_FROM,
    ROOT,
    RUN,
    SETTINGS,
    action,
    claude_files,
    projects,
    relative_settings,
    say,
    sha,
    venv,
    venv_created,
)
from txn_journal import InstallError, Journal, real_target


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


# Files an earlier install wrote under a name it no longer uses -> what replaced them; each goes when still as
# installed. GSD's installers take every file named gsd-* or gsd_* in ~/.claude's agents, skills and hooks for
# a stale GSD artifact (deleted, or the install stops to ask): so the agent is research-scout and the hook entry
# entry.py. The summarize skill merged into read-url (one listing entry fewer in every session).
RETIRED = {CLAUDE / "agents" / "gsd-researcher.md": CLAUDE / "agents" / "research-scout.md",
           CLAUDE / "skills" / "summarize" / "SKILL.md": CLAUDE / "skills" / "read-url" / "SKILL.md",
           HOOK_DIR / "gsd_research_hook.py": HOOK_DIR / "entry.py",
           HOOK_DIR / "gsd_research_hooks" / "gsd_line.py": HOOK_DIR / "gsd_research_hooks" / "project_line.py"}


def planned_files() -> list[tuple[Path | bytes, Path]]:
    """(source file or bytes, destination) of everything copied into a Claude config directory."""
    pairs: list[tuple[Path | bytes, Path]] = []
    if claude_files == "1":
        pairs += [(src, dst) for src, dst in _tree(ROOT / "hooks", HOOK_DIR)  # the entry and its modules
                  if src != ROOT / "hooks" / "hooks.json"]
        # where the commands are linked: SessionStart puts it on the Bash tool's PATH when it is missing there
        pairs.append(((str(BIN_DIR) + "\n").encode(), HOOK_DIR / BIN_DIR_FILE))
        pairs += _tree(ROOT / "bootstrap", HOOK_DIR / "bootstrap")  # the entry finds it beside itself
        pairs += [(p, CLAUDE / "agents" / p.name) for p in sorted((ROOT / "agents").glob("*.md"))]
        pairs += [(p, CLAUDE / "commands" / "research" / p.name) for p in sorted((ROOT / "commands").glob("*.md"))]
    if claude_files == "1":
        for name in skill_names():
            pairs += _tree(ROOT / "skills" / name, CLAUDE / "skills" / name)
    if projects and (claude_files != "1" or GSD_SKILLS != CLAUDE / "skills"):  # GSD resolves global:<name> there
        pairs += _tree(ROOT / "skills" / gsd_config.SKILL, GSD_SKILLS / gsd_config.SKILL)
    return pairs


# -- checks before any change ---------------------------------------------------------------------------

def _writable(value, path: Path) -> None:
    """The merged value can be written back (checked before anything changes)."""
    try:
        cs.dump(value)
    except (ValueError, RecursionError, UnicodeError) as exc:
        raise InstallError(f"cannot write {path} back ({exc.__class__.__name__}: {str(exc)[:120]}); "
                           "nothing was changed") from None


def symlink_loop(path) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def inspect_settings() -> tuple[dict | None, bytes | None]:
    """(parsed settings or None to leave them alone, original bytes or None when there is no file).
    Refuses (InstallError) shapes we cannot merge into; nothing has changed at that point."""
    if SETTINGS.is_symlink() and not SETTINGS.exists():
        if symlink_loop(SETTINGS):
            raise InstallError(f"{SETTINGS} is a symlink loop (through {os.readlink(SETTINGS)}): point the link at "
                               "a real file (it may hold just {}) or remove it, then run install.sh again")
        raise InstallError(f"{SETTINGS} is a symlink to {os.readlink(SETTINGS)}, which does not exist: "
                           "create that file (it may hold just {}) or remove the link, then run install.sh again")
    if SETTINGS.exists() and not SETTINGS.is_file():
        raise InstallError(f"{SETTINGS} is not a file: move it away, then run install.sh again")
    if not SETTINGS.exists():
        return {}, None
    raw = SETTINGS.read_bytes()
    try:
        value = cs.normalize(cs.parse(raw))
    except cs.NotPlainJson as exc:
        say(f"settings {SETTINGS} is not plain JSON ({exc}); left untouched: add the hooks and the "
            f"permissions {', '.join(cs.PERMISSIONS)} yourself, or fix the file and run install.sh again")
        return None, raw
    except cs.ShapeError as exc:
        raise InstallError(f"cannot merge into {SETTINGS}: {exc}. Nothing was changed; fix that value "
                           "(or remove it), then run install.sh again") from None
    _writable(cs.merge(value, RUN), SETTINGS)
    return value, raw


def inspect_project(project: Path) -> tuple[Path, dict, bytes, list[str]]:
    cfg_path = project / ".planning" / "config.json"
    if not cfg_path.is_file():
        raise InstallError(f"{project} is not a GSD project (no .planning/config.json)")
    raw = cfg_path.read_bytes()
    try:
        cfg = gsd_config.normalize(cs.parse(raw))
    except cs.NotPlainJson as exc:
        raise InstallError(f"{cfg_path} is not plain JSON ({exc}); nothing was changed") from None
    except cs.ShapeError as exc:
        raise InstallError(f"cannot wire skills into {cfg_path}: {exc}; nothing was changed") from None
    ours = gsd_config.entries(gsd_config.line_of(project), plugin_route=claude_files != "1")
    _writable(gsd_config.wire(cfg, ours), cfg_path)
    return cfg_path, cfg, raw, ours


# -- changes --------------------------------------------------------------------------------------------

def retire_files(journal: Journal, manifest: dict) -> None:
    for path, replacement in RETIRED.items():
        digest = manifest["files"].pop(str(path), None)
        if digest is None:
            continue  # never ours: left alone
        if path.is_file() and not path.is_symlink() and sha(path.read_bytes()) == digest:
            journal.remove(path)
            say(f"removed {path} (an earlier install's; replaced by {replacement})")
        elif os.path.lexists(path):
            say(f"kept (changed since install, yours now): {path}")


def copy_files(journal: Journal, manifest: dict, pairs: list[tuple[Path | bytes, Path]]) -> int:
    changed = 0
    for src, dst in pairs:
        blob = src if isinstance(src, bytes) else src.read_bytes()
        if os.path.lexists(dst) and str(dst) not in manifest["files"]:
            if not dst.is_file() or dst.read_bytes() != blob:
                say(f"left alone (not ours, differs): {dst}")
            continue  # the same file was there before: not ours, never removed
        mode = 0o755 if not isinstance(src, bytes) and os.access(src, os.X_OK) else 0o644
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
    if cs.same(merged, current):
        return
    if manifest["settings"] is None:  # first change: keep the user's exact bytes, privately
        backup = DATA / "backup" / "settings.json"
        info = {"existed": raw is not None, "backup": None, "symlink": None, "mode": None, "mtime_ns": None}
        if raw is not None:
            journal.mkdirs(backup.parent, mode=0o700)
            journal.write(backup, raw, mode=0o600)
            target = real_target(SETTINGS)
            info.update(backup=str(backup), mode=mode_of(target), mtime_ns=target.stat().st_mtime_ns,
                        symlink=os.readlink(SETTINGS) if SETTINGS.is_symlink() else None,
                        identity=file_state.identity(target))
        manifest["settings"] = info
    journal.write(SETTINGS, cs.dump(merged), new_mode=0o600, in_place=True)
    where = f" (a symlink: written to {real_target(SETTINGS)})" if SETTINGS.is_symlink() else ""
    for note in cs.notes(cs.parse(raw) if raw else {}):
        say(f"note: {note}")
    say(f"registered hooks and permissions in {SETTINGS}{where}; backup: "
        f"{manifest['settings']['backup'] or 'none, new file'}")


def _retire_entries(manifest: dict, key: str, cfg: dict, ours: list[str]) -> dict:
    """An earlier install's entries that are no longer ours (all seven skills, another form) taken out."""
    info = manifest["projects"].get(key)
    retired = [e for e in (info or {}).get("skills", []) if e not in ours]
    if not retired:
        return cfg
    backup = Path(info["backup"])
    original = gsd_config.normalize(cs.parse(backup.read_bytes())) if backup.is_file() else {}
    info["skills"] = ours
    return gsd_config.unwire(cfg, original, retired)


def wire_project(journal: Journal, manifest: dict, cfg_path: Path, cfg: dict, raw: bytes, ours: list[str]) -> None:
    key = str(cfg_path.parent.parent)
    merged = gsd_config.wire(_retire_entries(manifest, key, cfg, ours), ours)
    if cs.same(merged, cfg):
        return
    if key not in manifest["projects"]:
        backup = DATA / "backup" / f"gsd-config-{sha(key.encode())[:12]}.json"
        journal.mkdirs(backup.parent, mode=0o700)
        journal.write(backup, raw, mode=0o600)
        manifest["projects"][key] = {"config": str(cfg_path), "backup": str(backup), "skills": ours,
                                     "mtime_ns": real_target(cfg_path).stat().st_mtime_ns}
    journal.write(cfg_path, cs.dump(merged), in_place=True)
    say(f"wired {', '.join(ours)} into {cfg_path} agent_skills for {', '.join(gsd_config.RESEARCHERS)}")


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
    retire_files(journal, manifest)
    changed = copy_files(journal, manifest, planned_files())
    if claude_files == "1":
        say(f"agents, skills, commands and hooks in {CLAUDE} ({changed} file(s) written)")
        if settings[0] is not None:
            install_settings(journal, manifest, *settings)
    for project in wired:
        wire_project(journal, manifest, *project)
    save_manifest(journal, manifest)


def seed_model(manifest: dict) -> None:
    """Chroma's embedding model from a local copy, as its own step: a failure there only warns."""
    pairs = chroma_model.planned(Path(os.environ["HOME"]), MODELS_FROM, ROOT, say)
    if not pairs:
        return
    journal = Journal(JOURNAL)
    try:
        journal.mkdirs(chroma_model.destination(Path(os.environ["HOME"])))
        copy_files(journal, manifest, pairs)
        save_manifest(journal, manifest)
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the model copy is undone, the install stands
        journal.rollback()
        say(f"warning: could not copy Chroma's embedding model ({describe(exc)}); the knowledge base "
            "downloads it on first use")
        return
    journal.commit()
    say(f"seeded Chroma's embedding model from {pairs[0][0].parent}")


def _recover(lock: InstallLock, create: bool) -> bool:
    """Roll back a killed run's journal (under the lock); False when the data folder is gone after that."""
    recovered = Journal.recover(JOURNAL)
    if recovered is not None:
        say("rolled back an install that was interrupted" + (f"; not undone: {'; '.join(recovered)}"
                                                             if recovered else ""))
    if lock.still_held():
        return True
    lock.release()  # the rollback removed the folder we locked: lock it (or its new self) again
    return lock.acquire(create=create)


def install() -> None:
    lock = InstallLock(DATA, say)
    lock.acquire()
    committed = False
    try:
        _recover(lock, create=True)
        wired = [inspect_project(p) for p in projects]
        settings = inspect_settings() if claude_files == "1" else (None, None)
        manifest = load_manifest()
        journal = Journal(JOURNAL)
        journal.made_dirs(lock.created)
        try:
            apply(journal, manifest, settings, wired)
        except BaseException as exc:  # whatever it is, nothing half-done stays
            failures = journal.rollback()
            detail = f"not undone: {'; '.join(failures)}" if failures else "every change was rolled back"
            if isinstance(exc, KeyboardInterrupt):
                raise InstallError(f"install interrupted; {detail}") from None
            raise InstallError(f"install failed ({describe(exc)}); {detail}") from None
        journal.commit()
        committed = True
        seed_model(manifest)
    finally:
        if not committed:
            for d in reversed(lock.created):  # folders made for the lock, when nothing was installed
                try:
                    d.rmdir()
                except OSError:
                    pass
        lock.release()
    path_note()


def path_note() -> None:
    """Whether the commands are reachable, said plainly (from a terminal; from Claude Code's Bash tool)."""
    if str(BIN_DIR) in os.environ.get("PATH", "").split(os.pathsep):
        return
    line = f'export PATH="$PATH:{BIN_DIR}"'
    if claude_files == "1":
        say(f"note: {BIN_DIR} is not on your PATH. Claude Code: the SessionStart hook adds it to the Bash tool's "
            f"PATH for each session (nothing to do). A terminal: add `{line}` to your shell profile")
    else:
        say(f"note: {BIN_DIR} is not on your PATH: Claude Code's Bash tool finds the commands only through the "
            f"plugin (it puts its bin/ there); a terminal needs `{line}` in your shell profile")


def uninstall() -> int:
    lock = InstallLock(DATA, say)
    if not lock.acquire(create=False) or not _recover(lock, create=False) or not MANIFEST.is_file():
        lock.release()
        say(f"nothing to uninstall (no {MANIFEST})")
        return 1 if removal.missing_projects(projects) else 0
    try:
        return removal.uninstall(load_manifest(), projects)
    finally:
        lock.release()


def describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    if isinstance(exc, (InstallError, OSError)):
        return str(exc)
    return f"unexpected {exc.__class__.__name__}: {str(exc)[:200]}"


def main() -> int:
    relative = relative_settings()
    if relative:
        say(f"error: {', '.join(relative)} is a relative path, which every program would resolve against its "
            "own working directory; set an absolute path (e.g. \"$PWD/...\"), then run install.sh again")
        return 1
    try:
        if action == "install":
            install()
            return 0
        return uninstall()
    except Exception as exc:  # noqa: BLE001 - the one edge: a clear message, never a traceback
        say(f"error: {describe(exc)}")
        return 1
    except KeyboardInterrupt:
        say("error: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
