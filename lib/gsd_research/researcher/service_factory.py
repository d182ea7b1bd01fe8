"""The composition root: builds gateways and services per repository, lazily."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from gsd_research.researcher.config import RepositoryConfig, RepositoryService, ResearcherConfig


class ServiceFactory:
    """Wires every dependency; `chroma_url` (option or config) selects a Chroma server over the embedded store."""

    def __init__(self, chroma_url: str | None = None) -> None:
        self.repository_service = RepositoryService()
        self._chroma_url = chroma_url
        self._embeddings: dict[tuple[str, str | None], object] = {}

    @functools.cached_property
    def config(self) -> ResearcherConfig:
        return self.repository_service.load()

    @property
    def chroma_url(self) -> str | None:
        return self._chroma_url or self.config.chroma_url

    def repo_dir(self, repository: RepositoryConfig) -> Path:
        return self.repository_service.repo_dir(repository.name)

    def lock(self, repository: RepositoryConfig, label: str):
        from gsd_research.researcher.gateways.lock_gateway import RepositoryLock

        return RepositoryLock(self.repo_dir(repository), label)

    def embedding_gateway(self, repository: RepositoryConfig):
        from gsd_research.researcher.gateways.embedding_gateway import EmbeddingGateway

        key = self.config.provider_of(repository)
        if key not in self._embeddings:
            self._embeddings[key] = EmbeddingGateway(*key)
        return self._embeddings[key]

    def chroma_factory(self, repository: RepositoryConfig):
        def build():
            from gsd_research.researcher.gateways.chroma_gateway import ChromaGateway, collection_name
            from gsd_research.researcher.state import VECTORS

            return ChromaGateway(self.repo_dir(repository) / VECTORS, collection_name(repository.name),
                                 url=self.chroma_url)

        return build

    def lexical_gateway(self, repository: RepositoryConfig):
        from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway
        from gsd_research.researcher.state import KEYWORDS

        return LexicalGateway(self.repo_dir(repository) / KEYWORDS)

    def index_service(self, repository: RepositoryConfig):
        from gsd_research.researcher.chunking import MAX_TOKENS
        from gsd_research.researcher.chunking import VERSION as CHUNKING_VERSION
        from gsd_research.researcher.gateways.docling_gateway import DoclingGateway
        from gsd_research.researcher.gateways.filesystem_gateway import FilesystemGateway
        from gsd_research.researcher.gateways.spool_gateway import SpoolGateway
        from gsd_research.researcher.services.index_service import IndexService
        from gsd_research.researcher.state import SPOOL, StateGateway

        embedding = self.embedding_gateway(repository)
        spool = SpoolGateway(self.repo_dir(repository) / SPOOL,
                             recipe=f"{embedding.signature}|max_tokens={MAX_TOKENS}|chunking={CHUNKING_VERSION}")
        return IndexService(repository.name, FilesystemGateway(Path(repository.path)), DoclingGateway(),
                            embedding, self.chroma_factory(repository), self.lexical_gateway(repository),
                            StateGateway(self.repo_dir(repository)), repository.file_types, spool,
                            store_label="server" if self.chroma_url else "embedded",
                            lock=self.lock(repository, f"researcher index {repository.name}"))

    def search_service(self, repository: RepositoryConfig):
        from gsd_research.researcher.services.search_service import SearchService

        return SearchService(repository.name, self.chroma_factory(repository), self.lexical_gateway(repository),
                             self.embedding_gateway(repository), self.repo_dir(repository), Path(repository.path))

    def is_indexed(self, repository: RepositoryConfig) -> bool:
        from gsd_research.researcher.state import StateGateway

        return StateGateway(self.repo_dir(repository)).exists()

    def delete_index(self, repository: RepositoryConfig) -> None:
        """Remove a repository's stored index (its collection on a Chroma server too), once no indexer writes it."""
        folder = self.repo_dir(repository)
        if not folder.exists() and not self.chroma_url:
            return
        lock = self.lock(repository, f"researcher repo remove {repository.name}")
        with lock.hold():
            if self.chroma_url:
                self.chroma_factory(repository)().delete_collection()
            for child in folder.iterdir():
                if child.name == lock.path.name:
                    continue
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        shutil.rmtree(folder, ignore_errors=True)
