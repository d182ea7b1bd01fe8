"""A minimal stdio MCP server named like Context7's (tools resolve-library-id and query-docs), stdlib only.

Newline-delimited JSON-RPC: initialize, tools/list, tools/call, ping. Used to fire the plugin's PreToolUse hook
on a real `mcp__context7__*` tool call in a subagent."""

import json
import sys

TOOLS = [
    {"name": "resolve-library-id", "description": "Resolve a library name to a Context7 id.",
     "inputSchema": {"type": "object", "properties": {"libraryName": {"type": "string"}}, "required": ["libraryName"]}},
    {"name": "query-docs", "description": "Documentation snippets for a Context7 library id and a question.",
     "inputSchema": {"type": "object", "properties": {"libraryId": {"type": "string"}, "query": {"type": "string"}},
                     "required": ["libraryId", "query"]}},
]


def answer(msg: dict):
    method = msg.get("method")
    if method == "initialize":
        return {"protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}}, "serverInfo": {"name": "context7", "version": "0.0.1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        args = msg.get("params", {}).get("arguments", {})
        return {"content": [{"type": "text", "text": f"FAKE_MCP_DOCS {json.dumps(args, sort_keys=True)}"}]}
    return {}


for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if "id" not in msg:
        continue  # a notification
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}) + "\n")
    sys.stdout.flush()
