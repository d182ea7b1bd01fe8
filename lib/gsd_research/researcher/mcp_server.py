"""`researcher serve`: the MCP server (stdio by default; with --port, streamable HTTP behind a bearer token).

Every tool answers one compact JSON document; a failure is a tool result marked `isError` whose text is the
error (`code`, `message`, `suggestions`). Search tools answer within `max_tokens` (cl100k, default 2000). `mcp`
is imported lazily.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from gsd_research.core.errors import EnvironmentMissing, GsdError, UsageError
from gsd_research.researcher.answer import DEFAULT_MAX_TOKENS

INSTRUCTIONS = ("Search the user's local document repositories (exact terms, BM25 and vector similarity fused). "
                "search_documents finds which files matter, with their best passages; search_fragments returns "
                "the passages themselves. Answers fit max_tokens (default 2000).")
LOCK_WAIT_SECONDS = 30.0  # an MCP call waits this long for an index run of the same repository
MAX_RESULTS = 100
MAX_PATH_CHARS = 4096
MODES = ("hybrid", "vector", "lexical")
TOKEN_FILE = "researcher-mcp.token"


def mcp_tokens(doc: dict) -> int:
    """Tokens of a tool answer as JSON (default separators: at least what the compact wire text costs)."""
    from gsd_research.core.tokens import count_tokens

    return count_tokens(json.dumps(doc, ensure_ascii=False, default=str))


def _count(n_results) -> int:
    if isinstance(n_results, bool) or not isinstance(n_results, int) or not 1 <= n_results <= MAX_RESULTS:
        raise UsageError(f"n_results must be an integer from 1 to {MAX_RESULTS} (got {str(n_results)[:40]})")
    return n_results


def check_path(path, name: str) -> None:
    """A file path argument a file system can take: text, no NUL, not absurdly long."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path or len(path) > MAX_PATH_CHARS \
            or any(len(part.encode("utf-8", "replace")) > 255 for part in path.split("/")):
        raise UsageError(f"{name} must be a file path (text without NUL characters, at most {MAX_PATH_CHARS} "
                         "characters, each part at most 255 bytes)",
                         suggestions=["Give the path of a file inside the repository's folder"])


def _guarded(method):
    """A tool call never raises (nor crashes the server): a failure is {"success": false, "error": {...}}."""
    @functools.wraps(method)
    def tool(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except GsdError as exc:
            return {"success": False, "error": exc.to_dict()}
        except Exception as exc:  # noqa: BLE001
            from gsd_research.core.edge import unexpected
            from gsd_research.core.errors import ExtractionFailed
            from gsd_research.core.external import excerpt
            from gsd_research.researcher.gateways.docling_gateway import ConversionError

            if isinstance(exc, ConversionError):  # the document's own text, fenced as the edge fences
                error = ExtractionFailed("The document could not be converted", details={"detail": excerpt(str(exc)[:300])})
            else:
                error = unexpected(exc)
            return {"success": False, "error": error.to_dict()}

    return tool


class KnowledgeBaseTools:
    """The six MCP tools as plain methods over the service factory (testable without a transport); their names,
    signatures and docstrings are the tools' (no return annotation: the answer is one text, not a schema)."""

    def __init__(self, factory) -> None:
        self.factory = factory

    def _search(self, query: str, repository: str | None, n_fragments: int, n_documents: int, max_tokens: int,
                keep: str, mode: str = "hybrid") -> dict:
        from types import SimpleNamespace

        from gsd_research.researcher import search_cmd
        from gsd_research.researcher.answer import answer

        if not isinstance(query, str) or not query.strip():
            raise UsageError("query must be a non-empty string")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise UsageError("max_tokens must be a positive integer")
        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)} (got {str(mode)[:40]})")
        kb = SimpleNamespace(factory=self.factory)
        repos, _ = search_cmd._repositories(kb, repository)
        skipped: list[dict] = []
        indexing: list[tuple[str, bool]] = []
        ranking = search_cmd.search_all(kb, [query], repos, n_fragments, n_documents, mode, skipped, indexing)[0]
        if keep == "documents":
            ranking.fragments = []
        else:
            ranking.documents = []
        meta = {"mode": mode, **search_cmd.notes(skipped, indexing)}
        out = answer(ranking, {"success": True, "query": query, "metadata": meta}, {r.name: r.path for r in repos},
                     max_tokens, mcp_tokens, option="max_tokens")
        out.pop("fragments" if keep == "documents" else "documents")
        out["metadata"] = out.pop("metadata")
        return out

    @_guarded
    def add_to_index(self, repository: str, file_path: str):
        """Index (or re-index) one file of a configured repository (a path inside its folder)."""
        check_path(file_path, "file_path")
        repo = self.factory.repository_service.get_repository(repository)
        chunked = self.factory.index_service(repo).index_file(file_path, wait=LOCK_WAIT_SECONDS)
        out = {"success": True, "repository": repository, "document_path": chunked.document_path,
               "fragments": len(chunked.fragments), "text_source": chunked.text_source}
        if chunked.text_source == "none":
            from gsd_research.researcher.services.index_service import no_text_fix

            out["no_text"] = True
            out["fix"] = no_text_fix(chunked.document_path, repository)
        return out

    @_guarded
    def remove_from_index(self, repository: str, document_path: str):
        """Remove a document from a repository's index."""
        check_path(document_path, "document_path")
        repo = self.factory.repository_service.get_repository(repository)
        return {"success": True, "repository": repository,
                "removed": self.factory.index_service(repo).remove_document(document_path, wait=LOCK_WAIT_SECONDS)}

    @_guarded
    def search_fragments(self, query: str, repository: str | None = None, n_results: int = 10,
                         max_tokens: int = DEFAULT_MAX_TOKENS, mode: str = "hybrid"):
        """Search for text fragments (passages) across indexed repositories, best first, within max_tokens.
        mode: hybrid (default), vector, or lexical (keywords only: works while a vector store is damaged)."""
        return self._search(query, repository, _count(n_results), 1, max_tokens, "fragments", mode)

    @_guarded
    def search_documents(self, query: str, repository: str | None = None, n_results: int = 5,
                         max_tokens: int = DEFAULT_MAX_TOKENS, mode: str = "hybrid"):
        """Search for documents across indexed repositories, each with its best passages, within max_tokens.
        mode: hybrid (default), vector, or lexical (keywords only: works while a vector store is damaged)."""
        return self._search(query, repository, 1, _count(n_results), max_tokens, "documents", mode)

    @_guarded
    def list_repositories(self):
        """List all configured repositories with their settings."""
        return {"success": True, "repositories": [{**r.model_dump(), "indexed": self.factory.is_indexed(r)}
                                                  for r in self.factory.repository_service.list_repositories()]}

    @_guarded
    def get_index_status(self, repository: str | None = None):
        """Indexing statistics for one or all repositories (documents without text are listed with the fix)."""
        service = self.factory.repository_service
        repos = [service.get_repository(repository)] if repository else service.list_repositories()
        return {"success": True, "repositories": [self.factory.index_service(r).get_stats().model_dump(mode="json")
                                                  for r in repos]}


TOOLS = ("add_to_index", "remove_from_index", "search_fragments", "search_documents", "list_repositories",
         "get_index_status")


def serve(factory, port: int | None = None, host: str = "127.0.0.1") -> None:
    """Serve the tools over stdio, or with `port` over streamable HTTP behind a bearer token: a port is open to
    every local user and process (and, through DNS rebinding, to web pages), and the tools read and index files,
    so a loopback bind alone protects nothing."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.types import CallToolResult, TextContent
    except ImportError:
        raise EnvironmentMissing("The 'mcp' package is not installed", suggestions=["pip install 'mcp>=1.2'"]) from None
    from gsd_research.core.output import dumps
    from gsd_research.core.secrets import scrub

    tools = KnowledgeBaseTools(factory)
    server = MCPServer("researcher", instructions=INSTRUCTIONS)
    for name in TOOLS:
        method = getattr(tools, name)

        @server.tool()
        @functools.wraps(method)  # the method's name, parameters and docstring make the tool's schema
        def tool(*args, _method=method, **kwargs):
            answer = _method(*args, **kwargs)  # compact JSON as text, `isError` when it is a failure
            return CallToolResult(content=[TextContent(type="text", text=scrub(dumps(answer)))],
                                  is_error=answer.get("success") is False)

    if not port:
        server.run("stdio")
        return
    import sys

    import uvicorn

    token, path = token_file()
    app = bearer_auth(server.streamable_http_app(host=host), token)
    print(f"researcher: MCP over HTTP at http://{host}:{port}/mcp; every request needs the header "
          f"'Authorization: Bearer {token}' (the token is kept in {path}, mode 0600)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


def token_file() -> tuple[str, Path]:
    """(token, its file under GSD_RESEARCH_HOME): the file's token when it is a private regular file of ours,
    else a new one written there (0600, never through a symlink)."""
    import secrets
    import stat

    from gsd_research.core.config import home
    from gsd_research.core.private import open_private

    path = home() / TOKEN_FILE
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() and not stat.S_IMODE(info.st_mode) & 0o077:
            token = path.read_text(encoding="ascii").strip()
            if len(token) >= 32:
                return token, path
        os.unlink(path)
    except (OSError, UnicodeDecodeError):
        pass
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(token + "\n")
    return token, path


def bearer_auth(app, token: str):
    """ASGI middleware: an HTTP request without `Authorization: Bearer <token>` gets 401 and never reaches MCP."""
    import hmac

    expected = f"Bearer {token}".encode("ascii")

    async def guarded(scope, receive, send):
        if scope.get("type") in ("http", "websocket"):
            headers = {name.lower(): value for name, value in scope.get("headers") or []}
            if not hmac.compare_digest(headers.get(b"authorization", b""), expected):
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="researcher"')]})
                await send({"type": "http.response.body", "body": b'{"error": "unauthorized: send the bearer token '
                                                                  b'of researcher-mcp.token"}'})
                return
        await app(scope, receive, send)

    return guarded
