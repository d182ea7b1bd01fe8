"""`researcher serve`: the MCP server (stdio by default, streamable HTTP with --port); `mcp` imported lazily."""

from __future__ import annotations

from gsd_research.core.errors import GsdError

INSTRUCTIONS = ("Search the user's local document repositories (hybrid BM25 + vector ranking). "
                "search_documents finds which files matter; search_fragments returns the passages themselves.")


class KnowledgeBaseTools:
    """The six MCP tools as plain methods over the service factory (testable without a transport)."""

    def __init__(self, factory) -> None:
        self.factory = factory

    def _guard(self, fn, *args):
        try:
            return fn(*args)
        except GsdError as exc:
            return {"success": False, "error": exc.to_dict()}
        except Exception as exc:  # noqa: BLE001 - a tool call never crashes the server
            from gsd_research.researcher.gateways.docling_gateway import ConversionError

            code = "EXTRACTION_FAILED" if isinstance(exc, ConversionError) else "INTERNAL_ERROR"
            return {"success": False, "error": {"code": code, "message": str(exc)[:300]}}

    def _search(self, query: str, repository: str | None, n_fragments: int, n_documents: int):
        from types import SimpleNamespace

        from gsd_research.researcher import search_cmd

        kb = SimpleNamespace(factory=self.factory)
        repos, _ = search_cmd._repositories(kb, repository)
        roots = {r.name: r.path for r in repos}
        docs, frags = search_cmd.search_all(kb, [query], repos, n_fragments, n_documents, "hybrid")[0]
        return docs, frags, roots

    def add_to_index(self, repository: str, file_path: str) -> dict:
        def run():
            repo = self.factory.repository_service.get_repository(repository)
            chunked = self.factory.index_service(repo).index_file(file_path)
            return {"success": True, "repository": repository, "document_path": chunked.document_path,
                    "fragments": len(chunked.fragments)}

        return self._guard(run)

    def remove_from_index(self, repository: str, document_path: str) -> dict:
        def run():
            repo = self.factory.repository_service.get_repository(repository)
            return {"success": True, "repository": repository,
                    "removed": self.factory.index_service(repo).remove_document(document_path)}

        return self._guard(run)

    def search_fragments(self, query: str, repository: str | None = None, n_results: int = 10) -> dict:
        def run():
            from gsd_research.researcher.search_cmd import fragment_json

            _, frags, _ = self._search(query, repository, n_results, 1)
            return {"success": True, "query": query, "fragments": [fragment_json(f) for f in frags]}

        return self._guard(run)

    def search_documents(self, query: str, repository: str | None = None, n_results: int = 5) -> dict:
        def run():
            from gsd_research.researcher.search_cmd import document_json

            docs, _, roots = self._search(query, repository, 3, n_results)
            return {"success": True, "query": query, "documents": [document_json(d, roots) for d in docs]}

        return self._guard(run)

    def list_repositories(self) -> dict:
        return self._guard(lambda: {"success": True, "repositories": [
            {**r.model_dump(), "indexed": self.factory.is_indexed(r)}
            for r in self.factory.repository_service.list_repositories()]})

    def get_index_status(self, repository: str | None = None) -> dict:
        def run():
            service = self.factory.repository_service
            repos = [service.get_repository(repository)] if repository else service.list_repositories()
            return {"success": True, "repositories": [self.factory.index_service(r).get_stats().model_dump(mode="json")
                                                      for r in repos]}

        return self._guard(run)


def build_server(factory):
    from mcp.server.mcpserver import MCPServer

    tools = KnowledgeBaseTools(factory)
    server = MCPServer("researcher", instructions=INSTRUCTIONS)

    @server.tool()
    def add_to_index(repository: str, file_path: str) -> dict:
        """Index (or re-index) one file of a configured repository."""
        return tools.add_to_index(repository, file_path)

    @server.tool()
    def remove_from_index(repository: str, document_path: str) -> dict:
        """Remove a document from a repository's index."""
        return tools.remove_from_index(repository, document_path)

    @server.tool()
    def search_fragments(query: str, repository: str | None = None, n_results: int = 10) -> dict:
        """Search for text fragments (passages) across indexed repositories, best first."""
        return tools.search_fragments(query, repository, n_results)

    @server.tool()
    def search_documents(query: str, repository: str | None = None, n_results: int = 5) -> dict:
        """Search for documents across indexed repositories, each with its best fragments."""
        return tools.search_documents(query, repository, n_results)

    @server.tool()
    def list_repositories() -> dict:
        """List all configured repositories with their settings."""
        return tools.list_repositories()

    @server.tool()
    def get_index_status(repository: str | None = None) -> dict:
        """Indexing statistics for one or all repositories."""
        return tools.get_index_status(repository)

    return server


def serve(factory, port: int | None = None, host: str = "127.0.0.1") -> None:
    try:
        server = build_server(factory)
    except ImportError:
        raise GsdError("The 'mcp' package is not installed", code="ENVIRONMENT_MISSING",
                       suggestions=["pip install 'mcp>=1.2'"]) from None
    if port:
        serve_http(server, host, port)
    else:
        server.run("stdio")


def serve_http(server, host: str, port: int) -> None:
    """Streamable HTTP behind a bearer token. A port is open to every local user and process (and, through DNS
    rebinding, to web pages), and the tools read and index files: a loopback bind alone protects nothing."""
    import sys

    import uvicorn

    from gsd_research.researcher.mcp_auth import BearerAuth, token_file

    token, path = token_file()
    app = BearerAuth(server.streamable_http_app(host=host), token)
    print(f"researcher: MCP over HTTP at http://{host}:{port}/mcp; every request needs the header "
          f"'Authorization: Bearer {token}' (the token is kept in {path}, mode 0600)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
