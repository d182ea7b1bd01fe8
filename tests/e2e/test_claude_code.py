"""End to end with the real Claude Code client: `claude -p --plugin-dir <repo>` against a scripted fake
Messages API on 127.0.0.1 and the fake Context7. The scripted model calls gsd-research through the Bash tool;
the tests read what came back, what the hooks added and what the client loaded."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.e2e.conftest import clean_env
from tests.e2e.fake_anthropic import bash, request_text, result_json, steps, tool_results

pytestmark = pytest.mark.e2e


@pytest.fixture
def claude(claude_bin, fake_api, fake, tmp_path):
    """Run `claude -p PROMPT --plugin-dir <repo>`; returns the parsed `--output-format json` result."""
    project = tmp_path / "project"
    project.mkdir()

    def run(prompt: str, *allowed: str, timeout: float = 60, mcp: dict | None = None) -> dict:
        env = clean_env(ANTHROPIC_BASE_URL=fake_api.url, CONTEXT7_API_URL=fake.url + "/api")
        cmd = [str(claude_bin), "-p", prompt, "--plugin-dir", str(ROOT), "--output-format", "json",
               "--no-session-persistence", "--debug-file", str(tmp_path / "debug.log")]
        if mcp:  # connect before the first request, tools loaded up front (no ToolSearch deferral)
            env.update(MCP_CONNECTION_NONBLOCKING="0", ENABLE_TOOL_SEARCH="false")
            cmd += ["--mcp-config", json.dumps({"mcpServers": mcp}), "--strict-mcp-config"]
        if allowed:
            cmd += ["--allowedTools", *allowed]
        proc = subprocess.run(cmd, env=env, cwd=project, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, f"claude failed ({proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}"
        return json.loads(proc.stdout)

    run.debug_log = tmp_path / "debug.log"
    return run


def results_of(fake_api) -> list[dict]:
    """The tool results of the main thread's last request (each request repeats the earlier ones)."""
    main = [b for b in fake_api.messages() if "Research React" in request_text(b) or "Read the guide" in
            request_text(b)]
    return tool_results(main[-1]) if main else []


def test_model_calls_gsd_research_through_bash_and_gets_json(claude, fake_api, fake, home):
    """Plugin bin/ on the Bash tool's PATH (PATH has no other gsd-research); SessionStart context arrives."""
    (home / "conversation-logs" / "job-e2e").mkdir(parents=True)
    (home / "conversation-logs" / "job-e2e" / "status.json").write_text('{"status": "completed"}')
    prompt = "Research React effects. " + steps(bash("gsd-research docs react 'useEffect cleanup' --max-tokens 400"),
                                                bash("gsd-research --version"))

    out = claude(prompt, "Bash(gsd-research:*)")

    assert out["subtype"] == "success" and out["result"].startswith("FAKE_DONE")
    blocks = results_of(fake_api)
    docs, version = result_json(blocks[0]), result_json(blocks[1])
    assert docs["success"] is True and docs["command"] == "docs"
    assert docs["metadata"]["library_id"] == "/facebook/react"
    assert docs["metadata"]["tokens_used"] <= 400
    assert version["command"] == "version" and version["success"] is True
    assert fake.hits("/api/v2/context")  # the real HTTP call reached fake Context7
    first = request_text(fake_api.messages()[0])
    assert "SessionStart hook additional context: gsd-research is available through Bash" in first
    assert "docs ready (Context7 anonymous)" in first
    assert "Deep research finished: job-e2e (completed)" in first


def test_skills_commands_and_agent_load_and_the_agent_uses_bash(claude, fake_api):
    """The plugin agent runs as a subagent and calls gsd-research through Bash in its own thread."""
    sub = steps(bash("gsd-research docs /vercel/next.js 'middleware matcher' --max-tokens 300"))
    agent = {"tool": "Agent", "input": {"subagent_type": "research:research-scout", "description": "Research",
                                        "prompt": "Research Next.js middleware. " + sub}}

    out = claude("Plan phase 1. " + steps(agent), "Bash(gsd-research:*)", "Agent")

    assert out["subtype"] == "success"
    bodies = fake_api.messages()
    main = request_text(bodies[0])
    main_tools = json.dumps(bodies[0]["tools"])
    assert "research:library-docs" in main  # skill listed to the model
    assert "research:research-scout" in main + main_tools  # the agent is offered to the model
    sub_bodies = [b for b in bodies if "Research Next.js middleware" in request_text(b)
                  and not any(t.get("name") == "Agent" for t in b["tools"])]
    assert sub_bodies, "the subagent never made a request"
    sub_tools = {t["name"] for t in sub_bodies[0]["tools"]}
    assert "Bash" in sub_tools and not any(name.startswith("mcp__") for name in sub_tools)
    assert "Tool Selection Guide" in request_text(sub_bodies[0]) or "Tool Selection Guide" in json.dumps(
        sub_bodies[0].get("system"))
    sub_results = tool_results(sub_bodies[-1])
    assert sub_results, "the subagent's Bash call returned nothing"
    docs = result_json(sub_results[0])
    assert docs["success"] is True and docs["metadata"]["library_id"] == "/vercel/next.js"
    assert docs["metadata"]["tokens_used"] <= 300


def test_slash_command_expands_with_its_first_action(claude, fake_api):
    claude("/research:docs react useEffect cleanup")

    text = request_text(fake_api.messages()[0])
    assert "/research:docs" in text
    assert "Library documentation request: react useEffect cleanup" in text
    assert "Your first action: run `gsd-research docs`" in text


def _webfetch(claude, home, mode: str | None):
    if mode:
        (home / "config.yaml").write_text((home / "config.yaml").read_text() + f"hooks:\n  webfetch_mode: {mode}\n")
    call = {"tool": "WebFetch", "input": {"url": "https://docs.example.com/guide", "prompt": "install steps"}}
    return claude("Read the guide. " + steps(call), "WebFetch")


def test_webfetch_enforce_denies_and_points_at_fetch(claude, fake_api, home):
    _webfetch(claude, home, "enforce")

    block = results_of(fake_api)[0]
    assert block.get("is_error") is True
    text = json.dumps(block)
    assert "hooks.webfetch_mode=enforce" in text
    assert "gsd-research fetch https://docs.example.com/guide --focus 'install steps'" in text


def test_webfetch_default_suggests_and_lets_it_run(claude, fake_api, home):
    _webfetch(claude, home, None)

    later = "\n".join(request_text(b) for b in fake_api.messages()[1:])
    assert "gsd-research: Read this page with `gsd-research fetch https://docs.example.com/guide" in later
    assert "hooks.webfetch_mode=enforce" not in later


def test_plugin_is_loaded_as_declared(claude, claude_bin, fake_api):
    claude("hello")

    log = Path(claude.debug_log).read_text()
    assert "Loaded inline plugin from path: research" in log or "research" in log
    assert "Hook SessionStart" in log and "provided additionalContext" in log
    assert "Error" not in "".join(line for line in log.splitlines() if "gsd-research" in line or "hooks/run" in line)


def test_context7_mcp_call_in_a_subagent_is_pointed_at_gsd_research_docs(claude, fake_api):
    """A real mcp__context7__query-docs call (stdio fake server): hint in the subagent, none in the main thread."""
    server = {"context7": {"command": str(ROOT / ".venv" / "bin" / "python"),
                           "args": [str(ROOT / "tests" / "e2e" / "fake_context7_mcp.py")]}}
    inner = {"tool": "mcp__context7__query-docs", "input": {"libraryId": "/vercel/next.js", "query": "middleware"}}
    agent = {"tool": "Agent", "input": {"subagent_type": "general-purpose", "description": "Docs",
                                        "prompt": "Look up Next.js. " + steps(inner), "run_in_background": False}}
    main_call = {"tool": "mcp__context7__query-docs", "input": {"libraryId": "/facebook/react", "query": "hooks"}}

    claude("Go. " + steps(agent, main_call), "Agent", "mcp__context7__query-docs", mcp=server)

    bodies = fake_api.messages()
    assert any(t["name"] == "mcp__context7__query-docs" for t in bodies[0]["tools"]), "fake MCP server not loaded"
    texts = [request_text(b) for b in bodies]
    sub_after_call = [t for t in texts if "Look up Next.js" in t and "FAKE_MCP_DOCS" in t and "Go. <<" not in t]
    assert sub_after_call, "the subagent's MCP call never returned"
    assert "prefer `gsd-research docs /vercel/next.js middleware` (Bash)" in sub_after_call[-1]
    main_after_call = [t for t in texts if "Go. <<" in t and 'FAKE_MCP_DOCS {"libraryId": "/facebook/react"' in t]
    assert main_after_call and "gsd-research docs /facebook/react" not in main_after_call[-1]


QUERY = "gsd-research docs react 'useEffect cleanup' --max-tokens 400"


@pytest.mark.parametrize("command", [QUERY, f"echo start; {QUERY} | cat"], ids=["plain", "compound"])
def test_parallel_subagents_each_get_the_passages_a_sibling_already_saw(claude, fake_api, command):
    """GSD's researchers share one client session: each subagent's calls get its own research session, also in a
    list or pipeline (the client runs the hook for it: its `if` filter matches each part of a compound command)."""
    ask = steps(bash(command))
    agents = [{"tool": "Agent", "input": {"subagent_type": "general-purpose", "description": f"Research {n}",
                                          "prompt": f"Researcher {n}. " + ask, "run_in_background": False}}
              for n in "AB"]

    claude("Plan phase 2. " + steps(*agents), "Bash(gsd-research:*)", "Agent")

    answers = {}
    for body in fake_api.messages():
        first = request_text({"messages": body["messages"][:1]})
        for n in "AB":
            if f"Researcher {n}." in first and "Plan phase 2" not in first and tool_results(body):
                answers[n] = result_json(tool_results(body)[0])
    assert set(answers) == {"A", "B"}, "a subagent's call never returned"
    for doc in answers.values():
        assert doc["success"] is True and doc["results"]
        assert all("content" in r and "repeat" not in r for r in doc["results"])
    assert answers["A"]["results"][0]["content"] == answers["B"]["results"][0]["content"]


def test_a_subagents_scoped_call_still_needs_the_users_permission(claude, fake_api, fake):
    """The session hook rewrites the command but decides nothing: with no rule allowing it, it does not run."""
    ask = steps(bash("gsd-research docs react 'useEffect cleanup' --max-tokens 400"))
    agent = {"tool": "Agent", "input": {"subagent_type": "general-purpose", "description": "Research",
                                        "prompt": "Researcher A. " + ask, "run_in_background": False}}

    claude("Plan phase 2. " + steps(agent), "Agent")

    sub = [b for b in fake_api.messages() if "Researcher A." in request_text({"messages": b["messages"][:1]})
           and "Plan phase 2" not in request_text({"messages": b["messages"][:1]}) and tool_results(b)]
    assert sub, "the subagent's call never returned"
    assert "requires approval" in json.dumps(tool_results(sub[-1])[0])
    assert not fake.hits("/api/v2/context")
