"""The models of researcher.yaml (read and written by services.repository_service) and repository names."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, field_validator

from gsd_research.core.config import MEMORY_REPOSITORY as MEMORY
from gsd_research.core.config import memory_documents
from gsd_research.core.errors import UsageError

CONFIG_NAME = "researcher.yaml"
DEFAULT_FILE_TYPES = ["md", "txt", "pdf", "docx", "pptx", "xlsx", "html"]
PROVIDERS = ("chromadb", "ollama", "openai")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


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


def valid_name(name: object) -> bool:
    """A repository name that is safe as one folder name under GSD_RESEARCH_HOME/repositories/."""
    return isinstance(name, str) and bool(NAME_RE.fullmatch(name))


def check_name(name: object) -> str:
    """`name` when it is a valid repository name, else a usage error (it is never used as a path)."""
    if not valid_name(name):
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
        if not valid_name(name):
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
