"""Human (rich) output of `researcher`: tables on stdout, errors on stderr.

Every string that comes from the user's files, folders, configuration or a server (paths, names, document text,
error messages) is shown as itself: no rich markup, no :emoji: codes, and control characters (ESC, C0, C1, DEL,
bidirectional overrides) made visible as escapes, so a file name cannot restyle or drive the terminal."""

from __future__ import annotations

import re

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gsd_research.researcher.gateways.filesystem_gateway import REASONS

# C0 (but tab and newline), DEL, C1, and the bidirectional embedding/override/isolate controls
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value, multiline: bool = False) -> str:
    """`value` as text with its control characters shown as escapes (newlines kept when `multiline`)."""
    return (_CONTROL if multiline else _CONTROL_LINE).sub(_visible, str(value))


def safe(value, multiline: bool = False) -> str:
    """`value` ready to sit inside rich markup: cleaned, and its brackets escaped."""
    return escape(clean(value, multiline))


def console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, emoji=False, highlight=False)


def print_error(error: dict) -> None:
    err = console(stderr=True)
    err.print(f"[bold red]Error[/] ({safe(error.get('code'))}): {safe(error.get('message'))}")
    for tip in error.get("suggestions") or []:
        err.print(f"  → {safe(tip)}")


def _repos(out: Console, payload: dict) -> None:
    table = Table("name", "path", "file types", "indexed")
    for r in payload["repositories"]:
        table.add_row(safe(r["name"]), safe(r["path"]), safe(",".join(r["file_types"])),
                      "yes" if r.get("indexed") else "no")
    out.print(table)


def _index(out: Console, payload: dict) -> None:
    for r in payload["results"]:
        out.print(f"[bold]{safe(r['repository_name'])}[/]: {r['documents_indexed']} indexed, "
                  f"{r['documents_skipped']} unchanged, {r['documents_removed']} removed, {r['documents_failed']} "
                  f"failed, {r['fragments_created']} fragments in {r['elapsed_seconds']:.2f}s")
        for e in r["errors"]:
            out.print(f"  [yellow]skipped[/] {safe(e)}")
        for item in r.get("skipped", []):
            out.print(f"  [yellow]skipped[/] {safe(item['document_path'])}: {REASONS.get(item['reason'], 'not read')}")
        if r.get("repaired"):
            out.print(f"  [yellow]repaired[/] {safe(r['repaired'])}")
        for item in r.get("no_text", []):
            out.print(f"  [yellow]no text[/] {safe(item['document_path'])}: {safe(item['fix'])}")
    for f in payload.get("failed_repositories", []):
        out.print(f"[bold red]{safe(f['repository_name'])}[/]: {safe(f['error']['message'])}")


def _search(out: Console, payload: dict) -> None:
    docs = Table("#", "score", "repository", "document", title="Documents")
    texts: dict[str, str] = {}  # a fragment printed under its document points there ("see")
    for i, d in enumerate(payload["documents"], 1):
        docs.add_row(str(i), f"{d['score']:.4f}", safe(d["repository"]), safe(d["document_path"]))
        texts.update({f"{d['repository']}:{t['fragment_id']}": t["text"] for t in d["top_fragments"] if "text" in t})
    out.print(docs)
    for i, f in enumerate(payload["fragments"], 1):
        out.rule(f"{i}. {safe(f['repository'])}:{safe(f['document_path'])} #{f['fragment_index']} "
                 f"(score {f['score']:.4f}, {safe(f['match'])})")
        if f.get("breadcrumb"):
            out.print(f"[dim]in: {safe(f['breadcrumb'])}[/]")
        text = f.get("text") or texts.get(f"{f['repository']}:{f['fragment_id']}", "")
        out.print(clean(text, multiline=True), markup=False)
    meta = payload.get("metadata", {})
    if meta.get("truncated"):
        out.print(f"[dim]… more within a larger --max-tokens (now {meta.get('max_tokens')})[/]")
    for s in meta.get("skipped_repositories", []):
        out.print(f"[bold red]left out {safe(s['repository'])}[/] ({safe(s['code'])}): {safe(s['message'])}. "
                  f"Run: {safe(s['fix'])}")


def _status(out: Console, payload: dict) -> None:
    if payload.get("store") != "server":
        table = Table("repository", "documents", "fragments", "no text", "last indexed", "store", "embedding")
        for s in payload["repositories"]:
            table.add_row(safe(s["repository_name"]), str(s["total_documents"]), str(s["total_fragments"]),
                          str(s.get("documents_no_text", 0)), safe(s["last_indexed"] or "never"), safe(s["store"]),
                          safe(s["embedding_provider"]))
        out.print(table)
        _no_text(out, payload)
        return
    table = Table("repository", "documents", "fragments", "on server", "last indexed", "embedding",
                  title=f"Chroma server {safe(payload['chroma_url'])}",
                  caption="documents, fragments: this machine's record of what it indexed; on server: counted by the "
                          "server (none: it holds no collection for it; researcher index NAME)")
    for s in payload["repositories"]:
        held = s.get("server_fragments")
        table.add_row(safe(s["repository_name"]), str(s["local_documents"]), str(s["local_fragments"]),
                      "none" if held is None else str(held), safe(s["last_indexed"] or "never"),
                      safe(s["embedding_provider"]))
    out.print(table)
    _no_text(out, payload)


def _no_text(out: Console, payload: dict) -> None:
    for s in payload["repositories"]:
        if s.get("damaged"):
            out.print(f"[bold red]{safe(s['repository_name'])}: {safe(s['damaged'])}[/]")
        if s.get("documents_no_text"):
            out.print(f"{safe(s['repository_name'])}: no text in {safe(', '.join(s['no_text']))}. {safe(s['fix'])}")


def _repo_add(out: Console, payload: dict) -> None:
    r = payload["repository"]
    out.print(f"Added repository [bold]{safe(r['name'])}[/] for {safe(r['path'])}", soft_wrap=True)
    out.print(f"  file types: {safe(', '.join(r['file_types']))}; embedding: "
              f"{safe(r['embedding_provider'] or 'the default provider')}"
              f"{safe(' ' + r['embedding_model']) if r.get('embedding_model') else ''}", soft_wrap=True)
    out.print(f"  next: researcher index {safe(r['name'])}", soft_wrap=True)


def _repo_remove(out: Console, payload: dict) -> None:
    kept = "its index data deleted" if payload["index_deleted"] else "its index data kept (--keep-index)"
    out.print(f"Removed repository [bold]{safe(payload['removed'])}[/], {kept}", soft_wrap=True)


def _remove(out: Console, payload: dict) -> None:
    out.print(f"Removed [bold]{safe(payload['removed'])}[/] from repository {safe(payload['repository'])}'s index",
              soft_wrap=True)


def _config_show(out: Console, payload: dict) -> None:
    config = payload["config"]
    table = Table("setting", "value", title=f"researcher configuration ({safe(payload['path'])})")
    for key, value in config.items():
        if key != "repositories":
            table.add_row(safe(key), "—" if value is None else safe(value))
    out.print(table)
    repos = Table("repository", "path", "file types", "embedding")
    for r in config.get("repositories") or []:
        repos.add_row(safe(r["name"]), safe(r["path"]), safe(",".join(r["file_types"])),
                      safe(" ".join(x for x in (r.get("embedding_provider"), r.get("embedding_model")) if x)
                           or "default"))
    out.print(repos if config.get("repositories") else "No repositories (researcher repo add NAME PATH)")


def _config_set(out: Console, payload: dict) -> None:
    out.print(f"Set [bold]{safe(payload['key'])}[/] = {safe(repr(payload['value']))} in {safe(payload['path'])}",
              soft_wrap=True)


def _config_path(out: Console, payload: dict) -> None:
    out.print(clean(payload["path"]), markup=False, soft_wrap=True)  # usable in $(researcher config path)


HANDLERS = {"repo list": _repos, "index": _index, "search": _search, "status": _status, "repo add": _repo_add,
            "repo remove": _repo_remove, "remove": _remove, "config show": _config_show, "config set": _config_set,
            "config path": _config_path}


def render(command: str, payload: dict) -> None:
    out = console()
    handler = HANDLERS.get(command)
    if handler:
        handler(out, payload)
        return
    import yaml

    out.print(clean(yaml.safe_dump(payload, sort_keys=False, allow_unicode=True).rstrip(), multiline=True),
              markup=False)
