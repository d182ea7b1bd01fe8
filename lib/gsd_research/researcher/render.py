"""Human (rich) output of `researcher`: tables on stdout, errors on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table


def print_error(error: dict) -> None:
    err = Console(stderr=True)
    err.print(f"[bold red]Error[/] ({escape(str(error.get('code')))}): {escape(str(error.get('message')))}",
              highlight=False)
    for tip in error.get("suggestions") or []:
        err.print(f"  → {escape(str(tip))}", highlight=False)


def _repos(out: Console, payload: dict) -> None:
    table = Table("name", "path", "file types", "indexed")
    for r in payload["repositories"]:
        table.add_row(r["name"], r["path"], ",".join(r["file_types"]), "yes" if r.get("indexed") else "no")
    out.print(table)


def _index(out: Console, payload: dict) -> None:
    for r in payload["results"]:
        out.print(f"[bold]{r['repository_name']}[/]: {r['documents_indexed']} indexed, {r['documents_skipped']} "
                  f"unchanged, {r['documents_removed']} removed, {r['documents_failed']} failed, "
                  f"{r['fragments_created']} fragments in {r['elapsed_seconds']:.2f}s")
        for e in r["errors"]:
            out.print(f"  [yellow]skipped[/] {e}", highlight=False)
    for f in payload.get("failed_repositories", []):
        out.print(f"[bold red]{f['repository_name']}[/]: {f['error']['message']}", highlight=False)


def _search(out: Console, payload: dict) -> None:
    docs = Table("#", "score", "repository", "document", title="Documents")
    for i, d in enumerate(payload["documents"], 1):
        docs.add_row(str(i), f"{d['score']:.4f}", d["repository"], d["document_path"])
    out.print(docs)
    for i, f in enumerate(payload["fragments"], 1):
        out.rule(f"{i}. {f['repository']}:{f['document_path']} #{f['fragment_index']} "
                 f"(score {f['score']:.4f}, {f['match']})")
        out.print(f["text"], highlight=False, markup=False)


def _status(out: Console, payload: dict) -> None:
    server = payload.get("store") == "server"
    columns = ["repository", "documents", "fragments", "last indexed", "store", "embedding"]
    table = Table(*columns, *(["on server"] if server else []),
                  title=f"Chroma server {escape(payload['chroma_url'])}" if server else None)
    for s in payload["repositories"]:
        row = [s["repository_name"], str(s["total_documents"]), str(s["total_fragments"]),
               str(s["last_indexed"] or "never"), s["store"], s["embedding_provider"]]
        if server:
            held = s.get("server_fragments")
            row.append("none" if held is None else str(held))
            if held is None:
                table.caption = "none: the server holds no collection for it (researcher index NAME)"
        table.add_row(*row)
    out.print(table)


def _repo_add(out: Console, payload: dict) -> None:
    r = payload["repository"]
    out.print(f"Added repository [bold]{escape(r['name'])}[/] for {escape(r['path'])}", highlight=False, soft_wrap=True)
    out.print(f"  file types: {', '.join(r['file_types'])}; embedding: "
              f"{escape(r['embedding_provider'] or 'the default provider')}"
              f"{escape(' ' + r['embedding_model']) if r.get('embedding_model') else ''}", highlight=False, soft_wrap=True)
    out.print(f"  next: researcher index {escape(r['name'])}", highlight=False, soft_wrap=True)


def _repo_remove(out: Console, payload: dict) -> None:
    kept = "its index data deleted" if payload["index_deleted"] else "its index data kept (--keep-index)"
    out.print(f"Removed repository [bold]{escape(payload['removed'])}[/], {kept}", highlight=False, soft_wrap=True)


def _remove(out: Console, payload: dict) -> None:
    out.print(f"Removed [bold]{escape(payload['removed'])}[/] from repository {escape(payload['repository'])}'s index",
              highlight=False, soft_wrap=True)


def _config_show(out: Console, payload: dict) -> None:
    config = payload["config"]
    table = Table("setting", "value", title=f"researcher configuration ({escape(payload['path'])})")
    for key, value in config.items():
        if key != "repositories":
            table.add_row(key, "—" if value is None else escape(str(value)))
    out.print(table)
    repos = Table("repository", "path", "file types", "embedding")
    for r in config.get("repositories") or []:
        repos.add_row(escape(r["name"]), escape(r["path"]), ",".join(r["file_types"]),
                      escape(" ".join(x for x in (r.get("embedding_provider"), r.get("embedding_model")) if x)
                             or "default"))
    out.print(repos if config.get("repositories") else "No repositories (researcher repo add NAME PATH)")


def _config_set(out: Console, payload: dict) -> None:
    out.print(f"Set [bold]{escape(payload['key'])}[/] = {escape(repr(payload['value']))} in {escape(payload['path'])}",
              highlight=False, soft_wrap=True)


def _config_path(out: Console, payload: dict) -> None:
    out.print(payload["path"], highlight=False, markup=False, soft_wrap=True)  # usable in $(researcher config path)


HANDLERS = {"repo list": _repos, "index": _index, "search": _search, "status": _status, "repo add": _repo_add,
            "repo remove": _repo_remove, "remove": _remove, "config show": _config_show, "config set": _config_set,
            "config path": _config_path}


def render(command: str, payload: dict) -> None:
    out = Console()
    handler = HANDLERS.get(command)
    if handler:
        handler(out, payload)
        return
    import yaml

    out.print(yaml.safe_dump(payload, sort_keys=False, allow_unicode=True).rstrip(), highlight=False, markup=False)
