"""A Chroma server URL: checked before use (a plain http(s)://host[:port]) and probed with a bounded wait, so a
server that never answers, or trickles bytes, or is not Chroma, is reported instead of hanging the command."""

from __future__ import annotations

import json
import threading
from urllib.parse import urlsplit

from gsd_research.core.errors import NetworkError, ProviderError

PROBE_TIMEOUT = 5.0  # seconds for the whole heartbeat exchange (connect, headers, body)
HEARTBEAT = "/api/v2/heartbeat"
_MAX_BODY = 64 * 1024
_probed: set[str] = set()
SUGGESTIONS = ["Start it with: chroma run --path DIR --port 8000", "Or drop --chroma-url to use the embedded store"]
_NOT_CHROMA = ["Check the host and port of the Chroma server (chroma run --port N)", SUGGESTIONS[1]]
_REASONS = ("connection refused", "name or service not known", "temporary failure in name resolution",
            "no route to host", "timed out", "certificate verify failed", "connection reset")


def check_url(url: str) -> tuple[str, int, bool]:
    """(host, port, https) of a Chroma server URL; ValueError saying what is wrong otherwise."""
    text = (url or "").strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:  # "http://[::1", "http://h:99999"
        raise ValueError(f"{text!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"{text!r} is not an http:// or https:// URL (a Chroma server is http://host:port)")
    if not parts.hostname:
        raise ValueError(f"{text!r} names no host (a Chroma server is http://host:port)")
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ValueError(f"{text!r} has parts a Chroma server URL cannot carry (user, path, query): use http://host:port")
    if port == 0:
        raise ValueError(f"{text!r}: port 0 is not a port a server listens on")
    return parts.hostname, port or (443 if parts.scheme == "https" else 8000), parts.scheme == "https"


def unreachable(url: str, reason: str) -> NetworkError:
    return NetworkError(f"Chroma server at {url} is unreachable ({reason})", suggestions=SUGGESTIONS)


def _fetch(url: str, result: dict) -> None:
    import requests

    try:
        with requests.get(url, timeout=(PROBE_TIMEOUT, PROBE_TIMEOUT), stream=True, allow_redirects=False) as resp:
            body = b""
            for chunk in resp.iter_content(4096):
                body += chunk
                if len(body) > _MAX_BODY:
                    break
            result["answer"] = (resp.status_code, body)
    except requests.RequestException as exc:
        result["error"] = exc


def _is_heartbeat(body: bytes) -> bool:
    try:
        return isinstance(json.loads(body).get("nanosecond heartbeat"), int)
    except (ValueError, AttributeError):  # not JSON, or JSON but not an object
        return False


def probe(url: str) -> None:
    """Ask the server's heartbeat, all of it within PROBE_TIMEOUT (a trickling answer included):
    NETWORK_ERROR when it cannot be reached or does not answer in time, UPSTREAM_ERROR when what answers is not
    a Chroma server. Once per URL and process."""
    host, port, https = check_url(url)
    base = f"{'https' if https else 'http'}://{'[' + host + ']' if ':' in host else host}:{port}"
    if base in _probed:
        return
    result: dict = {}
    worker = threading.Thread(target=_fetch, args=(base + HEARTBEAT, result), daemon=True)
    worker.start()
    worker.join(PROBE_TIMEOUT)
    if worker.is_alive():  # left behind as a daemon: the process does not wait for it
        raise NetworkError(f"Chroma server at {url} did not answer within {PROBE_TIMEOUT:g} s", suggestions=SUGGESTIONS)
    if "error" in result:
        if "BadStatusLine" in repr(result["error"]):
            raise ProviderError(f"{url} answers, but not with HTTP: it is not a Chroma server", suggestions=_NOT_CHROMA)
        text = str(result["error"]).lower()
        raise unreachable(url, next((known for known in _REASONS if known in text),
                                    result["error"].__class__.__name__))
    status, body = result["answer"]
    if status != 200 or not _is_heartbeat(body):
        raise ProviderError(f"{url} answers, but not as a Chroma server (HTTP {status} for {HEARTBEAT}"
                            f"{'' if status != 200 else ', not a Chroma heartbeat'})", suggestions=_NOT_CHROMA)
    _probed.add(base)
