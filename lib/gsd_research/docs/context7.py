"""Context7 REST v2: resolve a library name to an id, then fetch documentation snippets."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from gsd_research.core.errors import (
    GsdError,
    LibraryNotFound,
    LibraryNotReady,
    NotFound,
    ProviderError,
    RateLimited,
)
from gsd_research.core.external import safe_url
from gsd_research.core.http import HttpClient, forget, parse_json, provider_details, raise_for_status

LIBRARY_ID = re.compile(r"^/[^/\s]+/[^/\s]+([/@][^/\s]+)?$")
SAFE_ID = re.compile(r"^/[A-Za-z0-9._+-]+/[A-Za-z0-9._+-]+(?:[/@][A-Za-z0-9._+-]+)?$")  # ids Context7 sends us
KEY_HINT = "CONTEXT7_API_KEY (or unset it to use anonymous access)"
SKIP_STATES = {"error", "delete"}


@dataclass
class Library:
    id: str
    title: str
    score: float
    versions: list[str]
    state: str


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def name_similarity(query: str, lib: dict) -> float:
    """How well a search result's names match the requested library name (0..1)."""
    q = _norm(query)
    if not q:
        return 0.0
    if "/" in query and "/" + query.strip().strip("/").lower() == str(lib.get("id", "")).lower():
        return 1.0  # 'vercel/next.js' names the id itself
    names = {_norm(str(lib.get("title", "")))}
    parts = [p for p in str(lib.get("id", "")).split("/") if p]
    names.update(_norm(p) for p in parts[-2:])
    best = 0.0
    for name in filter(None, names):
        if name == q:
            return 1.0
        if q in name or name in q:
            best = max(best, 0.85 * min(len(q), len(name)) / max(len(q), len(name)) + 0.15)
        best = max(best, SequenceMatcher(None, q, name).ratio())
    return best


def rank_libraries(query: str, results: list[dict]) -> list[Library]:
    """Order the search answer by its own signals: name match, benchmark and trust scores, stars, rank."""
    ranked = []
    for position, lib in enumerate(results):
        if not isinstance(lib, dict) or not safe_id(lib.get("id")) or lib.get("state") in SKIP_STATES:
            continue
        similarity = name_similarity(query, lib)
        stars = lib.get("stars") or 0
        score = (
            100 * similarity
            + 0.2 * float(lib.get("benchmarkScore") or 0)
            + 2 * max(float(lib.get("trustScore") or 0), 0)
            + 2 * math.log10(max(stars, 0) + 1)
            - 3 * position
            - (15 if lib.get("state") not in (None, "finalized") else 0)
        )
        ranked.append((similarity, Library(str(lib["id"]), str(lib.get("title") or lib["id"]), score,
                                            safe_versions(lib.get("versions")), str(lib.get("state") or ""))))
    good = [lib for sim, lib in ranked if sim >= 0.6]
    return sorted(good, key=lambda lib: lib.score, reverse=True)


def safe_id(value) -> bool:
    """A library id from Context7 that we may repeat: ASCII name characters only, no fence-marker spelling."""
    from gsd_research.core.untrusted import neutralize

    text = str(value or "")
    return bool(SAFE_ID.match(text)) and neutralize(text) == text


_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,39}$")


def safe_versions(values) -> list[str]:
    """The versions of a search answer that we may repeat (metadata, library ids): short version spellings
    without a fence-marker look-alike; anything else is left out."""
    from gsd_research.core.untrusted import neutralize

    items = values if isinstance(values, list) else []
    return [v for v in (str(x) for x in items) if _VERSION.match(v) and neutralize(v) == v]


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+#-]{0,59}$")


def safe_name(lib: dict) -> str | None:
    """A search result's title when it is a plain library name, else its id when that is safe, else None."""
    from gsd_research.core.untrusted import neutralize, scan

    title = str(lib.get("title") or "")
    if _PLAIN_NAME.match(title) and neutralize(title) == title and not scan(title):
        return title
    return str(lib["id"]) if safe_id(lib.get("id")) else None


def split_version(spec: str) -> tuple[str, str | None]:
    """'next.js@v15.1.8' -> ('next.js', 'v15.1.8'); a scoped npm name keeps its leading @."""
    at = spec.rfind("@")
    if at > 0:
        return spec[:at], spec[at + 1:] or None
    return spec, None


class Context7:
    """A Context7 client over the shared HTTP layer."""

    def __init__(self, http: HttpClient, base_url: str, api_key: str | None, ttl: int) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.ttl = ttl

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _get(self, path: str, params: dict, expected: tuple[int, ...], **kwargs):
        """One GET through the shared layer; a rate limit says how to get a higher one."""
        try:
            return self.http.request("context7", "GET", f"{self.base_url}{path}", params=params,
                                     headers=self._headers(), ttl=self.ttl, expected=expected,
                                     key_hint=KEY_HINT, **kwargs)
        except RateLimited as exc:
            wait = f"Retry in {int(exc.retry_after)} s" if exc.retry_after else "Retry in a minute"
            more = ("Your CONTEXT7_API_KEY's plan limit is reached" if self.api_key
                    else "Set CONTEXT7_API_KEY (free at context7.com) for higher limits than anonymous access")
            exc.suggestions = [wait, more]
            raise

    def search(self, name: str, query: str) -> list[dict]:
        resp = self._get("/v2/libs/search", {"libraryName": name[:500], "query": query[:500]}, (200, 404))
        if resp.status_code == 404:
            return []
        body = parse_json("context7", resp)
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            forget(resp)
            raise ProviderError("Context7 sent a search answer without results",
                                suggestions=["Retry later; if it persists the Context7 API may have changed"],
                                details={"provider": "context7"})
        return results

    def resolve(self, spec: str, query: str) -> tuple[str, Library | None]:
        """A library id for `spec`: an id as given, or the best search match (with a version pin)."""
        if LIBRARY_ID.match(spec):
            return spec, None
        name, version = split_version(spec)
        results = self.search(name, query)
        ranked = rank_libraries(name, results)
        if not ranked:  # the names Context7 found, where they are plain names (titles are external text)
            suggestions = [n for n in (safe_name(r) for r in results if isinstance(r, dict)) if n][:5]
            raise LibraryNotFound(
                f"Could not resolve library '{spec}'",
                suggestions=suggestions or ["Check the spelling, or pass a Context7 id such as /vercel/next.js"],
            )
        best = ranked[0]
        if not version:
            return best.id, best
        pinned = next((v for v in best.versions if v.lstrip("v") == version.lstrip("v")), version)
        return f"{best.id}/{pinned}", best

    def context(self, library_id: str, query: str, _hops: int = 0) -> tuple[dict, str]:
        """Documentation for one library id; follows a 'library moved' answer once."""
        resp = self._get("/v2/context", {"libraryId": library_id, "query": query[:500], "type": "json"},
                         (200, 202, 301, 302, 404), allow_redirects=False)
        if resp.status_code in (301, 302):
            target = _redirect_target(resp)
            if target and _hops < 2:
                return self.context(target, query, _hops + 1)
            raise ProviderError(f"Context7 says {library_id} moved but gave no new id",
                                details={"status": resp.status_code, "provider": "context7"})
        if resp.status_code == 202:
            raise LibraryNotReady(
                f"Context7 is still processing {library_id}; its documentation is not ready yet",
                suggestions=["Retry in a few minutes", "Try another version or a related library"],
            )
        if resp.status_code == 404:
            raise _not_found(library_id, resp)
        return _parse_context(resp), library_id


def _redirect_target(resp) -> str | None:
    try:
        body = resp.json()
    except ValueError:
        body = {}
    target = (body.get("redirectUrl") if isinstance(body, dict) else None) or resp.headers.get("Location")
    if not target:
        return None
    target = str(target)
    if "://" in target:
        target = "/" + "/".join(target.split("://", 1)[1].split("/")[1:])
    return target if LIBRARY_ID.match(target) and safe_id(target.split("@")[0]) else None


def _not_found(library_id: str, resp) -> GsdError:
    details = provider_details("context7", resp)  # Context7's own words, fenced, never in our message
    try:
        code = resp.json().get("error")
    except (ValueError, AttributeError):
        code = None
    if code == "no_snippets_found":
        return NotFound(f"Context7 has no documentation for {library_id} matching this query",
                        suggestions=["Rephrase the query with the API or feature name"])
    return LibraryNotFound(f"Context7 does not know {library_id}", details=details,
                           suggestions=["Pass the library name instead of an id to search for it"])


def _parse_context(resp) -> dict:
    if "json" not in resp.headers.get("Content-Type", "application/json"):
        return {"codeSnippets": [], "infoSnippets": [], "text": resp.text}
    body = parse_json("context7", resp)
    if not isinstance(body, dict):
        forget(resp)
        raise_for_status("context7", resp)
        raise ProviderError("Context7 sent an unexpected answer", details={"provider": "context7"})
    return body


def snippets_to_results(body: dict) -> list[dict]:
    """Code and info snippets as envelope results, interleaved so a small budget sees both kinds."""
    code = [_code_result(s) for s in body.get("codeSnippets") or [] if isinstance(s, dict)]
    info = [_info_result(s) for s in body.get("infoSnippets") or [] if isinstance(s, dict)]
    if not code and not info and body.get("text"):
        info = _text_results(str(body["text"]))
    merged: list[dict] = []
    for i in range(max(len(code), len(info))):
        if i < len(code):
            merged.append(code[i])
        if i < len(info):
            merged.append(info[i])
    return [r for r in merged if r["content"].strip()]


def _code_result(s: dict) -> dict:
    blocks = []
    for ex in s.get("codeList") or []:
        if isinstance(ex, dict) and ex.get("code"):
            blocks.append(f"```{ex.get('language') or s.get('codeLanguage') or ''}\n{ex['code']}\n```")
    content = "\n\n".join(filter(None, [str(s.get("codeDescription") or "").strip(), *blocks]))
    return {"title": str(s.get("codeTitle") or s.get("pageTitle") or "Code example"), "content": content,
            "source_url": safe_url(s.get("codeId") or s.get("sourceFile")) or "", "type": "code"}


def _info_result(s: dict) -> dict:
    return {"title": str(s.get("breadcrumb") or "Documentation"), "content": str(s.get("content") or ""),
            "source_url": safe_url(s.get("pageId")) or "", "type": "info"}


def _text_results(text: str) -> list[dict]:
    parts = re.split(r"(?m)^### ", text)
    results = []
    for part in parts:
        if not part.strip():
            continue
        title, _, rest = part.partition("\n")
        source = re.search(r"(?m)^Source: (\S+)", rest)
        results.append({"title": title.strip(), "content": rest.strip(),
                        "source_url": safe_url(source.group(1)) or "" if source else "", "type": "text"})
    return results
