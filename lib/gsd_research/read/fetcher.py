"""Fetch a URL safely: SSRF guard on every hop, redirect limit, size cap, content-type checks, cache."""

from __future__ import annotations

import contextvars
import ipaddress
import os
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from gsd_research.core.errors import (
    AccessDenied,
    BlockedUrl,
    ExtractionFailed,
    GsdError,
    NotFound,
    TimeoutError_,
)

REDIRECTS = (301, 302, 303, 307, 308)
HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/plain", "text/markdown", "text/x-markdown", "application/json", "text/csv", "application/xml",
              "text/xml")
DOC_TYPES = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
}
DOC_SUFFIXES = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx", ".xlsx": "xlsx"}
ACCEPT = "text/html,application/xhtml+xml,text/plain,text/markdown,application/pdf,*/*;q=0.5"


def page_error(exc: GsdError, url: str) -> GsdError:
    """A web page's HTTP error in a page's terms: a 403 is the site refusing, not a bad API key of ours. The
    site's own error text stays in details.provider_message (fenced), never in the message."""
    url = shown(url)
    status = exc.details.get("status") if isinstance(exc.details, dict) else None
    if status in (401, 403):
        return AccessDenied(f"The site refused the request (HTTP {status}) for {url}",
                        suggestions=["The page needs a login or blocks automated readers; try another source",
                                     "gsd-research search for another page on the topic"], details=exc.details)
    if status in (404, 410):
        return NotFound(f"No page at {url} (HTTP {status})", details=exc.details,
                        suggestions=["Check the URL", "gsd-research search for the page's current address"])
    if status and not exc.suggestions:
        exc.suggestions = ["Retry later, or read another source on the topic"]
    return exc


def shown(url: str) -> str:
    """A URL we reached (maybe through a redirect: external text) as it may appear in our messages."""
    from gsd_research.core.external import safe_url

    return safe_url(url) or "(a URL that is not shown: not a plain http(s) address)"


def host_shown(host: str) -> str:
    """A host name for our messages: in its ASCII (IDNA) form when it is one, else not repeated."""
    from gsd_research.core.external import safe_url

    literal = f"[{host}]" if ":" in host else host  # an IPv6 address
    url = safe_url(f"http://{literal}/") if host and "/" not in host and "@" not in host else None
    return host if url else "(an invalid host name)"


@dataclass
class Page:
    """What a fetch brought back (raw bytes stay inside the process; callers never print them)."""

    url: str
    final_url: str
    status: int
    content_type: str
    kind: str  # html | text | pdf | docx | pptx | xlsx
    body: bytes
    encoding: str | None
    redirects: int
    from_cache: bool
    capped: bool
    fetched_at: str | None = None  # when a cached answer was first read (ISO, UTC)


def allowed_hosts() -> set[str]:
    raw = os.environ.get("GSD_RESEARCH_ALLOW_HOSTS", "")
    return {h.strip().lower().strip("[]") for h in raw.split(",") if h.strip()}


def _is_allowed(host: str, allow: set[str]) -> bool:
    if host in allow:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    for entry in allow:
        if "/" in entry:
            try:
                if ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
    return False


def _public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
                or ip.is_unspecified or not ip.is_global)


def resolve(host: str, port: int) -> list[str]:
    """Every address the host name resolves to (a literal IP resolves to itself)."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        from gsd_research.core.errors import NetworkError

        raise NetworkError(f"Cannot resolve host '{host_shown(host)}' ({exc.__class__.__name__})",
                           suggestions=["Check the URL and the network connection"]) from None
    return sorted({info[4][0].split("%", 1)[0] for info in infos})


def check_url(url: str, allow: set[str] | None = None) -> str:
    """Refuse non-http(s) URLs and hosts that are or resolve to private, loopback or link-local addresses."""
    allow = allowed_hosts() if allow is None else allow
    try:
        parts = urlsplit(url.strip())
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        from gsd_research.core.external import excerpt

        raise BlockedUrl("Malformed URL", suggestions=["Pass a full http(s) URL"],
                         details={"url": excerpt(url)}) from None
    if parts.scheme.lower() not in ("http", "https"):
        scheme = parts.scheme.lower() if parts.scheme.isascii() and len(parts.scheme) <= 20 else "another scheme"
        raise BlockedUrl(f"Only http(s) URLs can be fetched, not '{scheme or 'no scheme'}:'",
                         suggestions=["Pass a full http(s) URL", "For a local file use gsd-research summarize FILE"])
    host = (parts.hostname or "").lower().rstrip(".")
    if not host:
        raise BlockedUrl("The URL has no host", suggestions=["Pass a full http(s) URL"])
    if host_shown(host).startswith("("):
        raise BlockedUrl("The URL's host is not a valid host name", suggestions=["Pass a full http(s) URL"])
    if _is_allowed(host, allow):
        return host
    for addr in resolve(host, port):
        ip = ipaddress.ip_address(addr)
        if not _public(ip):
            raise BlockedUrl(
                f"Refusing to fetch {host}: it resolves to a non-public address ({addr})",
                suggestions=[f"If this host is trusted, add it to GSD_RESEARCH_ALLOW_HOSTS (e.g. {host})"],
                details={"host": host, "address": addr})
    return host


_GUARD: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("gsd_fetch_guard", default=None)


def check_peer(host: str, sock: socket.socket, allow: set[str]) -> None:
    """The address a connection actually reached must be public too: a name that resolved to a public
    address for `check_url` and to a private one for the connection (DNS rebinding) is refused here,
    after connecting and before a byte of the request is sent."""
    addr = str(sock.getpeername()[0]).split("%", 1)[0]
    if _is_allowed(host.lower().strip("[]").rstrip("."), allow) or _is_allowed(addr, allow):
        return
    if not _public(ipaddress.ip_address(addr)):
        sock.close()
        raise BlockedUrl(f"Refusing to fetch {host}: the connection reached a non-public address ({addr})",
                         suggestions=[f"If this host is trusted, add it to GSD_RESEARCH_ALLOW_HOSTS (e.g. {host})"],
                         details={"host": host, "address": addr})


def guarded_adapter():
    """A requests adapter whose new connections pass `check_peer` while a fetch is under way (`_GUARD`
    set); provider calls through the same session are unaffected. Requests through a proxy use the
    proxy's own pools: the proxy resolves the name, so there is no peer of ours to check."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    def guarded(base):
        class Guarded(base):
            def _new_conn(self):
                sock = super()._new_conn()
                allow = _GUARD.get()
                if allow is not None:
                    check_peer(self.host, sock, allow)
                return sock

        return Guarded

    class HTTPPool(HTTPConnectionPool):
        ConnectionCls = guarded(HTTPConnection)

    class HTTPSPool(HTTPSConnectionPool):
        ConnectionCls = guarded(HTTPSConnection)

    class GuardedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = {"http": HTTPPool, "https": HTTPSPool}

    return GuardedAdapter()


def _created(resp) -> str | None:
    """When the HTTP cache stored an answer, as ISO UTC (None when it does not say)."""
    from datetime import timezone

    created = getattr(resp, "created_at", None)
    if created is None or not hasattr(created, "isoformat"):
        return None
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return created.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def kind_of(content_type: str, url: str) -> str | None:
    """html | text | pdf | docx | pptx | xlsx, or None when the type is not readable."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype in HTML_TYPES:
        return "html"
    if ctype in DOC_TYPES:
        return DOC_TYPES[ctype]
    if ctype in TEXT_TYPES or ctype.startswith("text/"):
        return "text"
    if ctype in ("", "application/octet-stream", "binary/octet-stream"):
        suffix = os.path.splitext(urlsplit(url).path)[1].lower()
        return DOC_SUFFIXES.get(suffix) or ("html" if suffix in (".htm", ".html", "") else None)
    return None


class Fetcher:
    """GETs through the shared HTTP layer, one hop at a time so every hop passes the guard."""

    def __init__(self, rt, stop_at: float | None = None) -> None:
        self.rt = rt
        self.stop_at = stop_at  # time.monotonic() by which the whole fetch must be over (None: http.deadline)
        self._stop = 0.0  # this fetch's
        cfg = rt.config
        self.max_redirects = int(min(cfg.number("fetch.max_redirects", 5), 100))
        self.max_bytes = int(min(cfg.number("fetch.max_bytes", 10_000_000), 2**62))
        self.ttl = cfg.ttl("fetch")
        self.allow = allowed_hosts()
        adapter = guarded_adapter()
        for prefix in ("http://", "https://"):
            rt.http.session.mount(prefix, adapter)

    def fetch(self, url: str) -> Page:
        import time

        current, hops = url.strip(), 0
        # one deadline for every hop: http.deadline bounds the whole fetch, not each of its redirects
        self._stop = self.stop_at if self.stop_at is not None else time.monotonic() + self.rt.http.deadline
        while True:
            check_url(current, self.allow)
            resp, from_cache = self._get(current)
            if resp.status_code in REDIRECTS:
                location = resp.headers.get("Location")
                resp.close()
                if not location:
                    raise ExtractionFailed(f"Redirect without a Location header at {shown(current)}")
                hops += 1
                if hops > self.max_redirects:
                    raise ExtractionFailed(f"Too many redirects (more than {self.max_redirects}) from {url}",
                                           suggestions=["Fetch the final URL directly"])
                current = urljoin(current, location)
                continue
            return self._page(url, current, resp, hops, from_cache)

    def _get(self, url: str):
        """A cached 200 if there is one, else a streamed request (cached afterwards when within the cap)."""
        if not self.rt.no_cache and self._cache() is not None:
            try:
                cached = self.rt.http.session.request("GET", url, only_if_cached=True, expire_after=self.ttl,
                                                      allow_redirects=False)
                if cached.status_code == 200 and getattr(cached, "from_cache", False):
                    self.rt.http.cache_hits += 1
                    return cached, True
            except GsdError:
                raise
            except Exception:  # noqa: BLE001 - a cache problem means a fresh request
                pass
        token = _GUARD.set(self.allow)
        try:
            resp = self.rt.http.request("fetch", "GET", url, cache=False, stream=True, allow_redirects=False,
                                        expected=(200, *REDIRECTS), headers={"Accept": ACCEPT},
                                        deadline=self._left())
        except GsdError as exc:
            raise self._error(exc, url) from None
        finally:
            _GUARD.reset(token)
        return resp, False

    def _error(self, exc: GsdError, url: str) -> GsdError:
        """`page_error`; a timeout named by the whole fetch's deadline (all hops share it): http.deadline's, or
        the caller's."""
        error = page_error(exc, url)
        if isinstance(error, TimeoutError_):
            configured = self.stop_at is None
            total = self.rt.http.deadline if configured else error.details.get("deadline_s")
            error.message = f"The page at {url} was not read " + (f"within the {total:g}-second deadline" if total
                                                                   else "in the time allowed")
            error.suggestions = ["Retry later"] + (["Raise http.deadline with gsd-research config set"]
                                                   if configured else [])
            if total:
                error.details["deadline_s"] = total
        return error

    def _left(self) -> float:
        """Seconds left of this fetch's deadline (a spent one raises TIMEOUT before anything is sent)."""
        import time

        left = self._stop - time.monotonic()
        if left <= 0:
            raise TimeoutError_("The page was not read in the time allowed")
        return left

    def _read_capped(self, resp, url: str) -> tuple[bytes, bool]:
        """The body, cut at fetch.max_bytes; the request's deadline bounds its reading (core.http)."""
        from gsd_research.core.http import read_streamed

        try:
            return read_streamed("fetch", resp, self.max_bytes)
        except GsdError as exc:
            raise self._error(exc, url) from None

    def _page(self, url: str, final: str, resp, hops: int, from_cache: bool) -> Page:
        from gsd_research.core.external import media_type

        header = resp.headers.get("Content-Type", "")
        ctype = media_type(header) or ""  # a header outside the token grammar says nothing we repeat
        kind = kind_of(ctype, final)
        if kind is None:
            resp.close()
            hint = ["For an image saved locally use gsd-research image PATH"] if ctype.startswith("image/") else []
            raise ExtractionFailed(f"Cannot read content of type '{ctype or 'unrecognized'}' from {shown(final)}",
                                   suggestions=hint + ["Fetch an HTML page, a text file, a PDF or an Office file"],
                                   details={"content_type": ctype or None})
        body, capped = (resp.content, False) if from_cache else self._read_capped(resp, final)
        if capped and kind not in ("html", "text"):
            raise ExtractionFailed(
                f"The document is larger than the {self.max_bytes}-byte cap",
                suggestions=["Raise fetch.max_bytes with gsd-research config set fetch.max_bytes N"],
                details={"max_bytes": self.max_bytes})
        if not from_cache and not capped:
            self._store(resp, body)
        return Page(url, final, resp.status_code, ctype, kind, body,
                    resp.encoding if "charset" in header.lower() else None, hops, from_cache, capped,
                    _created(resp) if from_cache else None)

    def _store(self, resp, body: bytes) -> None:
        """Keep a complete 200 answer in the shared cache (the streamed request bypassed it)."""
        try:
            resp._content, resp._content_consumed = body, True
            from datetime import datetime, timedelta, timezone

            cache = self._cache()
            if cache is not None:
                cache.save_response(resp, expires=datetime.now(timezone.utc) + timedelta(seconds=self.ttl))
        except Exception:  # noqa: BLE001 - caching is an optimisation, never a failure
            pass

    def _cache(self):
        try:
            return self.rt.http.cache_backend()
        except Exception:  # noqa: BLE001 - a cache problem means a fresh request
            return None
