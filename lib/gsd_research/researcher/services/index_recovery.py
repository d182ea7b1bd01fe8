"""Recovery before an index run: the stores and the state record brought back into agreement (a crash's
journal replayed, a damaged keyword index set aside, vectors the store lost embedded again, orphans removed)."""

from __future__ import annotations

from gsd_research.core.errors import GsdError
from gsd_research.researcher import log
from gsd_research.researcher.chunking import VERSION as CHUNKING_VERSION
from gsd_research.researcher.gateways.chroma_health import VectorStoreDamaged, lost, unreadable
from gsd_research.researcher.gateways.lexical_gateway import LexicalStoreDamaged
from gsd_research.researcher.models import Head
from gsd_research.researcher.state import keywords_short


class StoreRecovery:
    """The recovery half of `IndexService` (which provides the stores, `checksums` and `chroma`)."""

    def _verify_store(self) -> None:
        """Once per run before writing: the vector store holds exactly what the checksums vouch for."""
        if getattr(self, "_verified", False):
            return
        self._verified = True
        if self.chroma.count() != sum(m.fragment_count for m in self.checksums.values()):
            self._reconcile()

    def _load_state(self, repair: bool = False) -> None:
        self._check_keyword_file(repair)
        checksums = self.state.load_checksums()
        head = self.state.head() or Head()
        journal = head.in_flight
        if checksums is None or (head.embedding and head.embedding != self.embedding.signature) or \
                (checksums and head.chunking != CHUNKING_VERSION):
            log.event("index.reset", repository=self.name, reason="corrupt state, embedding or chunking change")
            self._reset()
            checksums = {}
        self.checksums = checksums
        if repair:
            self._check_stamps()
        self._check_vectors(repair)
        if journal:  # a crash while these documents were being written: drop whatever reached the stores
            log.event("index.recover", repository=self.name, documents=len(journal))
            self._remove(journal)
        if not repair:
            self._refuse_keyword_shortfall()
        if self.lexical.count() != sum(m.fragment_count for m in self.checksums.values()):
            self._reconcile()
            if repair:
                self._check_keywords()

    def _check_keyword_file(self, repair: bool) -> None:
        """A keyword index that is no database, or no regular file (a folder, a link in its place): a
        single-document call refuses it (INDEX_DAMAGED, the index run as its fix: writing one document must not
        reset the repository), an index run sets it aside and indexes everything again (both stores agree then)."""
        try:
            if self.lexical.held() is not None or repair:  # read-only first: only a run creates a missing file
                self.lexical.count()  # SQLite's own view through the connection the run writes with
        except LexicalStoreDamaged as exc:
            if not repair:
                raise
            aside = self.lexical.set_aside()
            log.event("index.repair", repository=self.name, damaged=str(aside))
            self.repaired = f"{exc.message}; moved aside to {aside.name}, every document indexed again"
            self._reset()

    def _refuse_keyword_shortfall(self) -> None:
        """A single-document call on a repository whose keyword index lacks fragments the checksums record
        (deleted or emptied by hand; measured as search measures it): INDEX_DAMAGED with the index run as fix."""
        expected = sum(m.fragment_count for m in self.checksums.values())
        held = self.lexical.held()
        head = self.state.head()
        if keywords_short(held, expected, bool(head and head.writes_pending), self.fs.base_path):
            raise self.lexical.lost(held, expected, vectors_answer=False)

    def _check_vectors(self, repair: bool) -> None:
        """Documents recorded as indexed whose vectors the store no longer holds (its folder or database
        deleted, truncated or unreadable, its collection emptied): an index run (`repair`) forgets them so that
        it embeds them again; a single-document call refuses (INDEX_DAMAGED, with the fix). Counted without
        Chroma where it can be: a warm re-index never imports it."""
        expected = sum(m.fragment_count for m in self.checksums.values())
        if not expected:
            return
        store = self._chroma_factory()
        try:
            held, damage = store.held(self.name), None
        except VectorStoreDamaged as exc:
            held, damage = 0, exc
        inside = store.damaged_inside() if held >= expected else None
        if inside:  # the count reads, the pages behind it do not: nothing in it is worth keeping
            held, damage = 0, unreadable(self.name, store.where(), inside)
        if held >= expected:
            return
        damage = damage or lost(self.name, store.where(), held, expected)
        if not repair:
            raise damage
        if held:
            counts = self.chroma.fragment_counts()
        else:  # nothing left worth keeping (a missing, empty or unreadable database): a new store
            store.discard()
            self._chroma, counts = None, {}
        gone = [p for p, m in self.checksums.items() if counts.get(p, 0) < m.fragment_count]
        for path in gone:  # embedded again by this run; not saved now: should the run fail, the checksums on
            self.checksums.pop(path)  # disk still record them and the next search still names the damage
        if set(gone) <= set((self.state.head() or Head()).in_flight):  # a killed run's documents: resumed, not repaired
            return
        self.repaired = f"{damage.message}; {len(gone)} document(s) embedded again"
        log.event("index.repair", repository=self.name, damaged=damage.message, documents=len(gone))

    def _check_keywords(self) -> None:
        """Documents recorded as indexed whose fragments the keyword index no longer holds (its file deleted
        or emptied by hand: SQLite starts an empty one): marked changed, so that this run indexes them again
        (their old vectors replaced, not left behind)."""
        counts = self.lexical.fragment_counts()
        short = sorted(p for p, m in self.checksums.items()
                       if counts.get(p, 0) < m.fragment_count and (self.fs.base_path / p).is_file())
        if not short:  # a document whose file is gone is removed by this run: nothing was lost
            return
        for path in short:
            self.checksums[path] = self.checksums[path].model_copy(update={"checksum": ""})
        if (self.state.head() or Head()).writes_pending:  # research memory rewrote their rows ahead: indexed, not repaired
            return
        note = (f"the keyword index {self.lexical.db_path} lacked the fragments of {len(short)} document(s); "
                "indexed again")
        self.repaired = f"{self.repaired}; {note}" if getattr(self, "repaired", None) else note[0].upper() + note[1:]
        log.event("index.repair", repository=self.name, damaged=str(self.lexical.db_path), documents=len(short))

    def _reset(self) -> None:
        self.chroma.delete_collection()
        self._chroma = None
        self.lexical.clear()
        self.state.save_checksums({}, in_flight=[])

    def _reconcile(self) -> None:
        """Stores and checksums disagree: remove every document the checksums do not vouch for, except the
        lexical rows of a document whose file is there: `researcher.api` writes those ahead of the embedding
        (research memory), and this run or the next stores the document whole."""
        lexical, vector, known = (set(self.lexical.get_all_document_paths()),
                                  set(self.chroma.get_all_document_paths()), set(self.checksums))
        ahead = {p for p in lexical - known - vector if self.fs.includes(p, self.file_types)}
        orphans = sorted((lexical | vector) - known - ahead)
        if orphans:
            self._delete_everywhere(orphans)
        log.event("index.reconcile", repository=self.name, orphans=len(orphans))

    def _check_stamps(self) -> None:
        """A store stamped by another repository or another generation (copied in, restored from an older copy,
        or beside a record restored from one): both stores rebuilt from the documents. The vector collection is
        opened only when its file is not the one the last commit stamped (a warm run never imports Chroma)."""
        from gsd_research.researcher.health import stamp_problem

        head = self.state.head()
        problems = [f"the keyword index {p}" for p in [stamp_problem(head, self.lexical.stamp())] if p]
        if head is not None and self.checksums:
            store = self._chroma_factory()
            if store.url is not None or store.file_identity() != head.vector_file:
                problems += [f"the vector store {p}" for p in [stamp_problem(head, self._vector_stamp(store))] if p]
        if not problems:
            return
        log.event("index.repair", repository=self.name, damaged="; ".join(problems))
        self._reset()
        self.checksums = {}
        note = "; ".join(problems)
        self.repaired = f"{note[0].upper()}{note[1:]}; every document indexed again"

    def _vector_stamp(self, store):
        try:
            return store.stamp() if store.held(self.name) and not store.damaged_inside() else None
        except GsdError:
            return None  # a store that cannot be read: _check_vectors names it

    def _delete_everywhere(self, paths: list[str], stamp: tuple[str, int] | None = None) -> None:
        for start in range(0, len(paths), 500):
            part = paths[start:start + 500]
            self.chroma.delete_documents(part)
            self.lexical.replace_documents(part, [], stamp)
        if stamp is not None:
            self.chroma.stamp_with(stamp)
