"""Fake OpenAI `/v1/chat/completions`: bearer key check, text and image_url content."""

from __future__ import annotations

from tests.fakes._llm_common import answer_for
from tests.fakes.server import FakeServer, Reply, Request


def completions(req: Request) -> Reply:
    auth = req.headers.get("authorization", "")
    if not auth.startswith("Bearer sk-") or auth.startswith("Bearer sk-bad"):
        return Reply(401, {"error": {"message": "Incorrect API key provided: sk-***.", "type": "invalid_request_error",
                                     "param": None, "code": "invalid_api_key"}})
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


def install(server: FakeServer) -> None:
    server.route("POST", r"/openai/v1/chat/completions")(completions)
