"""researcher.yaml (GSD_RESEARCH_HOME): its models, the repository names it allows, and the one service that
reads, edits and writes it (atomically)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from gsd_research.core.config import MEMORY_REPOSITORY as MEMORY
from gsd_research.core.config import atomic_write_text, home, memory_documents, parse_value
from gsd_research.core.errors import NotFound, RepositoryNotFound, StateNotWritable, UsageError

CONFIG_NAME = "researcher.yaml"
DEFAULT_FILE_TYPES = ["md", "txt", "pdf", "docx", "pptx", "xlsx", "html"]
PROVIDERS = ("chromadb", "ollama", "openai")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")  # safe as one folder name under repositories/
SUPPORTED_TYPES = ("md", "markdown", "txt", "text", "rst", "pdf", "docx", "pptx", "xlsx", "html", "htm",
                   "csv", "adoc", "asciidoc", "odt", "xhtml")
TOP_KEYS = ("default_embedding_provider", "default_embedding_model", "mcp_port", "chroma_url")
REPO_KEYS = ("path", "file_types", "embedding_provider", "embedding_model")
PORT_HINT = ["researcher config set mcp_port 8392  (a port from 1 to 65535)"]
PLAIN_DECIMAL = re.compile(r"[0-9]+")  # ASCII digits only (re.ASCII: no other scripts' digits)


def memory_repository() -> RepositoryConfig:
    """The research memory's repository: never read from researcher.yaml (a file that names another folder for
    it is ignored), so it lives where the rest of the checked state does."""
    folder = memory_documents()
    try:
        for path in (folder.parent, folder):  # an empty memory is an empty repository, not a missing folder
            path.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        pass  # no home yet: the index run names the missing folder
    return RepositoryConfig(name=MEMORY, path=str(folder), file_types=["md"])


NAME_RULE = "letters, digits, '.', '_' or '-', starting with a letter or digit, at most 63 characters"


def check_name(name: object) -> str:
    """`name` when it is a valid repository name, else a usage error (it is never used as a path)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise UsageError(f"Invalid repository name {str(name)[:80]!r}", suggestions=[f"Use {NAME_RULE}"])
    return str(name)


class RepositoryConfig(BaseModel):
    """Configuration for a single document repository."""

    name: str
    path: str
    file_types: list[str] = Field(default_factory=lambda: list(DEFAULT_FILE_TYPES))
    embedding_provider: str | None = None  # None: the config's default
    embedding_model: str | None = None

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        if not NAME_RE.fullmatch(name):
            raise ValueError(f"invalid repository name {name[:80]!r}: use {NAME_RULE}")
        return name


class ResearcherConfig(BaseModel):
    """Top-level configuration for the researcher tool."""

    repositories: list[RepositoryConfig] = Field(default_factory=list)
    default_embedding_provider: str = "chromadb"
    default_embedding_model: str | None = None
    mcp_port: int = Field(8392, ge=1, le=65535)  # `serve --http` listens there
    chroma_url: str | None = None  # a Chroma server (http://host:port) instead of the embedded store

    @field_validator("repositories")
    @classmethod
    def _memory_is_not_a_user_repository(cls, repos: list[RepositoryConfig]) -> list[RepositoryConfig]:
        return [r for r in repos if r.name != MEMORY]  # an older version registered it here

    @field_validator("mcp_port", mode="before")
    @classmethod
    def _port_not_bool(cls, value):
        if isinstance(value, bool):  # YAML's `true` would otherwise become port 1
            raise ValueError("a port is a number from 1 to 65535")
        return value

    @field_validator("chroma_url")
    @classmethod
    def _chroma_url_is_a_server_url(cls, value):
        if value is not None:
            from gsd_research.researcher.gateways.chroma_server import check_url

            check_url(value)  # ValueError: what is wrong with it
        return value

    def provider_of(self, repo: RepositoryConfig) -> tuple[str, str | None]:
        provider = repo.embedding_provider or self.default_embedding_provider
        model = repo.embedding_model or (self.default_embedding_model if provider != "chromadb" else None)
        return provider, model


def normalize_types(file_types: list[str]) -> list[str]:
    types = [t for t in dict.fromkeys(t.strip().lower().lstrip(".") for raw in file_types for t in str(raw).split(","))
             if t]
    unknown = [t for t in types if t not in SUPPORTED_TYPES]
    if unknown or not types:
        raise UsageError(f"Unsupported file type(s): {', '.join(unknown) or '(none given)'}",
                         suggestions=[f"Supported: {', '.join(SUPPORTED_TYPES)}"])
    return types


class RepositoryService:
    """Loads and saves researcher.yaml (a broken file is a clear usage error); adds, removes, lists and
    resolves its repositories, each read afresh (another process may have changed the file)."""

    def __init__(self) -> None:
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
        config = self.load()
        if any(r.name == name for r in config.repositories):
            raise UsageError(f"Repository '{name}' already exists",
                             suggestions=[f"researcher repo remove {name}", "Choose another name"])
        repo = RepositoryConfig(name=name, path=str(folder), embedding_provider=embedding_provider,
                                embedding_model=embedding_model)
        if file_types is not None:
            repo.file_types = normalize_types(file_types)
        config.repositories.append(repo)
        self.save(config)
        return repo

    def remove_repository(self, name: str) -> None:
        if name == MEMORY:
            raise UsageError(f"'{MEMORY}' is the research memory, not a repository of yours",
                             suggestions=["gsd-research recall --clear (removes what it kept)"])
        config = self.load()
        self.get_repository(name, config)  # RepositoryNotFound, naming the others
        config.repositories = [r for r in config.repositories if r.name != name]
        self.save(config)

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


def _port(raw: str) -> int:
    """A port as plain decimal digits only: YAML would also read 0x50, +80, 8_080 (and pydantic "080") as 80."""
    text = raw.strip()
    if not PLAIN_DECIMAL.fullmatch(text):
        raise UsageError(f"Invalid value for mcp_port: {text!r} is not a valid integer port (plain decimal digits, "
                         "from 1 to 65535)", suggestions=PORT_HINT)
    return int(text)


def _stored(config, key: str):
    """The value as saved (after validation), to echo what the file now holds."""
    parts = key.split(".")
    if len(parts) == 1:
        return getattr(config, key)
    repo = next(r for r in config.repositories if r.name == parts[1])
    return getattr(repo, parts[2])


def set_key(service: RepositoryService, key: str, raw: str) -> dict:
    config = service.load()
    if key == "mcp_port":
        value = _port(raw)
    else:
        value = None if raw.strip().lower() in ("", "null", "none", "~") else parse_value(raw)
    parts = key.split(".")
    if len(parts) == 1 and key in TOP_KEYS:
        target, field = config, key
    elif len(parts) == 3 and parts[0] == "repositories" and parts[2] in REPO_KEYS:
        target, field = service.get_repository(parts[1], config), parts[2]
        if field == "file_types":
            value = normalize_types(value if isinstance(value, list) else [str(value)])
    else:
        raise UsageError(f"Unknown configuration key '{key}'",
                         suggestions=[*TOP_KEYS, "repositories.NAME.file_types"])
    if field.endswith("embedding_provider") and value is not None and value not in PROVIDERS:
        raise UsageError(f"Unknown embedding provider '{value}'", suggestions=list(PROVIDERS))
    if isinstance(value, (int, float)) and field in ("default_embedding_model", "embedding_model", "chroma_url"):
        value = str(value)
    try:
        setattr(target, field, value)
        config = type(config).model_validate(config.model_dump(warnings=False))
    except ValidationError as exc:
        reason = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise UsageError(f"Invalid value for {key}: {reason[:200]}",
                         suggestions=PORT_HINT if field == "mcp_port" else []) from None
    except ValueError as exc:
        raise UsageError(f"Invalid value for {key}: {str(exc).splitlines()[0][:200]}") from None
    service.save(config)
    return {"key": key, "value": _stored(config, key), "path": str(service.path)}
