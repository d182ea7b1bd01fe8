"""Recovery before an index run: the stores and checksums.json brought back into agreement (a crash's
journal replayed, a damaged keyword index set aside, orphans removed)."""

from __future__ import annotations

from gsd_research.researcher import log
from gsd_research.researcher.chunking import VERSION as CHUNKING_VERSION
from gsd_research.researcher.gateways.lexical_gateway import LexicalStoreDamaged


class StoreRecovery:
    """The recovery half of `IndexService` (which provides the stores, `checksums` and `chroma`)."""

    def _verify_store(self) -> None:
        """Once per run before writing: the vector store holds exactly what the checksums vouch for."""
        if getattr(self, "_verified", False):
            return
        self._verified = True
        if self.chroma.count() != sum(m.fragment_count for m in self.checksums.values()):
            self._reconcile()

    def _load_state(self) -> None:
        try:
            self.lexical.count()
        except LexicalStoreDamaged as exc:  # set aside, and everything indexed again (both stores agree then)
            aside = self.lexical.set_aside()
            log.event("index.repair", repository=self.name, damaged=str(aside))
            self.repaired = f"{exc.message}; moved aside to {aside.name}, every document indexed again"
            self._reset()
        checksums = self.state.load_checksums()
        meta = self.state.load_meta()
        journal = self.state.load_journal()
        if checksums is None or (meta.get("embedding") and meta["embedding"] != self.embedding.signature) or \
                (checksums and meta.get("chunking") != CHUNKING_VERSION):
            log.event("index.reset", repository=self.name, reason="corrupt state, embedding or chunking change")
            self._reset()
            checksums = {}
        self.checksums = checksums
        if journal:  # a crash while these documents were being written: drop whatever reached the stores
            log.event("index.recover", repository=self.name, documents=len(journal))
            self._delete_everywhere(journal)
            for path in journal:
                self.checksums.pop(path, None)
            self.state.save_checksums(self.checksums)
            self.state.clear_journal()
        if self.lexical.count() != sum(m.fragment_count for m in self.checksums.values()):
            self._reconcile()

    def _reset(self) -> None:
        self.chroma.delete_collection()
        self._chroma = None
        self.lexical.clear()
        self.state.save_checksums({})
        self.state.clear_journal()

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

    def _delete_everywhere(self, paths: list[str]) -> None:
        for start in range(0, len(paths), 500):
            part = paths[start:start + 500]
            self.chroma.collection.delete(where={"document_path": {"$in": part}})
            self.lexical.replace_documents(part, [])
