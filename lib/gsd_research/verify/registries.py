"""`[VERIFIED: npm registry]`-style claims: does the package the claim names exist, and that version?

GSD's researchers tag a package fact they checked with `npm view` or `pip index versions` as
`[VERIFIED: npm registry]` (or PyPI, crates.io). The claim's package is read from its text (`react@19.1.0`,
`` `react` 19.1.0 ``, `pydantic==2.6`, `pydantic 2.6`, a table row, or a lone `` `name` ``) and looked
up once per run in the registry's JSON API, through the shared HTTP client (cache, retries, deadline).
Verdicts: registry_confirmed | package_not_found | version_not_found | unreachable.
"""

from __future__ import annotations

import queue
import re
import threading
from dataclasses import dataclass
from urllib.parse import quote

from gsd_research.core.errors import GsdError, NotFound, ProviderError, TimeoutError_, UsageError

REGISTRY_OF = (("npm", re.compile(r"\bnpm\b|npmjs", re.I)), ("pypi", re.compile(r"\bpypi\b|\bpip\b", re.I)),
               ("crates", re.compile(r"\bcrates(?:\.io)?\b|\bcargo\b", re.I)))
NAMES = {"npm": "npm registry", "pypi": "PyPI", "crates": "crates.io"}
VERDICTS = ("registry_confirmed", "package_not_found", "version_not_found")
THREADS = 3  # packages looked up side by side

_NAME = r"@[A-Za-z0-9][\w.-]*/[\w.-]+|[A-Za-z0-9][\w.-]*"
_VER = r"v?(\d+(?:\.\d+)*(?:[-+]?[A-Za-z][0-9A-Za-z.-]*)?)"
# not package names though a version may follow them
_NOT_NAMES = frozenset("version versions release releases v to is at of on in since from and or than above below "
                       "python node rust cargo npm pip pypi crates release-candidate".split())
_FORMS = (
    re.compile(rf"(?<![\w@/.-])({_NAME})@{_VER}"),  # react@19.1.0, @types/node@20
    re.compile(rf"`({_NAME})`\s*(?:[(:=|,]|==|>=|~=|\^|~)?\s*(?:version\s+)?{_VER}"),  # `react` 19.1.0
    re.compile(rf"(?<![\w@/.-])({_NAME})\s*(?:==|>=|~=|\^|~)\s*{_VER}"),  # pydantic==2.6
    re.compile(rf"(?<![\w@/.-])({_NAME})\s*\|?\s*v?(\d+\.\d+(?:\.\d+)*(?:[-+]?[A-Za-z][0-9A-Za-z.-]*)?)"),  # pydantic 2.6
)
_TICKED = re.compile(rf"`({_NAME})`")
_SHOWN_VERSION = re.compile(r"[0-9A-Za-z.+!-]{1,40}")


def registry_of(marker: str) -> str | None:
    """The registry a `[VERIFIED: …]` marker names (a URL is a page to read, not a registry)."""
    if "://" in marker:
        return None
    return next((name for name, pattern in REGISTRY_OF if pattern.search(marker)), None)


@dataclass(frozen=True)
class Package:
    name: str
    version: str | None


def package_of(text: str) -> Package | None:
    """The package (and version) a claim names, by the first form that matches."""
    for form in _FORMS:
        for match in form.finditer(text):
            name, version = match.group(1), match.group(2).rstrip(".-")
            if name.lower() not in _NOT_NAMES and not name[0].isdigit():
                return Package(name, version)
    ticked = next((m.group(1) for m in _TICKED.finditer(text) if m.group(1).lower() not in _NOT_NAMES), None)
    return Package(ticked, None) if ticked else None


def _url(rt, registry: str, name: str) -> str:
    base = rt.config.base_url(registry)
    if registry == "npm":
        return f"{base}/{quote(name.lower(), safe='@')}"  # @scope/name -> @scope%2Fname
    if registry == "pypi":
        return f"{base}/pypi/{quote(name, safe='')}/json"
    return f"{base}/api/v1/crates/{quote(name, safe='')}"


def _versions(registry: str, data: dict) -> tuple[list[str], str | None]:
    """(every published version, the latest) from a registry's answer."""
    if registry == "npm":
        return list((data.get("versions") or {}).keys()), (data.get("dist-tags") or {}).get("latest")
    if registry == "pypi":
        return list((data.get("releases") or {}).keys()), (data.get("info") or {}).get("version")
    versions = [v.get("num", "") for v in data.get("versions") or [] if isinstance(v, dict)]
    return versions, (data.get("crate") or {}).get("max_version")


def _normal(version: str) -> str:
    version = version.lower().lstrip("v")
    while version.endswith(".0") and version.count(".") > 0:
        version = version[:-2]
    return version


def has_version(published: list[str], wanted: str) -> bool:
    """`wanted` was published: exactly (2.6 is 2.6.0), or as a prefix of a release (2.6 of 2.6.1, 19 of 19.1.0)."""
    want = _normal(wanted)
    return any(_normal(v) == want or v.lower().startswith(wanted.lower().lstrip("v") + ".") for v in published)


class Registries:
    """Looks packages up once per run, THREADS at once (`start`), each thread with its own HTTP client (a
    requests session is not shared between threads); `check` gives a claim's verdict fields."""

    def __init__(self, rt, deadline) -> None:
        self.rt = rt
        self.deadline = deadline
        # (registry, name) -> ((published versions, latest) or None when there is no such package, error, URL)
        self.seen: dict[tuple[str, str], tuple[tuple[list[str], object] | None, dict | None, str]] = {}
        self.ready: dict[tuple[str, str], threading.Event] = {}
        self.down: dict[str, dict] = {}  # registry -> the error that shows it unreachable for this run
        self.clients: list = []

    @property
    def upstream_requests(self) -> int:
        return sum(c.upstream_requests for c in self.clients)

    def start(self, wanted: list[tuple[str, str]]) -> None:
        """Look the (registry, text of a claim) packages up in the background; `check` waits for each."""
        jobs: queue.Queue = queue.Queue()
        for registry, text in wanted:
            package = package_of(text)
            key = (registry, package.name.lower()) if package else None
            if key and key not in self.ready:
                self.ready[key] = threading.Event()
                jobs.put((registry, package.name))
        for _ in range(min(THREADS, jobs.qsize())):
            client = self._client()
            threading.Thread(target=self._work, args=(client, jobs), name="verify-registry", daemon=True).start()

    def _client(self):
        from gsd_research.core.http import HttpClient

        client = HttpClient(self.rt.config, no_cache=self.rt.no_cache)
        client.session  # noqa: B018 - built now, not concurrently in the threads
        self.clients.append(client)
        return client

    def _work(self, client, jobs: queue.Queue) -> None:
        while not self.deadline.expired():
            try:
                registry, name = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                self.lookup(registry, name, client)
            except Exception as exc:  # noqa: BLE001 - one broken answer must not leave the others waiting
                url = _url(self.rt, registry, name)
                self.seen[(registry, name.lower())] = (None, {"code": ProviderError.code, "message": (
                    f"Reading the registry's answer failed ({exc.__class__.__name__})")}, url)
            finally:
                self.ready[(registry, name.lower())].set()

    def lookup(self, registry: str, name: str, client=None):
        """((published versions, latest) or None when the registry has no such package, an error, the URL)."""
        key = (registry, name.lower())
        if key in self.ready and client is None:  # being looked up in the background
            self.ready[key].wait(self.deadline.left())
        if key not in self.seen:
            url = _url(self.rt, registry, name)
            if registry in self.down:  # its retries were spent once: not again for every package
                return None, self.down[registry], url
            if client is None and key in self.ready:  # not answered in time
                return None, {"code": TimeoutError_.code, "message": f"The {NAMES[registry]} did not answer in time"}, url
            try:
                self.seen[key] = (self._get(client or self.rt.http, registry, url), None, url)
            except GsdError as exc:
                self.seen[key] = (None, {"code": exc.code, "message": exc.message[:300]}, url)
                if not isinstance(exc, NotFound | UsageError):
                    self.down[registry] = self.seen[key][1]
        return self.seen[key]

    def _get(self, http, registry: str, url: str) -> tuple[list[str], object] | None:
        from gsd_research.core.http import parse_json

        headers = {"Accept": "application/vnd.npm.install-v1+json"} if registry == "npm" else {}
        resp = http.request(registry, "GET", url, ttl=self.rt.config.ttl("registry"), expected=(200, 404),
                            deadline=self.deadline.left(), headers=headers)
        if resp.status_code == 404:
            return None
        data = parse_json(registry, resp)
        return _versions(registry, data if isinstance(data, dict) else {})

    def check(self, registry: str, text: str) -> dict:
        package = package_of(text)
        if package is None:
            return {"verdict": "no_source", "method": "none", "registry": NAMES[registry],
                    "note": f"verified with the {NAMES[registry]}, but the claim names no package: write it as "
                            "`name` 1.2.3 or name@1.2.3"}
        found, error, url = self.lookup(registry, package.name)
        out = {"method": "registry", "registry": NAMES[registry], "package": package.name,
               "version": package.version, "source_url": url}
        if error is not None:
            return dict(out, verdict="unreachable", error=error)
        if found is None:
            return dict(out, verdict="package_not_found")
        published, latest = found
        if isinstance(latest, str) and _SHOWN_VERSION.fullmatch(latest):  # the registry's text: only a version
            out["latest"] = latest
        if package.version and not has_version(published, package.version):
            return dict(out, verdict="version_not_found")
        return dict(out, verdict="registry_confirmed")
