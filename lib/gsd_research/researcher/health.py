"""Whether a store holds what the state record claims, decided by stamps rather than by counting.

Each index run that commits writes its (repository id, generation) into the keyword index and the vector
collection, then commits the record with that generation. So a store is sound when its stamp equals the
record's, or is one ahead while the record names documents in flight (a killed run: resumed by the next).
Any other stamp is a store from another repository, an older copy, or a record older than its stores:
damaged by construction, and `researcher index` rebuilds both stores from the documents.
"""

from __future__ import annotations

from gsd_research.core.errors import IndexDamaged
from gsd_research.researcher.models import Head

Stamp = tuple[str, int]


def stamp_problem(head: Head | None, stamp: Stamp | None) -> str | None:
    """What is wrong with a store stamped `stamp` under the record `head`, or None (unstamped: written before
    stamps, or only by research memory; it is stamped by the next run that commits)."""
    if head is None or stamp is None:
        return None
    repository_id, generation = stamp
    if repository_id != head.repository_id:
        return "belongs to another index (copied in from elsewhere)"
    if generation < head.generation:
        return f"is an older copy (generation {generation}; the index records {head.generation})"
    if generation > head.generation + (1 if head.in_flight else 0):
        return (f"is newer than the state record (generation {generation}; the record says {head.generation}: "
                "the record was restored from an older copy)")
    return None


def stamp_damage(repository: str, what: str, problem: str) -> IndexDamaged:
    """The error of a store whose stamp disagrees with the record; the one fix is the index run."""
    return IndexDamaged(f"The {what} of repository '{repository}' {problem}", suggestions=[
        f"Run: researcher index {repository} (sets the stores aside and indexes every document again)"])
