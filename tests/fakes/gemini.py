"""Fake Gemini `generateContent`: key check, answers with Google Search grounding metadata, images."""

from __future__ import annotations

from tests.fakes._llm_common import answer_for
from tests.fakes.server import FakeServer, Reply, Request

INVALID_KEY = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                         "status": "INVALID_ARGUMENT",
                         "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                      "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}
GROUNDED_TEXT = ("Spain won Euro 2024, defeating England 2-1 in the final. "
                 "This victory marks Spain's record fourth European Championship title.")


PAGES = {"AUZIYQHdT8r3kq": "https://www.aljazeera.com/sports/euro-final",
         "AUZIYQFw2Lm9pb": "https://www.uefa.com/euro2024/final/"}  # where each grounding redirect leads


def _grounding(host: str) -> dict:
    """As Gemini's, its source links redirects of the fake's own (Gemini's lead through vertexaisearch)."""
    first = len(b"Spain won Euro 2024, defeating England 2-1 in the final.")
    return {
        "webSearchQueries": ["UEFA Euro 2024 winner", "who won euro 2024"],
        "searchEntryPoint": {"renderedContent": "<!-- widget -->"},
        "groundingChunks": [
            {"web": {"uri": f"http://{host}/grounding-api-redirect/{token}", "title": title}}
            for token, title in zip(PAGES, ("aljazeera.com", "uefa.com"), strict=True)
        ],
        "groundingSupports": [
            {"segment": {"endIndex": first, "text": "Spain won Euro 2024..."}, "groundingChunkIndices": [0]},
            {"segment": {"startIndex": first + 1, "endIndex": len(GROUNDED_TEXT.encode()),
                         "text": "This victory marks..."}, "groundingChunkIndices": [0, 1]},
        ],
    }


def generate(req: Request) -> Reply:
    key = req.headers.get("x-goog-api-key") or req.query.get("key")
    if not key or key.startswith("bad"):
        return Reply(400, INVALID_KEY)
    body = req.json() or {}
    model = req.path.rsplit("/", 1)[1].split(":", 1)[0]
    parts = [p for c in body.get("contents") or [] for p in c.get("parts") or []]
    text = "\n".join(p.get("text", "") for p in parts if "text" in p)
    images = [p for p in parts if "inlineData" in p]
    candidate: dict = {"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}
    if any("google_search" in t or "googleSearch" in t for t in body.get("tools") or []):
        if "no-search" in text:
            answer = "I can answer that without searching: 42."
        else:
            answer = GROUNDED_TEXT
            candidate["groundingMetadata"] = _grounding(req.headers.get("host", "127.0.0.1"))
    elif images:
        answer = f"gemini sees a {images[0]['inlineData']['mimeType']} image ({len(images[0]['inlineData']['data'])} b64 chars)"
    else:
        answer = answer_for("gemini", text)
    candidate["content"]["parts"] = [{"text": answer}]
    return Reply(200, {"candidates": [candidate], "modelVersion": model, "responseId": "fake-1",
                       "usageMetadata": {"promptTokenCount": len(text.split()), "candidatesTokenCount": len(answer.split()),
                                         "totalTokenCount": len(text.split()) + len(answer.split())}})


def redirect(req: Request) -> Reply:
    target = PAGES.get(req.path.rsplit("/", 1)[1])
    return Reply(302, b"", headers={"Location": target}) if target else Reply(404, {"error": "unknown"})


def install(server: FakeServer) -> None:
    server.route("POST", r"/gemini/v1beta/models/[^/]+:generateContent")(generate)
    server.route("GET", r"/grounding-api-redirect/\w+")(redirect)
