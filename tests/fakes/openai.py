"""Fake OpenAI `/v1/chat/completions` (bearer key check, text and image_url content) and `/v1/embeddings`."""

from __future__ import annotations

from tests.fakes._llm_common import answer_for, embedding_for
from tests.fakes.server import FakeServer, Reply, Request


def _unauthorized(req: Request) -> Reply | None:
    auth = req.headers.get("authorization", "")
    if not auth.startswith("Bearer sk-") or auth.startswith("Bearer sk-bad"):
        return Reply(401, {"error": {"message": "Incorrect API key provided: sk-***.", "type": "invalid_request_error",
                                     "param": None, "code": "invalid_api_key"}})
    return None


def completions(req: Request) -> Reply:
    if refused := _unauthorized(req):
        return refused
    body = req.json() or {}
    if "max_tokens" in body:
        return Reply(400, {"error": {"message": "Use max_completion_tokens", "type": "invalid_request_error",
                                     "param": "max_tokens", "code": None}})
    messages = body.get("messages") or []
    content = messages[-1].get("content") if messages else ""
    if isinstance(content, list):
        has_image = any(p.get("type") == "image_url" for p in content)
        answer = "openai sees an image: a red square" if has_image else "openai: no image"
    else:
        answer = answer_for("openai", "\n".join(str(m.get("content", "")) for m in messages))
    return Reply(200, {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1741569952,
                       "model": body.get("model", "gpt-4o-mini") + "-2024-07-18",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": answer, "refusal": None},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 19, "completion_tokens": len(answer.split()), "total_tokens": 29}})


EMBEDDING_MODELS = ("text-embedding-3-small", "text-embedding-3-large", "text-embedding-ada-002")


def embeddings(req: Request) -> Reply:
    if refused := _unauthorized(req):
        return refused
    body = req.json() or {}
    model = body.get("model", "")
    if model not in EMBEDDING_MODELS:
        return Reply(404, {"error": {"message": f"The model `{model}` does not exist or you do not have access to it.",
                                     "type": "invalid_request_error", "param": None, "code": "model_not_found"}})
    texts = body.get("input")
    texts = [texts] if isinstance(texts, str) else texts
    if not isinstance(texts, list) or not texts or any(not isinstance(t, str) or not t for t in texts):
        return Reply(400, {"error": {"message": "'$.input' is invalid.", "type": "invalid_request_error",
                                     "param": None, "code": None}})
    data = [{"object": "embedding", "embedding": embedding_for(t), "index": i} for i, t in enumerate(texts)]
    data.reverse()  # the index field, not the order, says which text a vector belongs to
    tokens = sum(len(t.split()) for t in texts)
    return Reply(200, {"object": "list", "data": data, "model": model,
                       "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def install(server: FakeServer) -> None:
    server.route("POST", r"/openai/v1/embeddings")(embeddings)
    server.route("POST", r"/openai/v1/chat/completions")(completions)
