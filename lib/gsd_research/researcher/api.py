"""The knowledge base for other capabilities: Markdown documents in, ranked passages out.

A document written here is searchable at once through the lexical index (provisional fragments, written
without loading pydantic, the embedding model or Chroma, so a command on a hot path stays fast); its
embedding happens later in a detached worker (`researcher.embed_worker`), whose index run re-chunks the
document properly and stores it in both stores. Evicted documents leave the lexical index at once and
the vector store at the worker's next run.
"""

from __future__ import annotations

import hashlib
import os
import re
from contextlib import contextmanager
from pathlib import Path

from gsd_research.core.errors import GsdError, RepositoryNotFound, UsageError

PROVISIONAL_CHARS = 1000  # about 250 tokens: the size of the index run's fragments


def repo_dir(name: str) -> Path:
    from gsd_research.core.config import home

    return home() / "repositories" / name


def keyword_index(name: str) -> Path:
    """The keyword index file of repository `name`."""
    from gsd_research.researcher.state import KEYWORDS

    return repo_dir(name) / KEYWORDS


def repository_folder(name: str) -> Path | None:
    """The folder of repository `name` from researcher.yaml (read without the pydantic models), or None; the
    research memory's is fixed under GSD_RESEARCH_HOME, whatever the file says."""
    from gsd_research.core.config import MEMORY_REPOSITORY, home, load_user_config, memory_documents

    if name == MEMORY_REPOSITORY:
        return memory_documents()
    try:
        data = load_user_config(home() / "researcher.yaml")
    except GsdError:  # unreadable or broken: ensure_repository reports it properly
        return None
    for repo in data.get("repositories") or []:
        if isinstance(repo, dict) and repo.get("name") == name and repo.get("path"):
            return Path(str(repo["path"]))
    return None


def ensure_repository(name: str, folder: Path) -> Path:
    """Register `name` for the Markdown documents in `folder` unless it is registered; its folder."""
    known = repository_folder(name)
    if known is not None:
        private_dirs(known)
        return known
    private_dirs(folder)
    from gsd_research.researcher.config import RepositoryService

    try:
        RepositoryService().add_repository(name, str(folder), ["md"])
    except GsdError:
        if repository_folder(name) is None:  # not a concurrent registration of the same name
            raise
    return repository_folder(name) or folder


def provisional_fragments(text: str, title: str | None = None) -> list[str]:
    """Paragraphs packed to about PROVISIONAL_CHARS, each fragment prefixed with the title and the heading
    path where it starts (the index run replaces them with the chunker's fragments)."""
    pieces: list[tuple[str, str]] = []  # (heading path, paragraph)
    path: list[tuple[int, str]] = []
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        heading = re.match(r"^(#{1,6})\s+(.+)$", para) if "\n" not in para else None
        if heading:
            path = [(lv, h) for lv, h in path if lv < len(heading.group(1))] + [(len(heading.group(1)), heading.group(2))]
        where = " > ".join(h for _, h in path)
        while len(para) > PROVISIONAL_CHARS:
            cut = max(para.rfind(". ", 0, PROVISIONAL_CHARS) + 1, para.rfind(" ", 0, PROVISIONAL_CHARS),
                      PROVISIONAL_CHARS // 2)
            pieces.append((where, para[:cut].strip()))
            para = para[cut:].strip()
        if para:
            pieces.append((where, para))
    out: list[tuple[str, str]] = []
    for where, piece in pieces:
        if out and len(out[-1][1]) + len(piece) + 2 <= PROVISIONAL_CHARS:
            out[-1] = (out[-1][0], out[-1][1] + "\n\n" + piece)
        else:
            out.append((where, piece))
    fragments = []
    for i, (where, body) in enumerate(out):
        prefix = " > ".join(p for p in (title, where) if p)
        fragments.append(body if i == 0 and body.startswith("# ") or not prefix else f"{prefix}\n{body}")
    return fragments


def chunk(text: str) -> list[str]:
    """The knowledge base's own fragments of a Markdown text (heading-aware, each with its heading path)."""
    from gsd_research.researcher.chunking import chunk_text

    return [f.text for f in chunk_text(text, "text.md")]


def fragment_id(document_path: str, index: int) -> str:
    """The index run's fragment id format (services.index_service.fragment_id)."""
    return hashlib.sha1(document_path.encode("utf-8")).hexdigest()[:16] + f":{index}"


@contextmanager
def _writing(name: str):
    """The lexical index of `name`, the state record marked written before and after: a search meanwhile (or
    after a kill) knows the keyword rows lead the embedding, and a pass begun in between does not cover them."""
    from gsd_research.researcher.gateways.lexical_gateway import LexicalGateway
    from gsd_research.researcher.state import StateGateway

    private_dirs(repo_dir(name))
    StateGateway(repo_dir(name)).mark_written()
    path = keyword_index(name)
    if not path.exists():  # private from the start (SQLite gives its -wal and -shm files the same mode)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    lexical = LexicalGateway(path)
    try:
        lexical.conn.execute("PRAGMA synchronous=NORMAL")  # WAL: commits without fsync, checkpoints durable
        yield lexical
    finally:
        lexical.close()
    StateGateway(repo_dir(name)).mark_written()


def put_documents(name: str, documents: list[tuple[str, str, str | None]]) -> int:
    """Write (or replace) documents (path, text, title) of repository `name` and index them lexically at once,
    in one transaction; returns their provisional fragment count. Call `schedule_embedding` afterwards."""
    folder = repository_folder(name)
    if folder is None:
        raise RepositoryNotFound(f"Repository '{name}' is not registered")
    from gsd_research.core.config import atomic_write_text

    rows: list[tuple[str, str, str, int, str]] = []
    with _writing(name) as lexical:
        for rel_path, text, title in documents:
            target = _inside(folder, rel_path)
            private_dirs(target.parent)
            atomic_write_text(target, text, durable=False)  # no fsync: an agent waits, and it can be written again
            rows += [(fragment_id(rel_path, i), frag, rel_path, i, "")  # no breadcrumb until the index run
                     for i, frag in enumerate(provisional_fragments(text, title))]
        lexical.replace_documents([rel for rel, _, _ in documents], rows)
    return len(rows)


def read_document(name: str, rel_path: str) -> str | None:
    folder = repository_folder(name)
    if folder is None:
        return None
    try:
        return _inside(folder, rel_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, GsdError):
        return None


def remove_documents(name: str, rel_paths: list[str]) -> int:
    """Evict documents: files and lexical rows now, vector fragments at the worker's next run."""
    folder = repository_folder(name)
    if folder is None or not rel_paths:
        return 0
    removed = 0
    with _writing(name) as lexical:
        for rel in rel_paths:
            try:
                _inside(folder, rel).unlink()
                removed += 1
            except (FileNotFoundError, GsdError):
                continue
        lexical.replace_documents(list(rel_paths), [])
    return removed


def _inside(folder: Path, rel_path: str) -> Path:
    """`folder/rel_path`, refusing paths that leave the folder."""
    target = (folder / rel_path).resolve()
    if not target.is_relative_to(folder.resolve()) or rel_path.startswith("/") or ".." in Path(rel_path).parts:
        raise UsageError(f"Document path escapes the repository: {rel_path}")
    return target


def private_dirs(folder: Path) -> None:
    """Create `folder` and its missing parents, each 0700 (mkdir's `parents` ignores the mode)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)


# -- the embedding worker --------------------------------------------------------------------------

def schedule_embedding(name: str) -> dict:
    """Start the detached embedding worker of `name` unless one runs; {"running", "started", "pid"}."""
    from gsd_research.researcher import embed_worker

    if embed_worker.alive(name):
        return {"running": True, "started": False, "pid": None}
    pid = embed_worker.spawn(name)
    if pid is None:
        return {"running": False, "started": False, "pid": None, "reason": "the last run failed recently"}
    return {"running": True, "started": True, "pid": pid}


def embedding_pending(name: str) -> bool:
    """Whether documents changed since the embedding worker's last complete run."""
    from gsd_research.researcher import embed_worker

    return embed_worker.pending(name)


def embedding_state(name: str) -> dict:
    """{"pending", "worker_pid", "last_failure"?}: what the background embedding of `name` is doing."""
    from gsd_research.researcher import embed_worker

    return embed_worker.state(name)


# -- search ------------------------------------------------------------------------------------------

def search(name: str, query: str, *, paths: list[str] | None = None, n_fragments: int = 10,
           max_tokens: int | None = None, mode: str = "auto") -> dict:
    """Ranked passages of repository `name` (the knowledge base's hybrid ranking), only from `paths` when
    given, their text within `max_tokens` in total. `mode` auto: hybrid once something is embedded, else
    lexical. Returns {"passages": [{document_path, fragment_index, text, score, match}], "mode", "note"?}."""
    from gsd_research.researcher.service_factory import ServiceFactory
    from gsd_research.researcher.services.search_service import filtered_search

    if paths is not None and not paths:
        return {"passages": [], "mode": "lexical"}
    factory = ServiceFactory()
    service = factory.search_service(factory.repository_service.get_repository(name))
    return filtered_search(service, query, paths=paths, n_fragments=n_fragments, max_tokens=max_tokens,
                           mode=mode)
