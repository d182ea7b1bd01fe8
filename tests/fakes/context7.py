"""Fake Context7 REST v2 (`/api/v2/libs/search`, `/api/v2/context`) with a small catalogue.

`server.state["context7.body"]` replaces the documentation answer (JSON), `server.state["context7.libraries"]`
adds search results (hostile titles and ids) in front of the catalogue's."""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from tests.fakes.server import FakeServer, Reply, Request

SHARED = Path(os.environ.get("GSD_SHARED_DIR", Path(__file__).resolve().parents[3] / "shared"))

LIBRARIES = [
    {"id": "/facebook/react", "title": "React", "description": "A JavaScript library for building user interfaces",
     "stars": 220000, "trustScore": 10, "benchmarkScore": 95.5, "versions": ["v18.2.0", "v17.0.2"]},
    {"id": "/reactjs/react.dev", "title": "React Docs", "description": "The React documentation website",
     "stars": 11000, "trustScore": 9, "benchmarkScore": 88.0, "versions": []},
    {"id": "/vercel/next.js", "title": "Next.js", "description": "The React Framework",
     "stars": 125000, "trustScore": 10, "benchmarkScore": 91.0, "versions": ["v15.1.8", "v14.3.0"]},
    {"id": "/pmndrs/react-three-fiber", "title": "React Three Fiber", "description": "A React renderer for three.js",
     "stars": 28000, "trustScore": 9, "benchmarkScore": 80.0, "versions": []},
    {"id": "/tiangolo/fastapi", "title": "FastAPI", "description": "FastAPI framework, high performance",
     "stars": 80000, "trustScore": 10, "benchmarkScore": 90.0, "versions": ["0.115.0"]},
    {"id": "/pydantic/pydantic", "title": "Pydantic", "description": "Data validation using Python type hints",
     "stars": 23000, "trustScore": 9, "benchmarkScore": 88.0, "versions": ["v2.7.4", "v1.10.17"]},
    {"id": "/tokio-rs/tokio", "title": "Tokio", "description": "An asynchronous runtime for Rust",
     "stars": 28000, "trustScore": 9, "benchmarkScore": 86.0, "versions": ["tokio-1.38.0", "v1.37.0"]},
    {"id": "/gin-gonic/gin", "title": "Gin", "description": "A HTTP web framework written in Go",
     "stars": 80000, "trustScore": 9, "benchmarkScore": 85.0, "versions": ["v1.9.1", "v1.10.0"]},
    {"id": "/processing/lib", "title": "Processinglib", "description": "Still being indexed", "state": "processing",
     "stars": 10, "trustScore": 3, "benchmarkScore": 10.0, "versions": []},
    {"id": "/old-owner/movedlib", "title": "Movedlib", "description": "A library that moved",
     "stars": 500, "trustScore": 7, "benchmarkScore": 50.0, "versions": []},
    {"id": "/empty/emptylib", "title": "Emptylib", "description": "Has no snippets",
     "stars": 5, "trustScore": 5, "benchmarkScore": 20.0, "versions": []},
]
MOVED = {"/old-owner/movedlib": "/new-owner/movedlib"}


def _lib(entry: dict) -> dict:
    base = {"branch": "main", "lastUpdateDate": "2026-10-01T10:30:00.000Z", "state": "finalized",
            "totalTokens": 500000, "totalSnippets": 2500}
    base.update(entry)
    return base


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _error(status: int, code: str, message: str, **extra) -> Reply:
    body = {"error": code, "message": message}
    body.update(extra)
    return Reply(status, body)


def _auth_error(req: Request) -> Reply | None:
    auth = req.headers.get("authorization")
    if auth is not None and not auth.startswith("Bearer ctx7sk"):
        return _error(401, "invalid_api_key", "Invalid API key. Please check your API key. API keys should start "
                      "with 'ctx7sk' prefix.")
    return None


def search(req: Request, state: dict | None = None) -> Reply:
    if (err := _auth_error(req)) is not None:
        return err
    if (state or {}).get("context7.libraries"):
        return Reply(200, {"results": [_lib(e) for e in state["context7.libraries"]], "searchFilterApplied": False})
    name = req.query.get("libraryName", "")
    if not name or not req.query.get("query"):
        return _error(400, "validation_error", "Library name is required")
    if name.lower().startswith("zz"):
        return _error(404, "no_libraries_found", f'No libraries found for "{name}". Try a different search term.')
    key = _norm(name)
    hits = [_lib(e) for e in LIBRARIES if key and (key in _norm(e["title"]) or key in _norm(e["id"]))]
    if not hits:  # the real search always finds something loosely related
        hits = [_lib(LIBRARIES[0]), _lib(LIBRARIES[2])]
    hits.sort(key=lambda e: (_norm(e["title"]) != key, -e["stars"]))
    return Reply(200, {"results": hits, "searchFilterApplied": False})


@lru_cache(maxsize=1)
def fastapi_pages() -> list[tuple[str, str]]:
    folder = SHARED / "bench" / "corpora" / "fastapi-docs"
    pages = []
    for path in sorted(folder.rglob("*.md"))[:60]:
        pages.append((path.relative_to(folder).as_posix(), path.read_text(encoding="utf-8", errors="replace")))
    return pages


def _generated(library_id: str, query: str, n: int = 12) -> dict:
    code, info = [], []
    for i in range(n):
        sentences = " ".join(
            f"Step {j + 1} of topic {i} explains how {query} works in {library_id}, with caveats about "
            f"configuration, performance and version {j}.{i}." for j in range(3 + (i * 7) % 11))
        code.append({"codeTitle": f"{query.title()} example {i}", "codeDescription": sentences,
                     "codeLanguage": "typescript", "codeTokens": 150,
                     "codeId": f"https://github.com{library_id}/blob/main/docs/page{i}.mdx#_snippet_{i}",
                     "pageTitle": f"Page {i}",
                     "codeList": [{"language": "typescript",
                                   "code": "\n".join(f"export const value{k} = compute({k}, '{query}');"
                                                     for k in range(4 + i % 9))}]})
        info.append({"pageId": f"https://github.com{library_id}/blob/main/docs/page{i}.mdx",
                     "breadcrumb": f"Guide > Section {i}", "content": sentences * (1 + i % 3),
                     "contentTokens": 200})
    return {"codeSnippets": code, "infoSnippets": info}


def _fastapi(query: str) -> dict:
    pages = fastapi_pages()
    if not pages:
        return _generated("/tiangolo/fastapi", query)
    code, info = [], []
    words = set(re.findall(r"\w+", query.lower()))
    ranked = sorted(pages, key=lambda p: -len(words & set(re.findall(r"\w+", p[1].lower()))))
    for path, text in ranked[:15]:
        blocks = re.findall(r"```(\w*)\n(.*?)```", text, re.S)
        prose = re.sub(r"```.*?```", "", text, flags=re.S).strip()
        info.append({"pageId": f"https://github.com/fastapi/fastapi/blob/master/docs/en/docs/{path}",
                     "breadcrumb": path.replace("/", " > "), "content": prose[:6000], "contentTokens": 0})
        if blocks:
            lang, body = blocks[0]
            code.append({"codeTitle": f"Example from {path}", "codeDescription": prose[:400],
                         "codeLanguage": lang or "python", "codeTokens": 0,
                         "codeId": f"https://github.com/fastapi/fastapi/blob/master/docs/en/docs/{path}#_snippet_0",
                         "pageTitle": path, "codeList": [{"language": lang or "python", "code": body}]})
    return {"codeSnippets": code, "infoSnippets": info}


def context(req: Request, state: dict | None = None) -> Reply:
    if (err := _auth_error(req)) is not None:
        return err
    if (state or {}).get("context7.body") is not None:
        return Reply(200, state["context7.body"])
    library_id = req.query.get("libraryId", "")
    query = req.query.get("query", "")
    if not re.match(r"^/[^/]+/[^/]+([/@][^/]+)?$", library_id) or not query:
        return _error(400, "invalid_library_id", "Invalid library ID")
    base = re.split(r"[@]", library_id)[0]
    base = "/".join(base.split("/")[:3])
    if base in MOVED:
        return _error(301, "library_redirected", f"Library {base} has moved.", redirectUrl=MOVED[base])
    known = {e["id"] for e in LIBRARIES} | set(MOVED.values())
    if base not in known:
        return _error(404, "library_not_found",
                      f'Library "{library_id}" not found. Please check the library ID or your access permissions.')
    if base == "/processing/lib":
        return _error(202, "library_not_finalized", f"Library {base} not finalized yet.")
    if base == "/empty/emptylib":
        return _error(404, "no_snippets_found", "No snippets found for this library and query.")
    body = _fastapi(query) if base == "/tiangolo/fastapi" else _generated(library_id, query)
    if req.query.get("type", "txt") != "json":
        text = "\n\n".join(f"### {s['codeTitle']}\n\nSource: {s['codeId']}\n\n{s['codeDescription']}"
                           for s in body["codeSnippets"])
        return Reply(200, text, content_type="text/plain; charset=utf-8")
    return Reply(200, body)


def install(server: FakeServer) -> None:
    server.route("GET", r"/api/v2/libs/search")(lambda req: search(req, server.state))
    server.route("GET", r"/api/v2/context")(lambda req: context(req, server.state))
