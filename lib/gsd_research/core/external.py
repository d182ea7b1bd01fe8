"""Short external strings outside the fenced passages: error texts, URLs, header values, dates.

`core.untrusted` fences the passages an answer is about. Text from outside also reaches errors and metadata:
a site's or a provider's error body, a redirect's target, a Content-Type header, a search result's URL or
date. The rule there: such text never appears in our own words (`error.message`, a warning, a note); it is
either reduced to a form that cannot carry words (a validated media type, a date, a percent-encoded URL
without marker or instruction), or kept as a short fenced excerpt in a field of its own
(`error.details.provider_message`).
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

EXCERPT_CHARS = 200
MAX_URL_CHARS = 2000
_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}$")
_HOST = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$|^\[[0-9a-f:.]+\]$")
# Characters a URL keeps as they are (RFC 3986 unreserved, sub-delims and the separators); all else is encoded.
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_QUERY_SAFE = _PATH_SAFE + "?"
_ISO_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ][0-9:.]{2,15}(?:Z|[+-]\d{2}:?\d{2})?)?$")


_SURROGATE = re.compile("[\ud800-\udfff]")


def whole_characters(text: str) -> str:
    """`text` with lone surrogates (half a pair: a JSON `\\udfff` escape, an undecodable file name byte) as
    U+FFFD: tokenizers, encoders and sockets refuse them."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def excerpt(text, limit: int = EXCERPT_CHARS) -> str | None:
    """External text for an error or metadata field: one line, at most `limit` characters, fenced (markers
    neutralized, the flagged opening when it is instruction-like); None when there is no text."""
    from gsd_research.core.untrusted import fence

    line = " ".join("".join(c if c.isprintable() else " " for c in str(text or "")).split())
    if not line:
        return None
    if len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    return fence(line)


def media_type(raw) -> str | None:
    """The media type of a Content-Type header (`text/html`), lower case; None when the header does not
    follow the token grammar (it then says nothing we repeat)."""
    value = str(raw or "").split(";", 1)[0].strip().lower()
    return value if _MEDIA_TYPE.match(value) else None


def safe_url(raw) -> str | None:
    """An http(s) URL from outside in a form that is safe to show and to cite: host IDNA-encoded (no
    look-alike letters), everything outside RFC 3986's characters percent-encoded, and without its query
    and fragment when they (decoded) spell a fence marker or an instruction; None for any other scheme or a
    URL that does not parse."""
    from gsd_research.core.secrets import redact_query
    from gsd_research.core.untrusted import neutralize, scan

    text = str(raw or "").strip()
    if not text or len(text) > MAX_URL_CHARS or any(not c.isprintable() for c in text):
        return None
    try:
        parts = urlsplit(text)
        port = parts.port
        host = (parts.hostname or "").rstrip(".")
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    host = _ascii_host(host)
    if host is None:
        return None
    netloc = host + (f":{port}" if port else "")  # user:password@ is dropped: it is never worth showing
    path = quote(parts.path, safe=_PATH_SAFE) or "/"
    query, fragment = quote(parts.query, safe=_QUERY_SAFE), quote(parts.fragment, safe=_QUERY_SAFE)
    query = redact_query(query)  # a key in a URL is never shown, cited or kept
    readable = unquote(f"{path}?{query}#{fragment}").replace("+", " ")
    if neutralize(readable) != readable or scan(readable):
        query = fragment = ""
        if neutralize(unquote(path)) != unquote(path) or scan(unquote(path).replace("+", " ")):
            path = "/"
    return urlunsplit((parts.scheme.lower(), netloc, path, query, fragment))


def _ascii_host(host: str) -> str | None:
    host = host.lower()
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal
    elif not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return None
    return host if _HOST.match(host) else None


def safe_date(raw) -> str | None:
    """A published date as YYYY-MM-DD (from ISO 8601 or an e-mail style date); None when it is not a date."""
    from datetime import date

    text = str(raw or "").strip()
    if not text or len(text) > 64:
        return None
    match = _ISO_DATE.match(text)
    if match:
        try:
            return date(*(int(g) for g in match.groups())).isoformat()
        except ValueError:
            return None
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(text).date().isoformat()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
