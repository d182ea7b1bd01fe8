"""Fake Ollama: `/api/tags` (models from server.state['ollama_models'], answered after
server.state['ollama_tags_delay'] seconds), `/api/chat` incl. images and NDJSON, `/api/embed` (bag-of-words
vectors)."""

from __future__ import annotations

import json

from tests.fakes._llm_common import answer_for, embedding_for
from tests.fakes.server import FakeServer, Reply, Request

DEFAULT_MODELS = ["qwen3-vl:8b", "llama3.2:latest", "nomic-embed-text:latest"]
VISION = ("qwen3-vl", "llava")


def tags(req: Request, server: FakeServer) -> Reply:
    names = server.state.get("ollama_models", DEFAULT_MODELS)
    return Reply(200, {"models": [{"name": n, "model": n, "size": 1, "details": {"format": "gguf"}} for n in names]},
                 delay=server.state.get("ollama_tags_delay", 0))


def _not_pulled(model: str, server: FakeServer) -> Reply | None:
    """The real server's 404 for a model that was never pulled."""
    pulled = server.state.get("ollama_models", DEFAULT_MODELS)
    if model not in pulled and f"{model}:latest" not in pulled:
        return Reply(404, {"error": f'model "{model}" not found, try pulling it first'})
    return None


def chat(req: Request, server: FakeServer) -> Reply:
    body = req.json() or {}
    model = body.get("model", "")
    if missing := _not_pulled(model, server):
        return missing
    messages = body.get("messages") or []
    user = messages[-1] if messages else {}
    if user.get("images"):
        if not model.startswith(VISION):
            return Reply(400, {"error": f"{model} does not support images"})
        answer = f"ollama sees an image ({len(user['images'][0])} b64 chars): a red square"
    else:
        answer = answer_for("ollama", "\n".join(str(m.get("content", "")) for m in messages))
    done = {"model": model, "created_at": "2026-11-01T00:00:00Z", "done": True, "done_reason": "stop",
            "prompt_eval_count": 26, "eval_count": len(answer.split())}
    if body.get("stream", True):  # the real server streams NDJSON unless told not to
        lines = [dict(done, message={"role": "assistant", "content": w + " "}, done=False) for w in answer.split()]
        chunks = [json.dumps(x).encode() + b"\n" for x in lines + [dict(done, message={"role": "assistant", "content": ""})]]
        return Reply(200, None, content_type="application/x-ndjson", chunks=chunks)
    return Reply(200, dict(done, message={"role": "assistant", "content": f"<think>hmm</think>{answer}"}))


def embed(req: Request, server: FakeServer) -> Reply:
    body = req.json() or {}
    model = body.get("model", "")
    if missing := _not_pulled(model, server):
        return missing
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return Reply(400, {"error": "invalid input type"})
    return Reply(200, {"model": model, "embeddings": [embedding_for(t) for t in texts],
                       "total_duration": 14143917, "load_duration": 1019500, "prompt_eval_count": 8})


def install(server: FakeServer) -> None:
    server.route("POST", r"/ollama/api/embed")(lambda req: embed(req, server))
    server.route("GET", r"/ollama/api/tags")(lambda req: tags(req, server))
    server.route("POST", r"/ollama/api/chat")(lambda req: chat(req, server))
    server.route("GET", r"/ollama/?")(lambda req: Reply(200, "Ollama is running", content_type="text/plain"))
