"""Fake package registries for `verify`'s [VERIFIED: npm registry]-style claims: npm, PyPI and crates.io.

Each answers its JSON API for the packages in PACKAGES (or server.state["registries"], same shape) and 404
for any other name, as the real ones do.
"""

from __future__ import annotations

from urllib.parse import unquote

from tests.fakes.server import FakeServer, Reply, Request

# registry -> package -> published versions (the last is the latest)
PACKAGES = {
    "npm": {"react": ["18.3.1", "19.0.0", "19.1.0"], "next": ["14.2.5", "15.3.0"], "@types/node": ["20.11.0"]},
    "pypi": {"pydantic": ["2.5.3", "2.6.0", "2.6.1"], "requests": ["2.31.0", "2.32.3"]},
    "crates": {"serde": ["1.0.200", "1.0.210"], "tokio": ["1.37.0"]},
}


def _versions(server: FakeServer, registry: str, name: str) -> list[str] | None:
    catalogue = (server.state.get("registries") or PACKAGES).get(registry, {})
    return next((v for k, v in catalogue.items() if k.lower() == name.lower()), None)


def npm(server: FakeServer, req: Request) -> Reply:
    name = unquote(req.path.removeprefix("/npm/"))
    versions = _versions(server, "npm", name)
    if versions is None:
        return Reply(404, {"error": "Not found"})
    return Reply(200, {"name": name, "dist-tags": {"latest": versions[-1]},
                       "versions": {v: {"name": name, "version": v} for v in versions}},
                 content_type="application/vnd.npm.install-v1+json")


def pypi(server: FakeServer, req: Request) -> Reply:
    name = unquote(req.path.removeprefix("/pypi/pypi/").removesuffix("/json"))
    versions = _versions(server, "pypi", name)
    if versions is None:
        return Reply(404, {"message": "Not Found"})
    return Reply(200, {"info": {"name": name, "version": versions[-1]}, "releases": {v: [] for v in versions}})


def crates(server: FakeServer, req: Request) -> Reply:
    name = unquote(req.path.removeprefix("/crates/api/v1/crates/"))
    versions = _versions(server, "crates", name)
    if versions is None:
        return Reply(404, {"errors": [{"detail": f"crate `{name}` does not exist"}]})
    return Reply(200, {"crate": {"name": name, "max_version": versions[-1]},
                       "versions": [{"num": v} for v in reversed(versions)]})


def install(server: FakeServer) -> None:
    server.route("GET", r"/npm/[^/]+")(lambda req: npm(server, req))
    server.route("GET", r"/pypi/pypi/[^/]+/json")(lambda req: pypi(server, req))
    server.route("GET", r"/crates/api/v1/crates/[^/]+")(lambda req: crates(server, req))
