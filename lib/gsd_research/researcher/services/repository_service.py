"""researcher.yaml (GSD_RESEARCH_HOME) and the named document folders it lists: read, written atomically."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from gsd_research.core.errors import NotFound, RepositoryNotFound, StateNotWritable, UsageError
from gsd_research.researcher.config import (
    CONFIG_NAME,
    MEMORY,
    PROVIDERS,
    RepositoryConfig,
    ResearcherConfig,
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
    """Loads and saves researcher.yaml (a broken file is a clear usage error); adds, removes, lists and
    resolves its repositories, each read afresh (another process may have changed the file)."""

    def __init__(self) -> None:
        from gsd_research.core.config import home

        self.config_dir = home()
        self.path = self.config_dir / CONFIG_NAME

    def repo_dir(self, name: str) -> Path:
        """The state folder of repository `name`: one folder directly under repositories/ (check_name)."""
        return self.config_dir / "repositories" / check_name(name)

    def load(self) -> ResearcherConfig:
        if self.config_dir.exists() and not self.config_dir.is_dir():
            raise StateNotWritable(f"The state folder {self.config_dir} (GSD_RESEARCH_HOME) is not a directory",
                                   suggestions=["Point GSD_RESEARCH_HOME at a writable directory",
                                                "gsd-research doctor"])
        if not self.path.is_file():
            return ResearcherConfig()
        import yaml

        try:
            return ResearcherConfig.model_validate(yaml.safe_load(self.path.read_text(encoding="utf-8")) or {})
        except ValidationError as exc:
            where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                              for e in exc.errors())
            raise UsageError(f"Cannot read {self.path}: {where[:300]}",
                             suggestions=[f"Fix or delete {self.path}"]) from None
        except (yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"Cannot read {self.path}: {exc.__class__.__name__}: {str(exc)[:200]}",
                             suggestions=[f"Fix or delete {self.path}"]) from None

    def save(self, config: ResearcherConfig) -> None:
        import yaml

        from gsd_research.core.config import atomic_write_text

        atomic_write_text(self.path, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))

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
        state, memory, folder = self.config_dir.resolve(), (self.config_dir / MEMORY).resolve(), root.resolve()
        if folder in (state, memory) or memory in folder.parents:  # web pages passed off as yours
            raise UsageError(f"{root} holds the research memory's web pages, not your documents",
                             suggestions=["Give a folder of your own documents",
                                          f"researcher search --repo {MEMORY} searches the research memory"])
        if embedding_provider and embedding_provider not in PROVIDERS:
            raise UsageError(f"Unknown embedding provider '{embedding_provider}'",
                             suggestions=[f"Use one of: {', '.join(PROVIDERS)}"])
        config = self.load()
        if any(r.name == name for r in config.repositories):
            raise UsageError(f"Repository '{name}' already exists",
                             suggestions=[f"researcher repo remove {name}", "Choose another name"])
        repo = RepositoryConfig(name=name, path=str(folder), embedding_provider=embedding_provider,
                                embedding_model=embedding_model)
        repo.file_types = normalize_types(file_types) or repo.file_types
        config.repositories.append(repo)
        self.save(config)
        return repo

    def remove_repository(self, name: str) -> RepositoryConfig:
        if name == MEMORY:
            raise UsageError(f"'{MEMORY}' is the research memory, not a repository of yours",
                             suggestions=["gsd-research recall --clear (removes what it kept)"])
        config = self.load()
        repo = self.get_repository(name, config)
        config.repositories = [r for r in config.repositories if r.name != name]
        self.save(config)
        return repo

    def list_repositories(self) -> list[RepositoryConfig]:
        """The user's repositories: never the research memory (web text), searched only when named."""
        return list(self.load().repositories)

    def get_repository(self, name: str, config: ResearcherConfig | None = None) -> RepositoryConfig:
        config = config or self.load()
        check_name(name)
        if name == MEMORY:
            return memory_repository()
        for repo in config.repositories:
            if repo.name == name:
                return repo
        raise RepositoryNotFound(f"Unknown repository '{name}'",
                                 suggestions=[r.name for r in config.repositories] or ["researcher repo add NAME PATH"])
