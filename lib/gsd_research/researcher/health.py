"""One diagnosis of a repository's index, and its one repair.

Each index run that commits writes its (repository id, generation) into the keyword index and the vector
collection, then commits the state record with that generation. So a store is sound when its stamp equals the
record's (or is one ahead while the record names documents in flight: a killed run, which the next resumes)
and it holds the fragments the record counts. Anything else is damage, whose one fix is `researcher index
NAME`: `repair` sets the stores aside and the run indexes every document again. Search, status, recall, the
MCP tools and the resident process call `diagnose`; only the index run calls `repair`.

A reader holds no lock, so a writer may commit between its read of the record and its probes of the stores
(a stamp then one ahead of the record it read): damage is only what a second read of the record, after the
probes, confirms unmoved. A store error that is another process's lock is no finding (the gateways' rule).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gsd_research.core.errors import IndexDamaged
from gsd_research.researcher.gateways.filesystem_gateway import NotIndexable
from gsd_research.researcher.models import Head
from gsd_research.researcher.state import KEYWORDS as KEYWORDS_FILE
from gsd_research.researcher.state import Probe, StoreUnreadable

HEALTHY, PENDING, DAMAGED = "healthy", "pending", "damaged"
KEYWORDS, VECTORS = "keyword index", "vector store"
CHANGES_NAMED = 3  # changed documents `status` names; the counts cover all
INTERRUPTED = "(an index run was interrupted while it rewrote documents; the next run resumes it)"


@dataclass(frozen=True)
class Diagnosis:
    """healthy; pending (work left, still answerable); or damaged, with the sentence naming the store."""

    repository: str
    state: str = HEALTHY
    problem: str = ""
    store: str = ""  # the damaged store (KEYWORDS or VECTORS)
    unreadable: bool = False  # its file cannot be read: set aside, not emptied
    interrupted: bool = False  # short by a killed run's documents in flight: the next run resumes them

    def fix(self) -> str:
        why = "it resumes the interrupted run" if self.interrupted else \
            "sets the damaged stores aside and indexes every document again"
        return f"Run: researcher index {self.repository} ({why})"

    def error(self) -> IndexDamaged:
        return IndexDamaged(self.problem, suggestions=[self.fix()])

    def report(self) -> str | None:
        """What `status` says: the damage and its fix, or None."""
        return f"{self.problem}. {self.fix()}" if self.state == DAMAGED else None

    def raise_if_damaged(self) -> Diagnosis:
        if self.state == DAMAGED:
            raise self.error()
        return self


def unfinished(runs: list[tuple[str, bool]]) -> str:
    """The note of an answer from repositories an index run (repository, running) has not finished: one in
    progress, or one killed before it stored all it converted (until the next run resumes it)."""
    running = ", ".join(name for name, alive in runs if alive)
    killed = ", ".join(name for name, alive in runs if not alive)
    return " ".join(([f"An index run of {running} is in progress: documents it has not written yet are missing "
                      "from this answer; search again when it has finished."] if running else []) +
                    ([f"An index run of {killed} was interrupted: documents it had not stored yet are missing or "
                      f"out of date in this answer. Run: researcher index {killed.split(', ')[0]} (it resumes "
                      "the run)."] if killed else []))


def unreadable(repository: str, exc: StoreUnreadable) -> IndexDamaged:
    """The error of a store that failed while it was read or written."""
    what = KEYWORDS if exc.where.endswith(KEYWORDS_FILE) else VECTORS
    return Diagnosis(repository, DAMAGED, f"The {what} {exc.where} of repository '{repository}' {exc.detail}",
                     what, True).error()


def diagnose(repository: str, head: Head | None, keywords: Probe | None = None, vectors: Probe | None = None,
             writing: bool = False, documents: Path | None = None,
             reread: Callable[[], Head | None] | None = None) -> Diagnosis:
    """The diagnosis of the stores probed (None: not asked) against the record's `head`, read before them. An
    index run that is writing (`writing`: it holds the lock) makes its stores lag on purpose: pending. A reader
    without the lock passes `reread` (the record read again): damage it finds while the record moved is a
    commit it raced, pending; the next call sees it settled."""
    diagnosis = _diagnose(repository, head, keywords, vectors, writing, documents)
    if diagnosis.state == DAMAGED and reread is not None and reread() != head:
        return Diagnosis(repository, PENDING)
    return diagnosis


def _diagnose(repository: str, head: Head | None, keywords: Probe | None, vectors: Probe | None, writing: bool,
              documents: Path | None) -> Diagnosis:
    if writing:
        return Diagnosis(repository, PENDING)
    recorded = head or Head()
    for what, probe in ((KEYWORDS, keywords), (VECTORS, vectors)):
        if head is None and probe is not None and probe.stamp is not None:  # stores written, their record gone
            return Diagnosis(repository, DAMAGED, f"The state record of repository '{repository}' is missing "
                             f"(deleted, or unreadable) while its {what} {probe.where} holds an index", what)
        problem = _problem(recorded, probe, what == KEYWORDS and recorded.writes_pending, documents) if probe \
            else None
        if problem:
            return Diagnosis(repository, DAMAGED, f"The {what} {probe.where} of repository '{repository}' {problem}",
                             what, probe.unreadable is not None, problem.endswith(INTERRUPTED))
    return Diagnosis(repository, PENDING if head and (head.in_flight or head.writes_pending) else HEALTHY)


def _problem(head: Head, probe: Probe, writes_ahead: bool, documents: Path | None) -> str | None:
    if probe.unreadable:
        return probe.unreadable
    if not probe.exists:
        return f"is missing (deleted since the index recorded {head.fragments} fragments)" if head.fragments else None
    if probe.stamp is not None:
        repository_id, generation = probe.stamp
        if repository_id != head.repository_id:
            return "belongs to another index (copied in from elsewhere)"
        if generation < head.generation:
            return f"is an older copy (generation {generation}; the index records {head.generation})"
        if generation > head.generation + (1 if head.in_flight else 0):
            return (f"is newer than the state record (generation {generation}; the record says {head.generation}: "
                    "the record was restored from an older copy)")
    if probe.held is None or probe.held >= head.fragments:
        return None  # trusted unread, or whole
    if writes_ahead and (probe.held or not _holds_files(documents)) and not head.in_flight:
        return None  # research memory removed or rewrote rows ahead of the embedding
    why = INTERRUPTED if head.in_flight else "(emptied or truncated since)"
    return f"holds {probe.held} of the {head.fragments} fragments the index records {why}"


def _holds_files(folder: Path | None) -> bool:
    """Whether `folder` holds a regular file anywhere below it (stops at the first; links not followed)."""
    walk = os.walk(folder) if folder is not None else ()
    return any(Path(top, name).is_file() and not Path(top, name).is_symlink()
               for top, _, files in walk for name in files)


def repair(diagnosis: Diagnosis, lexical, vectors, state) -> str:
    """Both stores set aside (an unreadable keyword file moved aside, kept) and the record emptied, so that the
    index run indexes every document again; what was done, for the run's `repaired`."""
    done = "every document indexed and embedded again"
    if diagnosis.store == KEYWORDS and diagnosis.unreadable:
        done = f"the keyword index moved aside to {lexical.set_aside().name}; {done}"
    reset(lexical, vectors, state)
    return f"{diagnosis.problem}; {done}"


def reset(lexical, vectors, state) -> None:
    """Empty stores and a record without documents (the repository id and generation kept)."""
    vectors.discard()
    lexical.clear()
    state.save_checksums({}, in_flight=[])


def changed_since(checksums: dict, fs, file_types: list[str], walked: float = 0.0) -> str | None:
    """What changed in the repository's folder since its index recorded it, or None: documents not in it that
    appeared after the last complete index run began its walk (`walked`; else the index's last write), so one
    that run saw and could not index is not new; documents edited since their own record (changed since, and
    their checksum differs), documents gone; the first few named. A stale index, or a state folder restored from an
    older copy; the stores agree with the record either way, so only the folder tells. A file's change time
    counts as well as its modification time: `tar x`, `unzip`, `cp -p` and a rename keep the latter but set
    the former; a folder moved in keeps both on its files, so the change time of a new file's folders that
    hold no recorded document counts too (a rename sets it; an editor's swap file beside indexed documents
    does not make an unindexable one new). Unchanged files are only stat'ed."""
    last_write = walked or max((m.indexed_at.timestamp() for m in checksums.values()), default=0.0)
    new: list[str] = []
    edited: list[str] = []
    seen = set()
    recorded = {rel.rsplit("/", 1)[0] for rel in checksums if "/" in rel}
    folders: dict[str, float] = {f: 0.0 for rel in recorded for f in _ancestors(rel + "/x")}
    for rel in fs.iter_files(file_types):
        seen.add(rel)
        meta = checksums.get(rel)
        try:
            st = fs.absolute(rel).stat()
            changed = max(st.st_mtime, st.st_ctime)
            if meta is None:
                if max(changed, _folders_changed(fs, rel, folders)) > last_write:
                    new.append(rel)
            elif changed > meta.indexed_at.timestamp() and fs.compute_checksum(rel) != meta.checksum:
                edited.append(rel)
        except (OSError, NotIndexable):  # gone or unreadable since the walk: the index run names it
            continue
    gone = sorted(checksums.keys() - seen)
    if not new + edited + gone:
        return None
    named = [f"{kind} {rel}" for kind, paths in (("new", sorted(new)), ("edited", sorted(edited)),
                                                   ("removed", gone)) for rel in paths][:CHANGES_NAMED]
    more = "" if len(new) + len(edited) + len(gone) <= CHANGES_NAMED else ", …"
    return (f"The folder changed since the last index run: {len(new)} new, {len(edited)} edited, {len(gone)} "
            f"removed documents ({', '.join(named)}{more})")


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[:depth]) for depth in range(1, len(parts) + 1)]


def _folders_changed(fs, rel: str, seen: dict[str, float]) -> float:
    """The latest change time of the folders holding `rel` inside the repository (each stat'ed once; those
    holding recorded documents are in `seen` at 0)."""
    latest = 0.0
    for folder in _ancestors(rel):
        if folder not in seen:
            try:
                seen[folder] = (fs.base_path / folder).stat().st_ctime
            except OSError:
                seen[folder] = 0.0
        latest = max(latest, seen[folder])
    return latest
