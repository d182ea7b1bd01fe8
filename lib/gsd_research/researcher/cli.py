"""`researcher`: the knowledge-base command line, a thin shell over the service factory, and its side of the
one edge (core.edge): payloads as JSON (--json) or human output."""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

import click

from gsd_research.core.errors import GsdError, NotFound, UsageError, error_class
from gsd_research.core.runtime import DEFAULT_MAX_TOKENS, AgentCommand, session_options


@dataclass
class KbContext:
    """Options of one call and the lazily built composition root."""

    json: bool = False
    pretty: bool = False
    chroma_url: str | None = None
    command: str | None = None
    argv: list[str] = field(default_factory=list)

    @functools.cached_property
    def factory(self):
        """Built on first use, once the state is known to be ours: a home or config another user controls
        is refused (STATE_UNSAFE) before anything reads it, as by gsd-research (the MCP server too)."""
        from gsd_research.core.private import unsafe_state
        from gsd_research.researcher.config import CONFIG_NAME
        from gsd_research.researcher.service_factory import ServiceFactory

        unsafe = unsafe_state(CONFIG_NAME)
        if unsafe is not None:
            raise unsafe
        return ServiceFactory(chroma_url=self.chroma_url)

    def wants_json(self) -> bool:
        """--json or --json-pretty, parsed or (a call that failed before parsing them) given."""
        return self.json or self.pretty or not {"--json", "--json-pretty"}.isdisjoint(self.argv)


def _set(name: str):
    def callback(ctx: click.Context, _param, value):
        if value:
            setattr(ctx.ensure_object(KbContext), name, value)
        return value

    return callback


def _chroma_url(ctx: click.Context, param, value):
    if value:
        from gsd_research.researcher.gateways.chroma_server import check_url

        try:
            check_url(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return _set("chroma_url")(ctx, param, value)


def kb_options(f):
    f = click.option("--chroma-url", default=None, expose_value=False, callback=_chroma_url,
                     help="Use a Chroma server (http://host:port) instead of the embedded store.")(f)
    f = click.option("--json-pretty", "pretty", is_flag=True, expose_value=False, callback=_set("pretty"),
                     help="Indented JSON (implies --json).")(f)
    f = click.option("--json", "json_", is_flag=True, expose_value=False, callback=_set("json"),
                     help="One JSON document on stdout (for agents).")(f)
    return f


class KbCommand(AgentCommand):
    context = KbContext


def kb_command(group: click.Group, name: str, **kwargs):
    def decorator(f):
        f = click.pass_obj(f)
        f = kb_options(f)
        return group.command(name, cls=KbCommand, **kwargs)(f)

    return decorator


def _version(ctx: click.Context, _param, value):
    if not value or ctx.resilient_parsing:
        return
    from gsd_research import __version__

    kb = ctx.ensure_object(KbContext)
    if kb.wants_json():
        from gsd_research.core.output import emit, success

        emit(success("version", {"version": __version__}), "--json-pretty" in kb.argv)
    else:
        click.echo(f"researcher {__version__}")
    ctx.exit(0)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Print the version (as JSON with --json) and exit.")
@kb_options
def cli():
    """Local knowledge base: index document folders (Markdown, text, PDF, DOCX, PPTX, XLSX, HTML) and
    search them with hybrid (BM25 + vector) ranking. Human output by default, --json for agents."""


@cli.group()
def repo():
    """Add, remove and list document repositories."""


@cli.group("config")
def config_group():
    """Show, set and locate the configuration (GSD_RESEARCH_HOME/researcher.yaml)."""


@kb_command(repo, "add")
@click.argument("name")
@click.argument("path")
@click.option("--file-types", multiple=True, help="Comma-separated types, e.g. md,pdf (default: all supported).")
@click.option("--embedding-provider", type=click.Choice(["chromadb", "ollama", "openai"]), default=None)
@click.option("--embedding-model", default=None)
def repo_add(kb, name, path, file_types, embedding_provider, embedding_model):
    """Add a repository NAME for the folder PATH."""
    repo_cfg = kb.factory.repository_service.add_repository(name, path, list(file_types) or None, embedding_provider,
                                                            embedding_model)
    return {"repository": repo_cfg.model_dump()}


@kb_command(repo, "remove")
@click.argument("name")
@click.option("--keep-index", is_flag=True, help="Keep the stored index data.")
def repo_remove(kb, name, keep_index):
    """Remove repository NAME (and its index data unless --keep-index)."""
    repo_cfg = kb.factory.repository_service.get_repository(name)
    if not keep_index:
        kb.factory.delete_index(repo_cfg)
    kb.factory.repository_service.remove_repository(name)
    return {"removed": name, "index_deleted": not keep_index}


@kb_command(repo, "list")
def repo_list(kb):
    """List the configured repositories."""
    factory = kb.factory
    repos = [{**r.model_dump(), "indexed": factory.is_indexed(r)} for r in factory.repository_service.list_repositories()]
    return {"repositories": repos, "total": len(repos)}


def _targets(kb, name: str | None):
    service = kb.factory.repository_service
    if name:
        return [service.get_repository(name)]
    repos = service.list_repositories()
    if not repos:
        raise NotFound("No repositories configured", suggestions=["researcher repo add NAME PATH"])
    return repos


@kb_command(cli, "index")
@click.argument("name", required=False)
@click.option("--wait", type=click.FloatRange(0, 86400), default=None,
              help="Seconds to wait for another index run of the same repository (default 300).")
def index(kb, name, wait):
    """Index repository NAME (all repositories when omitted); only new or changed files are processed."""
    from gsd_research.researcher import embed_worker
    from gsd_research.researcher.progress import index_with_progress

    targets = _targets(kb, name)
    dumped, failed = [], []
    for repo_cfg in targets:
        try:
            embed_worker.stop(repo_cfg.name)  # a background worker yields: this run does its work, never waits on it
            service = kb.factory.index_service(repo_cfg)
            dumped.append(index_with_progress(service, repo_cfg.name, wait).model_dump())
        except GsdError as exc:
            if name or len(targets) == 1:
                raise
            failed.append({"repository_name": repo_cfg.name, "error": exc.to_dict()})
    if failed and not dumped:
        raise error_class(failed[0]["error"]["code"])("No repository could be indexed", details={"failed": failed})
    keys = ("documents_indexed", "documents_skipped", "documents_failed", "documents_removed", "fragments_created",
            "documents_no_text")
    return {"results": dumped, "totals": {k: sum(d[k] for d in dumped) for k in keys},
            **({"failed_repositories": failed} if failed else {})}


@kb_command(cli, "remove")
@click.argument("name")
@click.argument("document")
def remove(kb, name, document):
    """Remove DOCUMENT (a path inside the repository) from repository NAME's index."""
    from gsd_research.researcher.mcp_server import check_path

    check_path(document, "DOCUMENT")  # as the MCP tool: no absurd path (the error would repeat all of it)
    repo_cfg = kb.factory.repository_service.get_repository(name)
    rel = kb.factory.index_service(repo_cfg).remove_document(document)
    return {"repository": name, "removed": rel}


@kb_command(cli, "search")
@click.argument("query", nargs=-1)
@session_options
@click.option("--repo", "repo_name", default=None, help="Search only this repository.")
@click.option("--fragments", "n_fragments", type=click.IntRange(0, 200), default=10, show_default=True)
@click.option("--documents", "n_documents", type=click.IntRange(0, 100), default=5, show_default=True)
@click.option("--mode", type=click.Choice(["hybrid", "vector", "lexical"]), default="hybrid", show_default=True,
              help="hybrid: exact terms, BM25 and vector similarity fused over all repositories.")
@click.option("--queries-file", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help='JSON lines {"id": ..., "query": ...}; one JSON line out per query, in input order.')
@click.option("--max-tokens", type=click.IntRange(1, 1_000_000), default=2000, show_default=True,
              help="Bound of one answer (each line with --queries-file), in cl100k tokens.")
def search(kb, query, repo_name, n_fragments, n_documents, mode, queries_file, max_tokens):
    """Search the indexed repositories for QUERY."""
    from gsd_research.researcher import search_cmd

    if queries_file:
        if query:
            raise UsageError("Give either QUERY or --queries-file, not both")
        return search_cmd.run_batch(kb, queries_file, repo_name, n_fragments, n_documents, mode, max_tokens)
    text = " ".join(query).strip()
    if not text:
        raise UsageError("search needs a QUERY", suggestions=['researcher search "how to configure X" --json'])
    from gsd_research.core import session
    from gsd_research.researcher import resident

    # references and cursors are for agents (JSON): the human answer is cut again as printed, so what it shows
    # is not what a ledger would record
    led = session.current() if kb.json or kb.pretty else None
    local = kb.chroma_url is None
    answer = resident.ask({"query": text, "repo": repo_name, "n_fragments": n_fragments,
                           "n_documents": n_documents, "mode": mode, "max_tokens": max_tokens, "pretty": kb.pretty,
                           "ledger": led is not None, "session": led and led.sid,
                           "fresh": bool(led and led.fresh)}) if local else None
    if answer is not None:
        if led is not None:
            led.adopt(answer.get("ledger"))
        return answer["ok"]
    payload = search_cmd.run_one(kb, text, repo_name, n_fragments, n_documents, mode, max_tokens, led)
    if local:
        resident.spawn()  # later searches from this home skip the start-up
    return payload


@kb_command(cli, "status")
@click.argument("name", required=False)
def status(kb, name):
    """Index statistics of repository NAME or of all repositories (with a Chroma server: what it holds;
    an unreachable server is a NETWORK_ERROR)."""
    factory = kb.factory
    repos = [factory.repository_service.get_repository(name)] if name else factory.repository_service.list_repositories()
    if factory.chroma_url:
        from gsd_research.researcher.gateways.chroma_gateway import ChromaGateway

        ChromaGateway(None, "", url=factory.chroma_url).heartbeat()  # NETWORK_ERROR when the server is unreachable
    stats = [factory.index_service(r).get_stats().model_dump(mode="json") for r in repos]
    if not factory.chroma_url:  # and the research memory's entries and background embedding
        from gsd_research.memory.api import status as memory_status

        memory = {"research_memory": memory_status()} if name in (None, "research-memory") else {}
        return {"repositories": stats, "store": "embedded", **memory}
    for repo_cfg, stat in zip(repos, stats, strict=True):  # what the server holds, asked of the server
        stat["local_documents"] = stat.pop("total_documents")  # this machine's record of what it indexed
        stat["local_fragments"] = stat.pop("total_fragments")
        probe = factory.chroma_factory(repo_cfg)().probe()
        stat["server_fragments"] = probe.held if probe.exists else None
    return {"repositories": stats, "store": "server", "chroma_url": factory.chroma_url, "counts": SERVER_COUNTS}


SERVER_COUNTS = {"local_documents": "documents this machine's index records say it indexed",
                 "local_fragments": "fragments this machine's index records say it sent to the server",
                 "server_fragments": "fragments the server holds for the repository (null: no collection there)"}


@kb_command(config_group, "show")
def config_show(kb):
    """Display the configuration."""
    return {"path": str(kb.factory.repository_service.path), "config": kb.factory.config.model_dump(mode="json")}


@kb_command(config_group, "set")
@click.argument("key")
@click.argument("value")
def config_set(kb, key, value):
    """Set KEY (e.g. default_embedding_provider, chroma_url, repositories.NAME.file_types) to VALUE."""
    from gsd_research.researcher.config import set_key

    return set_key(kb.factory.repository_service, key, value)


@kb_command(config_group, "path")
def config_path(kb):
    """Print the configuration file path."""
    return {"path": str(kb.factory.repository_service.path)}


@kb_command(cli, "serve")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Serve MCP over HTTP on this port.")
@click.option("--http", "http_", is_flag=True, help="Serve over HTTP on the configured mcp_port.")
@click.option("--host", default="127.0.0.1", show_default=True)
def serve(kb, port, http_, host):
    """Run the MCP server (stdio by default, streamable HTTP with --port or --http)."""
    from gsd_research.researcher.mcp_server import serve as run_server

    if http_ and not port:
        port = kb.factory.config.mcp_port
    run_server(kb.factory, port=port, host=host)


def run(argv: list[str] | None = None) -> int:
    """Invoke the CLI; errors become the JSON envelope (--json) or a clear message on stderr."""
    from gsd_research.core import edge, session
    from gsd_research.core.private import private_process

    kb = KbContext(argv=list(sys.argv[1:] if argv is None else argv))
    previous_umask = private_process()  # the knowledge base (Chroma's files too) is 0700/0600
    session.reset()
    try:
        return edge.run(edge.Edge(prog="researcher", name=lambda: kb.command, budget=lambda: _budget(kb.argv),
                                  pretty=lambda: kb.pretty, render=lambda rv: _print(kb, rv),
                                  report=lambda cmd, error: _report(kb, cmd, error)), cli, kb.argv, kb)
    finally:
        session.reset()  # the session of this call ends with it (in-process callers make many calls)
        os.umask(previous_umask)


def _budget(argv: list[str]) -> int:
    """search's --max-tokens when given (the other commands answer within the default)."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "--max-tokens" and argv[i + 1].isdigit():
            return max(100, int(argv[i + 1]))
    return DEFAULT_MAX_TOKENS


def _report(kb: KbContext, command: str | None, error: dict) -> None:
    from gsd_research.core.output import emit, failure

    if kb.wants_json():
        emit(failure(command or "researcher", error), "--json-pretty" in kb.argv)
    else:
        from gsd_research.researcher.render import print_error

        print_error(error)


def _print(kb: KbContext, rv) -> int:
    """The answer, once its session has recorded what it returned (and its cursor, when cut)."""
    from gsd_research.core import session
    from gsd_research.core.output import emit, success

    if not isinstance(rv, dict):
        return 0
    if kb.json or kb.pretty:
        emit(session.commit(success(kb.command or "researcher", rv)), kb.pretty)
        return 0
    from gsd_research.researcher.render import render

    render(kb.command or "", session.commit(rv))
    return 0


def main(argv: list[str] | None = None) -> None:
    from gsd_research.core.edge import leave

    leave(lambda: run(argv))
