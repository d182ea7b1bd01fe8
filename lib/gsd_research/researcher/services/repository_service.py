"""Repository CRUD: the named document folders the knowledge base indexes."""

from __future__ import annotations

from pathlib import Path

from gsd_research.core.errors import NotFound, RepositoryNotFound, UsageError
from gsd_research.researcher.config import (
    MEMORY,
    PROVIDERS,
    ConfigGateway,
    RepositoryConfig,
    check_name,
    memory_repository,
)

SUPPORTED_TYPES = ("md", "markdown", "txt", "text", "rst", "pdf", "docx", "pptx", "xlsx", "html", "htm",
                   "csv", "adoc", "asciidoc", "odt", "xhtml")


def normalize_types(file_types: list[str] | None) -> list[str] | None:
    if file_types is None:
        return None
    types = []
    for raw in file_types:
        for t in str(raw).split(","):
            t = t.strip().lower().lstrip(".")
            if t and t not in types:
                types.append(t)
    unknown = [t for t in types if t not in SUPPORTED_TYPES]
    if unknown or not types:
        raise UsageError(f"Unsupported file type(s): {', '.join(unknown) or '(none given)'}",
                         suggestions=[f"Supported: {', '.join(SUPPORTED_TYPES)}"])
    return types


class RepositoryService:
    """Adds, removes, lists and resolves repositories in researcher.yaml."""

    def __init__(self, config_gateway: ConfigGateway) -> None:
        self.config_gateway = config_gateway

    def add_repository(self, name: str, path: str, file_types: list[str] | None = None,
                       embedding_provider: str | None = None, embedding_model: str | None = None) -> RepositoryConfig:
        check_name(name)
        if name.casefold().replace("_", "-") == MEMORY:  # alike on a case-insensitive disk, or to a reader
            raise UsageError(f"'{name}' is reserved for the research memory (what fetch, search and deep read)",
                             suggestions=["Choose another name", f"researcher search --repo {MEMORY} searches it"])
        root = Path(path).expanduser()
        if not root.exists():
            raise NotFound(f"Path does not exist: {root}", suggestions=["Give the folder that holds the documents"])
        if not root.is_dir():
            raise UsageError(f"Not a directory: {root}", suggestions=["Give a folder, not a file"])
        from gsd_research.core.config import home

        state, memory, folder = home().resolve(), (home() / MEMORY).resolve(), root.resolve()
        if folder in (state, memory) or memory in folder.parents:  # web pages passed off as yours
            raise UsageError(f"{root} holds the research memory's web pages, not your documents",
                             suggestions=["Give a folder of your own documents",
                                          f"researcher search --repo {MEMORY} searches the research memory"])
        if embedding_provider and embedding_provider not in PROVIDERS:
            raise UsageError(f"Unknown embedding provider '{embedding_provider}'",
                             suggestions=[f"Use one of: {', '.join(PROVIDERS)}"])
        config = self.config_gateway.load()
        if any(r.name == name for r in config.repositories):
            raise UsageError(f"Repository '{name}' already exists",
                             suggestions=[f"researcher repo remove {name}", "Choose another name"])
        repo = RepositoryConfig(name=name, path=str(root.resolve()), embedding_provider=embedding_provider,
                                embedding_model=embedding_model)
        types = normalize_types(file_types)
        if types:
            repo.file_types = types
        config.repositories.append(repo)
        self.config_gateway.save(config)
        return repo

    def remove_repository(self, name: str) -> RepositoryConfig:
        if name == MEMORY:
            raise UsageError(f"'{MEMORY}' is the research memory, not a repository of yours",
                             suggestions=["gsd-research recall --clear (removes what it kept)"])
        config = self.config_gateway.load()
        repo = self.get_repository(name, config)
        config.repositories = [r for r in config.repositories if r.name != name]
        self.config_gateway.save(config)
        return repo

    def list_repositories(self) -> list[RepositoryConfig]:
        """The user's repositories: never the research memory (web text), searched only when named."""
        return list(self.config_gateway.load().repositories)

    def get_repository(self, name: str, config=None) -> RepositoryConfig:
        config = config or self.config_gateway.load()
        check_name(name)
        if name == MEMORY:
            return memory_repository()
        for repo in config.repositories:
            if repo.name == name:
                return repo
        names = [r.name for r in config.repositories]
        raise RepositoryNotFound(
            f"Unknown repository '{name}'",
            suggestions=names or ["researcher repo add NAME PATH"])
