"""What other capabilities call to keep what they read in the research memory: one `record_*` each.

Recording never raises into the command that reads: a failure is logged (keys scrubbed) under
GSD_RESEARCH_HOME/logs/memory.log and reported as "failed". It runs in a thread started by the
`record_*` call, so its disk writes overlap the rest of the command (the summary, the report); the
command calls `.finish()` before it answers, and the thread is not a daemon: the process never exits with
a write in flight (one killed meanwhile leaves what the store's next writer sweeps). Keys are scrubbed from
every stored field.
"""

from __future__ import annotations

import threading

_STORE_NAMES = ("MemoryStore", "REPOSITORY", "now_iso")  # what verify reads of the memory's store


def __getattr__(name: str):
    """The store's names verify uses, loaded on first use (the record_* callers never pay for them)."""
    if name in _STORE_NAMES:
        from gsd_research.memory import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


DEFAULT_EMBED = "background"  # background: a detached worker embeds new entries; off: lexical only


def settings(config) -> dict:
    """memory.enabled, memory.max_mb, memory.embed and memory.page_cap_kb, with their defaults."""
    from gsd_research.memory.store import DEFAULT_MAX_MB, DEFAULT_PAGE_CAP_KB

    enabled = config.get("memory.enabled", True)
    if isinstance(enabled, str):
        enabled = enabled.strip().lower() not in ("0", "false", "no", "off", "")
    embed = config.get("memory.embed", DEFAULT_EMBED)
    embed = "off" if embed is False else str(embed if embed is not None else DEFAULT_EMBED).strip().lower()
    return {"enabled": bool(enabled), "max_mb": config.number("memory.max_mb", DEFAULT_MAX_MB),
            "embed": "off" if embed in ("off", "false", "no", "0") else "background",
            "page_cap_kb": max(1, config.number("memory.page_cap_kb", DEFAULT_PAGE_CAP_KB))}


def status() -> dict:
    """The memory's entries and its background embedding, for `researcher status`."""
    import gsd_research.researcher.api as kb
    from gsd_research.memory.store import REPOSITORY, MemoryStore, memory_dir

    out: dict = {"entries": 0, "bytes": 0}
    if (memory_dir() / "catalog.sqlite").exists():
        store = MemoryStore()
        try:
            out.update({k: v for k, v in store.stats().items() if k in ("entries", "bytes")})
        finally:
            store.close()
    return {**out, "embedding": kb.embedding_state(REPOSITORY)}


class Recording:
    """A recording under way in a thread; `finish` waits for it (bounded) and gives its status."""

    def __init__(self, target=None, status: str | None = None) -> None:
        self.status = status or "pending"
        self.stored: list[str] = []  # ids of the entries this recording added
        self._thread = None
        if target is not None:
            self._thread = threading.Thread(target=self._run, args=(target,), name="memory-record", daemon=False)
            self._thread.start()

    def _run(self, target) -> None:
        self.status, self.stored = target()

    def discard(self, timeout: float | None = None) -> None:
        """The command failed: remove what this recording stored (memory keeps what was answered only)."""
        if self.finish(timeout) != "stored" or not self.stored:
            return
        try:
            from gsd_research.memory.store import MemoryStore

            store = MemoryStore()
            try:
                store.remove(self.stored)
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001 - memory is never the reason a command fails
            _log(f"discard: {exc.__class__.__name__}: {exc}")

    def finish(self, timeout: float | None = None) -> str:
        """The recording's status once it is done ("pending" only when `timeout` ran out first)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return "pending"
        return self.status


def _start(config, build) -> Recording:
    """Check the settings, then build and keep the entries in a thread."""
    try:
        conf = settings(config)
    except Exception as exc:  # noqa: BLE001 - a bad memory setting must not fail the command
        _log(f"settings: {exc.__class__.__name__}: {exc}")
        return Recording(status="failed")
    if not conf["enabled"]:
        return Recording(status="off")
    return Recording(lambda: _keep(config, conf, build))


def _keep(config, conf: dict, build) -> tuple[str, list[str]]:
    try:
        import gsd_research.researcher.api as kb
        from gsd_research.core.secrets import known_secrets
        from gsd_research.memory.store import REPOSITORY, MemoryStore

        entries = [_scrubbed(e, known_secrets(config)) for e in build()]
        store = MemoryStore(page_cap=int(conf["page_cap_kb"] * 1024))
        try:
            kept = store.keep(entries) if entries else []
            store.evict(int(conf["max_mb"] * 1024 * 1024))
        finally:
            store.close()
        stored = [e.id for e, st in kept if st == "stored"]
        if stored and conf["embed"] == "background":
            kb.schedule_embedding(REPOSITORY)
        return ("stored" if stored else "known"), stored
    except Exception as exc:  # noqa: BLE001 - memory is never the reason a command fails
        _log(f"record: {exc.__class__.__name__}: {exc}")
        return "failed", []


def _scrubbed(entry, secrets: list[str]):
    from dataclasses import replace

    from gsd_research.core.secrets import redact_url, scrub

    def clean(value):
        return scrub(value, secrets) if isinstance(value, str) else value

    url = redact_url(entry.url, secrets) if isinstance(entry.url, str) else entry.url
    body = clean(entry.body.replace(entry.url, url)) if isinstance(entry.body, str) and entry.url else clean(entry.body)
    return replace(entry, body=body, url=url, title=clean(entry.title), query=clean(entry.query),
                   ref=redact_url(entry.ref, secrets) if isinstance(entry.ref, str) else entry.ref)


def _log(message: str) -> None:
    try:
        import os
        import time

        from gsd_research.core.config import home
        from gsd_research.core.private import open_private
        from gsd_research.core.secrets import scrub

        path = home() / "logs" / "memory.log"
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with os.fdopen(open_private(path), "a", encoding="utf-8") as fh:  # never through a planted symlink
            fh.write(scrub(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {message}")[:2000] + "\n")
    except Exception:  # noqa: BLE001 - logging must never raise
        pass


def _kinds(text: str) -> list[str]:
    from gsd_research.core.untrusted import scan

    return sorted({f["kind"] for f in scan(text or "")})


# -- producers -----------------------------------------------------------------------------------------

def record_fetch(rt, *, url: str, final_url: str, title: str | None, markdown: str,
                 warnings: list[dict] | None = None, extraction: str | None = None) -> Recording:
    """A page `fetch` read: its extracted Markdown, with the injection kinds found in it or in its hidden text."""

    def build():
        from gsd_research.memory.store import Entry

        kinds = sorted({k for w in warnings or [] for k in w.get("kinds", [])})
        return [Entry(kind="page", body=markdown, url=final_url or url, title=title,
                      provider=f"fetch:{extraction}" if extraction else "fetch", flags=kinds)]

    return _start(rt.config, build)


def record_search(rt, *, query: str, answer: dict, report_path: str | None = None,
                  report_text: str | None = None) -> Recording:
    """A `search` answer: each result (title, URL, snippet), the result set with its summary, the report."""

    def build():
        from gsd_research.memory.store import Entry

        provider = str(answer.get("provider") or "search")
        entries, lines = [], []
        for item in answer.get("results") or []:
            url, title, snippet = str(item.get("url") or ""), item.get("title"), str(item.get("snippet") or "")
            if url and snippet.strip():
                entries.append(Entry(kind="search_result", body=snippet, url=url, title=title, provider=provider,
                                     query=query, flags=_kinds(f"{title or ''}\n{snippet}")))
            lines.append(f"- [{title or url}]({url}): {snippet}")
        summary = str(answer.get("summary") or "")
        body = "\n\n".join(filter(None, [summary, "\n".join(lines)]))
        if body.strip():
            entries.append(Entry(kind="search", body=body, title=f"Search: {query}", provider=provider,
                                 query=query, flags=_kinds(body)))
        if report_text:
            entries.append(Entry(kind="report", body=report_text, title=f"Report: {query}", provider=provider,
                                 query=query, ref=report_path, flags=_kinds(report_text)))
        return entries

    return _start(rt.config, build)


def record_deep(config, *, query: str, job_id: str | None, message: dict) -> Recording:
    """A finished `deep` report with its numbered citations."""

    def build():
        from gsd_research.memory.store import Entry

        report = str(message.get("content") or "")
        if not report.strip():
            return []
        cites = [f"{c.get('n') or n}. [{c.get('title') or c.get('url')}]({c.get('url')})"
                 for n, c in enumerate(message.get("citations") or [], 1) if isinstance(c, dict) and c.get("url")]
        body = report + ("\n\n## Sources\n\n" + "\n".join(cites) if cites else "")
        return [Entry(kind="deep", body=body, title=f"Deep research: {query}", provider="perplexity",
                      query=query, ref=job_id, flags=_kinds(report))]

    return _start(config, build)
