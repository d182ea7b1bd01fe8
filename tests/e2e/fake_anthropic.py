"""A scripted fake Anthropic Messages API on 127.0.0.1 for driving the real `claude -p` client.

The script lives in the conversation itself: the first user message of a thread (the prompt, or an Agent
tool's prompt for a subagent) carries `<<STEPS:[...]>>`, a JSON list of tool calls
(`{"tool": "Bash", "input": {...}}`). After n tool calls in that thread the model emits step n as a `tool_use`;
after the last step it answers with text (`FAKE_DONE` plus each tool result's first 80 characters).
Threads without steps get `FAKE_OK`. Every request is logged for the test to inspect.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARKER = "<<STEPS:"


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(block.get("text", ""))
            elif block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content")))
    return "\n".join(parts)


def tool_results(body: dict) -> list[dict]:
    """Every tool_result block of a request, in order."""
    out = []
    for msg in body.get("messages", []):
        if msg.get("role") == "user" and isinstance(msg.get("content"), list):
            out.extend(b for b in msg["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
    return out


def request_text(body: dict) -> str:
    """System prompt + all message text of a request (what the model would see)."""
    system = body.get("system")
    parts = [system if isinstance(system, str) else _text_of(system)]
    parts += [_text_of(m.get("content")) for m in body.get("messages", [])]
    return "\n".join(parts)


def plan(body: dict) -> list[dict] | None:
    messages = body.get("messages", [])
    first = next((m for m in messages if m.get("role") == "user"), None)
    text = _text_of(first.get("content")) if first else ""
    start = text.find(MARKER)
    if start < 0:
        return None
    steps, _ = json.JSONDecoder().raw_decode(text, start + len(MARKER))  # nested markers stay inside strings
    return steps


def respond(body: dict, counter: list[int]) -> tuple[list[dict], str]:
    steps = plan(body)
    # the client merges consecutive assistant turns: count the tool calls already made, not the messages
    turns = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant" and isinstance(m.get("content"), list)
                for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use")
    if steps is None:
        return [{"type": "text", "text": "FAKE_OK"}], "end_turn"
    if turns < len(steps):
        counter[0] += 1
        step = steps[turns]
        return [{"type": "tool_use", "id": f"toolu_fake{counter[0]:04d}", "name": step["tool"],
                 "input": step["input"]}], "tool_use"
    summary = " | ".join(_text_of(r.get("content"))[:80] for r in tool_results(body))
    return [{"type": "text", "text": f"FAKE_DONE {summary}"}], "end_turn"


def sse(blocks: list[dict], stop: str, model: str) -> bytes:
    events = [("message_start", {"type": "message_start", "message": {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            events.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            events.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class FakeAnthropic:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.arrivals: list[tuple[float, dict]] = []  # (time.monotonic() on arrival, body) of every request
        self._lock = threading.Lock()
        self._counter = [0]
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def messages(self) -> list[dict]:
        """Bodies of the Messages API requests that had tools (the agent loop, main or subagent)."""
        with self._lock:
            return [r for r in self.requests if r.get("tools")]

    def start(self) -> FakeAnthropic:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _reply(self, status: int, payload: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_HEAD(self):
                self._reply(200, b"", "text/plain")

            def do_GET(self):
                self._reply(200, b"{}", "application/json")

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                if "count_tokens" in self.path:
                    return self._reply(200, b'{"input_tokens": 100}', "application/json")
                if not self.path.startswith("/v1/messages"):
                    return self._reply(404, b'{"type":"error","error":{"type":"not_found_error"}}',
                                       "application/json")
                with fake._lock:
                    fake.requests.append(body)
                    fake.arrivals.append((time.monotonic(), body))
                    blocks, stop = respond(body, fake._counter)
                model = body.get("model", "claude-fake")
                if body.get("stream"):
                    return self._reply(200, sse(blocks, stop, model), "text/event-stream")
                message = {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                           "content": blocks, "stop_reason": stop, "stop_sequence": None,
                           "usage": {"input_tokens": 10, "output_tokens": 5}}
                return self._reply(200, json.dumps(message).encode(), "application/json")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()


# -- what a test scripts and reads -------------------------------------------------------------------

def bash(command: str) -> dict:
    return {"tool": "Bash", "input": {"command": command, "description": "run gsd-research"}}


def steps(*calls: dict) -> str:
    """A prompt part the fake model reads as the tool calls to make, in order."""
    return MARKER + json.dumps(list(calls)) + ">>"


def result_json(block: dict) -> dict:
    """The JSON document of a Bash result (the tool puts 'Exit code N' and stderr lines around stdout)."""
    content = block["content"]
    text = content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    documents = [line for line in text.splitlines() if line.startswith("{")]
    if len(documents) != 1:
        raise ValueError(f"expected one JSON document in {text!r}")
    return json.loads(documents[0])
