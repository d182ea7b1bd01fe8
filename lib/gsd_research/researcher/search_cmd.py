"""`researcher search`: one query or a queries file, across one or all repositories, within --max-tokens."""

from __future__ import annotations

import json
import sys
import time

from gsd_research.core.errors import GsdError, NotFound, UsageError
from gsd_research.core.output import document_tokens, set_command, set_pretty
from gsd_research.researcher.answer import answer, compact_tokens

QUERIES_MAX_BYTES = 10_000_000  # --queries-file (or stdin): about 50,000 queries; more is refused unread


def _repositories(kb, repo_name: str | None):
    factory = kb.factory
    service = factory.repository_service
    repos = [service.get_repository(repo_name)] if repo_name else service.list_repositories()
    if not repos:
        raise NotFound("No repositories configured", suggestions=["researcher repo add NAME PATH"])
    indexed = [r for r in repos if factory.is_indexed(r)]
    if not indexed:
        names = " ".join(r.name for r in repos)
        raise NotFound(f"Not indexed yet: {names}", suggestions=[f"researcher index {repos[0].name}" if repo_name else "researcher index"])
    return indexed, [r.name for r in repos if r not in indexed]


def search_all(kb, queries: list[str], repos, n_fragments: int, n_documents: int, mode: str,
               skipped: list[dict] | None = None, indexing: list | None = None):
    """One `Ranking` per query over all the repositories (`search_repositories`, which fills `skipped` and
    `indexing`)."""
    from gsd_research.researcher.services.search_service import search_repositories

    services = [kb.factory.search_service(repo) for repo in repos]
    return search_repositories(services, queries, n_fragments, n_documents, mode, skipped, indexing)


def notes(skipped: list[dict], indexing: list[tuple[str, bool]]) -> dict:
    """An answer's metadata on the repositories left out (damaged) and those an index run has not finished."""
    meta: dict = {"skipped_repositories": skipped} if skipped else {}
    if indexing:
        from gsd_research.researcher.health import unfinished

        meta["note"] = unfinished(indexing)
    return meta


def run_one(kb, text: str, repo_name, n_fragments: int, n_documents: int, mode: str, max_tokens: int,
            led=None) -> dict:
    """The answer to `text`; `led`, the ledger of the session, adds references and a cursor (see answer)."""
    started = time.perf_counter()
    repos, not_indexed = _repositories(kb, repo_name)
    skipped: list[dict] = []
    indexing: list[tuple[str, bool]] = []
    ranking = search_all(kb, [text], repos, n_fragments, n_documents, mode, skipped, indexing)[0]
    left_out = {s["repository"] for s in skipped}
    meta = {"repositories": [r.name for r in repos if r.name not in left_out], "mode": mode,
            "elapsed_ms": round((time.perf_counter() - started) * 1000, 1)}
    if not_indexed:
        meta["not_indexed"] = not_indexed
    meta.update(notes(skipped, indexing))
    set_command(kb.command or "search")
    set_pretty(getattr(kb, "pretty", False))
    return answer(ranking, {"query": text, "metadata": meta}, {r.name: r.path for r in repos}, max_tokens,
                  document_tokens, led=led)


def _read_queries(path: str) -> list[tuple[int, object, str | None, dict | None]]:
    """(line number, id, query, error) per non-blank line. A line without an id gets its line number as id;
    every answer line also carries `line`, so two lines can never be told apart only by a made-up id."""
    from gsd_research.core.input_files import read_file, read_stdin

    try:
        data = read_stdin(QUERIES_MAX_BYTES, what="queries file") if path == "-" else \
            read_file(path, QUERIES_MAX_BYTES, what="queries file")
        text = data.decode("utf-8")
    except (NotFound, OSError, UnicodeDecodeError) as exc:  # researcher's contract: a usage error
        why = "not found" if isinstance(exc, NotFound) else exc.__class__.__name__
        raise UsageError(f"Cannot read queries file {path}: {why}",
                         suggestions=['One JSON object per line: {"id": "q1", "query": "..."}']) from None
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if not isinstance(item, dict) or not isinstance(item.get("query"), str) or not item["query"].strip():
            qid = item.get("id", n) if isinstance(item, dict) else n  # the caller's id when it gave one
            out.append((n, qid, None, UsageError(
                f"line {n}: expected {{\"id\": …, \"query\": \"non-empty text\"}}").to_dict()))
        else:
            out.append((n, item.get("id", n), item["query"].strip(), None))
    return out


def _line(n: int, qid, query: str, ranking, roots: dict[str, str], max_tokens: int, meta: dict) -> dict:
    """One query's line; a line cut by its budget carries its own cursor, written before the line is printed
    (no references: each line stands alone)."""
    from gsd_research.core import session

    led = session.Ledger(None, True)
    try:
        line = answer(ranking, {"id": qid, "line": n, "query": query, "metadata": meta}, roots, max_tokens,
                      compact_tokens, led=led)
        if led.cursor is not None:
            session.write_cursor(led.cursor_token, led.cursor)
        return line
    except UsageError as exc:
        return {"id": qid, "line": n, "query": None, "error": exc.to_dict()}


def _rankings(kb, queries: list[str], repos, n_fragments: int, n_documents: int, mode: str) -> list[tuple]:
    """(ranking or the error that stopped it, its metadata `notes`) per query: all at once; after a failure
    (a damaged repository searched alone) one by one, so that a query's failure is its line's alone."""
    def attempt(batch: list[str]) -> list[tuple]:
        skipped: list[dict] = []
        indexing: list[tuple[str, bool]] = []
        try:
            rankings = search_all(kb, batch, repos, n_fragments, n_documents, mode, skipped, indexing)
            return [(ranking, notes(skipped, indexing)) for ranking in rankings]
        except GsdError as exc:
            return [(exc, {})]

    found = attempt(queries) if queries else []
    if len(queries) > 1 and isinstance(found[0][0], GsdError):
        found = [attempt([query])[0] for query in queries]
    return found


def run_batch(kb, path: str, repo_name, n_fragments: int, n_documents: int, mode: str, max_tokens: int) -> None:
    """Print one JSON line per input line, in input order, each within `max_tokens`; a query that fails says so
    on its line."""
    from gsd_research.core.output import dumps
    from gsd_research.core.secrets import scrub

    items = _read_queries(path)
    repos, _ = _repositories(kb, repo_name)
    roots = {r.name: r.path for r in repos}
    valid = [q for _, _, q, err in items if err is None]
    results = iter(_rankings(kb, valid, repos, n_fragments, n_documents, mode))
    for n, qid, query, err in items:
        if err is None:
            ranking, meta = next(results)
            err = ranking.to_dict() if isinstance(ranking, GsdError) else None
        line = {"id": qid, "line": n, "query": None, "error": err} if err is not None else \
            _line(n, qid, query, ranking, roots, max_tokens, meta)
        sys.stdout.write(scrub(dumps(line)) + "\n")
    sys.stdout.flush()
