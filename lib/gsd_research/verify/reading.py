"""Reading the sources of a research file: a few distinct pages at once, all within one deadline.

Each reading thread has its own HTTP client (a requests session is not safe to share between threads; the
cache behind them is the same), and every read is bounded by what is left of the deadline. Whatever has
not been read when the deadline comes is left out of the results: the caller reports it as unreachable.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from types import SimpleNamespace

from gsd_research.core.errors import ExtractionFailed, GsdError

THREADS = 3  # distinct sources read side by side


class Reader:
    """Reads URLs with up to THREADS threads; `results` yields (url, read.api.Source or GsdError)."""

    def __init__(self, rt, deadline, threads: int = THREADS) -> None:
        self.rt = rt
        self.deadline = deadline  # verify.deadline.Deadline
        self.threads = threads
        self.clients: list = []

    @property
    def upstream_requests(self) -> int:
        return sum(c.upstream_requests for c in self.clients)

    def results(self, urls: list[str]) -> Iterator[tuple[str, object]]:
        """Each URL's outcome as soon as it is read, until all are read or the deadline comes."""
        if not urls:
            return
        jobs: queue.Queue = queue.Queue()
        done: queue.Queue = queue.Queue()
        for url in urls:
            jobs.put(url)
        for _ in range(min(self.threads, len(urls))):
            client = self._client()
            threading.Thread(target=self._work, args=(client, jobs, done), name="verify-read", daemon=True).start()
        for _ in urls:
            try:  # what was read before the deadline counts, even when the caller took the time since
                yield done.get(timeout=self.deadline.left()) if not self.deadline.expired() else done.get_nowait()
            except queue.Empty:
                return

    def _client(self):
        """A thread's own HTTP client, its session built here (one at a time: the cache file is opened once
        per session)."""
        from gsd_research.core.http import HttpClient

        client = HttpClient(self.rt.config, no_cache=self.rt.no_cache)
        client.session  # noqa: B018 - built now, not concurrently in the threads
        self.clients.append(client)
        return client

    def _work(self, client, jobs: queue.Queue, done: queue.Queue) -> None:
        from gsd_research.read.api import fetch_source

        view = SimpleNamespace(config=self.rt.config, http=client, no_cache=self.rt.no_cache,
                               max_tokens=self.rt.max_tokens)
        while not self.deadline.expired():
            try:
                url = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                outcome = fetch_source(view, url, self.deadline.stop_at)
            except GsdError as exc:
                outcome = exc
            except Exception as exc:  # noqa: BLE001 - one unreadable page must not end the others' reading
                outcome = ExtractionFailed(f"Reading the page failed ({exc.__class__.__name__})")
            done.put((url, outcome))
