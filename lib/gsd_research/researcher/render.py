"""Human (rich) output of `researcher`: tables on stdout, errors on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_error(error: dict) -> None:
    err = Console(stderr=True)
    err.print(f"[bold red]Error[/] ({error.get('code')}): {error.get('message')}", highlight=False)
    for tip in error.get("suggestions") or []:
        err.print(f"  → {tip}", highlight=False)


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
    table = Table("repository", "documents", "fragments", "last indexed", "store", "embedding")
    for s in payload["repositories"]:
        table.add_row(s["repository_name"], str(s["total_documents"]), str(s["total_fragments"]),
                      str(s["last_indexed"] or "never"), s["store"], s["embedding_provider"])
    out.print(table)


def render(command: str, payload: dict) -> None:
    out = Console()
    handlers = {"repo list": _repos, "index": _index, "search": _search, "status": _status}
    handler = handlers.get(command)
    if handler:
        handler(out, payload)
        return
    import yaml

    out.print(yaml.safe_dump(payload, sort_keys=False, allow_unicode=True).rstrip(), highlight=False, markup=False)
