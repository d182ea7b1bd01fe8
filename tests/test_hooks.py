"""Hook scripts as Claude Code runs them: real stdin shapes per event (claude-code NOTES §3.4), malformed
input, config modes, job announcements; every call a real process (bench/hooks.py measures their time)."""

from __future__ import annotations

import importlib
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.hooks_fixtures import (
    COMMON,
    CONTEXT7,
    PROMPT,
    SESSION_START,
    SUBAGENT,
    WEBFETCH,
    add_job,
    context,
    hook,
    pre_tool,
    set_config,
    subagent_start,
)


# -- SessionStart ---------------------------------------------------------------------------------
def test_session_start_names_configured_providers_never_keys(home):
    result = hook("session-start", SESSION_START,
                  env={"PERPLEXITY_API_KEY": "sk-canary-PPLX-1234", "OD_TAVILY_API_KEY": "tvly-canary-5678"})

    out = result.json["hookSpecificOutput"]
    assert out["hookEventName"] == "SessionStart"
    text = out["additionalContext"]
    assert "keys set: perplexity, tavily" in text and "no key: gemini, openai" in text
    assert "Context7 anonymous" in text and "keyless fallback" not in text
    assert "canary" not in result.stdout
    assert len(text) < 400  # one short line


def test_session_start_reads_keys_from_the_config_file(home):
    set_config(home, "providers:\n  context7:\n    api_key: ctx7sk-canary-0001\n  gemini:\n    api_key: 'g-canary'\n")

    text = context(hook("session-start", SESSION_START))

    assert "Context7 key" in text and "keys set: gemini" in text and "canary" not in text


def test_session_start_announces_finished_jobs_once(home):
    add_job(home, "job-old", "completed", age=60)
    add_job(home, "job-failed", "failed", age=30)
    add_job(home, "job-running", "running")
    add_job(home, "job-pending", "pending")

    first = context(hook("session-start", SESSION_START))
    second = context(hook("session-start", {**SESSION_START, "source": "resume"}))

    assert "job-old (completed), job-failed (failed)" in first
    assert "gsd-research jobs result job-old" in first
    assert "running" not in first and "pending" not in first
    assert "Deep research finished" not in second


# -- UserPromptSubmit -----------------------------------------------------------------------------
def test_user_prompt_submit_announces_only_jobs_finished_since_last_prompt(home):
    add_job(home, "j1", "running")
    assert hook("user-prompt-submit", PROMPT).stdout == ""

    add_job(home, "j1", "completed")
    first = hook("user-prompt-submit", PROMPT)
    again = hook("user-prompt-submit", PROMPT)

    assert first.json["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "j1 (completed)" in context(first)
    assert again.stdout == ""
    assert json.loads((home / "hooks-state.json").read_text())["announced"] == ["j1"]


def test_many_finished_jobs_are_summarised(home):
    for i in range(8):
        add_job(home, f"job{i}", "completed", age=100 - i)

    text = context(hook("user-prompt-submit", PROMPT))

    assert "job0 (completed)" in text and "job4" in text and "job5" not in text
    assert "and 3 more (gsd-research jobs list)" in text


def test_broken_job_files_are_skipped(home):
    (home / "conversation-logs" / "bad").mkdir(parents=True)
    (home / "conversation-logs" / "bad" / "status.json").write_text("{not json")
    (home / "conversation-logs" / "list").mkdir()
    (home / "conversation-logs" / "list" / "status.json").write_text("[1, 2]")
    (home / "conversation-logs" / "stray-file").write_text("x")
    (home / "hooks-state.json").write_text("garbage")
    add_job(home, "good", "cancelled")

    text = context(hook("user-prompt-submit", PROMPT))

    assert "good (cancelled)" in text and "bad" not in text


# -- PreToolUse WebFetch --------------------------------------------------------------------------
def test_webfetch_default_mode_suggests_fetch_without_deciding(home):
    out = hook("pre-webfetch", WEBFETCH).json["hookSpecificOutput"]

    assert out["hookEventName"] == "PreToolUse"
    assert "permissionDecision" not in out  # suggest never approves nor denies
    assert ("gsd-research fetch https://fastapi.tiangolo.com/advanced/events/ "
            "--focus 'how do lifespan events work'") in out["additionalContext"]


def test_webfetch_enforce_denies_with_the_command(home):
    set_config(home, "cache:\n  backend: sqlite\nhooks:\n  webfetch_mode: enforce   # keep pages out\n")

    out = hook("pre-webfetch", pre_tool("WebFetch", {"url": "https://example.com/a", "prompt": "x"},
                                        **SUBAGENT)).json["hookSpecificOutput"]

    assert out["permissionDecision"] == "deny"
    assert "gsd-research fetch https://example.com/a --focus x" in out["permissionDecisionReason"]


def test_webfetch_off_mode_is_silent(home):
    set_config(home, "hooks:\n  webfetch_mode: 'off'\n")

    assert hook("pre-webfetch", WEBFETCH).stdout == ""


def test_webfetch_unknown_mode_falls_back_to_suggest(home):
    set_config(home, "hooks:\n  webfetch_mode: block-everything\n")

    assert "permissionDecision" not in hook("pre-webfetch", WEBFETCH).json["hookSpecificOutput"]


@pytest.mark.parametrize("url", ["http://localhost:8000/x", "http://127.0.0.1/a", "http://10.1.2.3/",
                                 "http://[::1]:8080/", "http://printer.local/"])
def test_webfetch_of_local_addresses_is_never_denied(home, url):
    set_config(home, "hooks:\n  webfetch_mode: enforce\n")

    assert hook("pre-webfetch", pre_tool("WebFetch", {"url": url, "prompt": "x"})).stdout == ""


def test_webfetch_suggestion_is_shell_safe(home):
    nasty = {"url": "https://e.com/a?q=1'; rm -rf ~; echo '", "prompt": "$(touch /tmp/pwned) `id`\nnext"}

    text = context(hook("pre-webfetch", pre_tool("WebFetch", nasty)))

    command = re.search(r"`(gsd-research fetch .*?)` instead", text).group(1)
    import shlex

    argv = shlex.split(command)
    assert argv[:3] == ["gsd-research", "fetch", nasty["url"]]
    assert argv[3:] == ["--focus", "$(touch /tmp/pwned) `id` next"]


# -- PreToolUse Context7 MCP ----------------------------------------------------------------------
def test_context7_in_a_subagent_points_at_docs(home):
    text = context(hook("pre-context7", CONTEXT7))

    assert "gsd-research docs /vercel/next.js 'middleware matcher'" in text


def test_context7_resolve_call_uses_the_library_name(home):
    payload = pre_tool("mcp__context7__resolve-library-id", {"libraryName": "react"}, **SUBAGENT)

    assert "gsd-research docs react QUESTION" in context(hook("pre-context7", payload))


def test_context7_in_the_main_conversation_is_left_alone(home):
    payload = {k: v for k, v in CONTEXT7.items() if k not in SUBAGENT}

    assert hook("pre-context7", payload).stdout == ""


def test_context7_enforce_denies(home):
    set_config(home, "hooks:\n  context7_mode: enforce\n")

    out = hook("pre-context7", CONTEXT7).json["hookSpecificOutput"]

    assert out["permissionDecision"] == "deny" and "gsd-research docs" in out["permissionDecisionReason"]


def test_hooks_json_matchers_select_exactly_the_context7_tools():
    spec = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    groups = {h["args"][0]: g.get("matcher") for event in spec["hooks"].values() for g in event
              for h in g["hooks"]}
    assert set(groups) == {"session-start", "user-prompt-submit", "pre-webfetch", "pre-context7", "subagent-start",
                           "pre-bash"}
    assert groups["pre-webfetch"] == "WebFetch"
    pattern = re.compile(groups["pre-context7"])
    assert pattern.search("mcp__context7__query-docs")
    assert pattern.search("mcp__plugin_context7_context7__resolve-library-id")
    assert not pattern.search("mcp__exa__web_search_exa") and not pattern.search("WebFetch")
    for event in spec["hooks"].values():
        for g in event:
            for h in g["hooks"]:
                assert h["command"] == "${CLAUDE_PLUGIN_ROOT}/hooks/run" and h["timeout"] <= 10


# -- PreToolUse Bash: one research session per subagent ---------------------------------------------
def _bash(command: str, **agent) -> dict:
    return pre_tool("Bash", {"command": command, "description": "research"}, **agent)


S = f" --session {COMMON['session_id']}.{SUBAGENT['agent_id']}"
OURS = "gsd-research docs react 'useEffect cleanup'"
# (command, the command as rewritten or None for left unchanged); S is the option the hook appends
REWRITES = [
    (OURS, OURS + S),
    ('gsd-research --max-tokens 500 search "C# async"', 'gsd-research --max-tokens 500 search "C# async"' + S),
    ("gsd-research expand r714bb979cc", "gsd-research expand r714bb979cc" + S),
    ('researcher search "retry policy" --json', 'researcher search "retry policy" --json' + S),
    ("researcher --chroma-url http://127.0.0.1:8000 --json search q",
     "researcher --chroma-url http://127.0.0.1:8000 --json search q" + S),
    # lists, pipelines, redirections, env prefixes, several lines: each simple command of ours
    ('cd /repo && gsd-research search "q"', f'cd /repo && gsd-research search "q"{S}'),
    ("gsd-research fetch URL | jq .metadata", f"gsd-research fetch URL{S} | jq .metadata"),
    ('gsd-research search "a" ; gsd-research search "b"', f'gsd-research search "a"{S} ; gsd-research search "b"{S}'),
    ("gsd-research docs a || gsd-research search a&", f"gsd-research docs a{S} || gsd-research search a{S}&"),
    ("gsd-research docs react hooks 2>/dev/null", f"gsd-research docs react hooks{S} 2>/dev/null"),
    ('gsd-research search "q" > /tmp/out.json', f'gsd-research search "q"{S} > /tmp/out.json'),
    ("gsd-research docs a >>out.json 2>&1", f"gsd-research docs a{S} >>out.json 2>&1"),
    ("gsd-research docs a &>/dev/null |& tee log", f"gsd-research docs a{S} &>/dev/null |& tee log"),
    ("gsd-research docs a 2", f"gsd-research docs a 2{S}"),
    ("gsd-research > out docs a", f"gsd-research > out docs a{S}"),
    ('researcher search "q" --json | head -50', f'researcher search "q" --json{S} | head -50'),
    ("FOO=1 gsd-research docs a", f"FOO=1 gsd-research docs a{S}"),
    ("gsd-research search q x=y", f"gsd-research search q x=y{S}"),  # an argument, not an env prefix
    ("mkdir -p out\ngsd-research docs a > out/a.json\ngsd-research docs b > out/b.json",
     f"mkdir -p out\ngsd-research docs a{S} > out/a.json\ngsd-research docs b{S} > out/b.json"),
    ("gsd-research search \\\n  --max-tokens 500 q \\\n  | jq .", f"gsd-research search \\\n  --max-tokens 500 q{S} \\\n  | jq ."),
    ("gsd-research docs a # note; ls", f"gsd-research docs a{S} # note; ls"),
    ("# gsd-research docs a\nls", None),
    # quoted operators are arguments
    ('gsd-research search "a && b"', 'gsd-research search "a && b"' + S),
    ("gsd-research search 'x | y; z' > o", f"gsd-research search 'x | y; z'{S} > o"),
    ('gsd-research search "say \\"hi\\" #1"', 'gsd-research search "say \\"hi\\" #1"' + S),
    # only our own calls, only when no session is chosen, never past `--`
    ("gsd-research docs a --session mine && gsd-research docs b", f"gsd-research docs a --session mine && gsd-research docs b{S}"),
    ("gsd-research --session=mine docs a", None), ("GSD_RESEARCH_SESSION=s gsd-research docs a", None),
    ("export GSD_RESEARCH_SESSION=mine; gsd-research docs a", None), ("echo gsd-research a=1", None),
    ("unset GSD_RESEARCH_SESSION && gsd-research docs a", None), ("GSD_RESEARCH_SESSION+=.x; gsd-research docs a", None),
    ('gsd-research recall "what is GSD_RESEARCH_SESSION"', 'gsd-research recall "what is GSD_RESEARCH_SESSION"' + S),
    ("gsd-research search GSD_RESEARCH_SESSION", "gsd-research search GSD_RESEARCH_SESSION" + S),
    ("gsd-research search 'GSD_RESEARCH_SESSION=abc explained'", "gsd-research search 'GSD_RESEARCH_SESSION=abc explained'" + S),
    ("env GSD_RESEARCH_SESSION=mine gsd-research docs a", None),
    ("GSD_RESEARCH_SESSION_X=2 gsd-research docs a # GSD_RESEARCH_SESSION",
     f"GSD_RESEARCH_SESSION_X=2 gsd-research docs a{S} # GSD_RESEARCH_SESSION"),
    ("gsd-research docs -- --x", None), ("ls -la", None), ("echo gsd-research search x", None),
    ("grep gsd-research file | wc -l", None), ("/opt/bin/gsd-research docs a", None),
    ('"gsd-research" docs a', None), ("researcher status", None), ("researcher --chroma-url search status", None),
    ("researcher index docs && ls", None),
    # anything not understood leaves the whole line alone
    ('cd /repo && gsd-research docs "$(cat f)"', None), ("gsd-research docs `id`", None),
    ("gsd-research docs $Q", None), ('gsd-research docs "$Q"', None), ("(gsd-research docs a)", None),
    ("{ gsd-research docs a; }", None), ("gsd-research docs a <<EOF\nx\nEOF", None),
    ("gsd-research docs a <<< x", None), ("gsd-research docs 'open", None), ('gsd-research docs "open', None),
    ("gsd-research docs a \\", None), ("gsd-research docs a >", None), ("gsd-research docs a > | jq", None),
    ("gsd-research docs a > $OUT", None), ("case x in a) gsd-research docs a;; esac", None),
    ("gsd-research docs a\r\n", None), ("gsd-research docs <(ls)", None),
]


@pytest.mark.parametrize("command, rewritten", REWRITES)
def test_pre_bash_appends_the_subagents_session_to_each_call_of_ours_and_decides_nothing(home, command, rewritten):
    out = hook("pre-bash", _bash(command, **SUBAGENT)).json

    expected = rewritten and {"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": {
        "command": rewritten, "description": "research"}}}
    assert out == expected


def test_pre_bash_leaves_the_main_conversations_session_alone(home):
    assert hook("pre-bash", _bash(OURS)).stdout == ""


HOSTILE_IDS = [{"agent_id": "a1; rm -rf ~"}, {"agent_id": "a b"}, {"agent_id": ""}, {"agent_id": 7},
               {"agent_id": "a" * 65}, {"agent_id": "../x"}, {"agent_id": "a\n"},
               {"session_id": "s; rm -rf ~"}, {"session_id": ""}, {"session_id": "é"}, {"session_id": "s" * 129}]


@pytest.mark.parametrize("ids", HOSTILE_IDS, ids=range(len(HOSTILE_IDS)))
def test_pre_bash_refuses_ids_that_are_not_plain(home, ids):
    assert hook("pre-bash", {**_bash(OURS, **SUBAGENT), **ids}).stdout == ""


def test_hooks_json_runs_pre_bash_only_for_our_commands():
    spec = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    handlers = [h for g in spec["hooks"]["PreToolUse"] if g.get("matcher") == "Bash" for h in g["hooks"]]

    assert [(h["args"], h["if"]) for h in handlers] == [(["pre-bash"], "Bash(gsd-research *)"),
                                                        (["pre-bash"], "Bash(researcher *)")]


# -- SubagentStart (GSD's researchers) -----------------------------------------------------------
GSD_RESEARCHERS = ["gsd-phase-researcher", "gsd-project-researcher", "gsd-ui-researcher", "gsd-advisor-researcher",
                   "gsd-ai-researcher", "gsd-domain-researcher", "gsd:gsd-phase-researcher"]
OTHER_AGENTS = ["gsd-research-synthesizer", "gsd-planner", "gsd-executor", "research:research-scout",
                "general-purpose", "Explore", "my-gsd-phase-researcher", "gsd-phase-researcher-x", "",
                "gsd-phase-researcher\n"]


@pytest.mark.parametrize("agent_type", GSD_RESEARCHERS)
def test_subagent_start_gives_gsd_researchers_the_tool_strategy(home, agent_type):
    out = hook("subagent-start", subagent_start(agent_type)).json["hookSpecificOutput"]

    assert out["hookEventName"] == "SubagentStart"
    text = out["additionalContext"]
    for command in ('gsd-research docs LIB "QUESTION"', "gsd-research fetch URL", 'gsd-research search "QUERY"',
                    "gsd-research deep", "gsd-research jobs wait ID --timeout 100", "JOB_RUNNING` (exit 6)",
                    'researcher search "QUERY" --json'):
        assert command in text, command
    assert "Context7 MCP or the ctx7 CLI" in text and "instead of WebFetch" in text
    assert "jobs result" not in text  # `jobs wait` ends with the report: no second fetch of it
    assert len(text) < 1600  # in brief: the agent's own instructions stay in charge


@pytest.mark.parametrize("agent_type", OTHER_AGENTS)
def test_subagent_start_leaves_other_agents_alone(home, agent_type):
    assert hook("subagent-start", subagent_start(agent_type)).stdout == ""


def test_hooks_json_subagent_matcher_is_the_handlers_pattern():
    """The client filters by the matcher; the handler checks again (settings.json registrations may omit it)."""
    spec = json.loads((ROOT / "hooks" / "hooks.json").read_text())
    (group,) = spec["hooks"]["SubagentStart"]
    # the client runs it as an unanchored JS regex (its `$` never matches before a final newline): it anchors itself
    pattern = re.compile(group["matcher"].replace("$", r"\Z"))
    assert group["matcher"] == _module("subagent_start").RESEARCHER.pattern
    assert all(pattern.search(a) for a in GSD_RESEARCHERS)
    assert not any(pattern.search(a) for a in OTHER_AGENTS)


# -- one module per event ---------------------------------------------------------------------------
ALLOWED_IMPORTS = ("gsd_research_hooks", "bootstrap", "__future__", "yaml")


def test_every_event_has_its_own_small_stdlib_only_module():
    import ast
    import sys

    package = ROOT / "hooks" / "gsd_research_hooks"
    _module("common")  # puts hooks/ on sys.path
    events = importlib.import_module("gsd_research_hooks").EVENTS
    assert set(events) == {"session-start", "user-prompt-submit", "pre-webfetch", "pre-context7", "subagent-start",
                           "pre-bash"}
    for name in events.values():
        assert callable(_module(name).handle), name
    for path in package.glob("*.py"):
        text = path.read_text()
        assert len(text.splitlines()) <= 400, path.name
        for node in ast.walk(ast.parse(text)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for mod in names:
                top = mod.split(".")[0]
                # yaml only from an environment bootstrap judged ready (common._yaml)
                assert top in sys.stdlib_module_names or top in ALLOWED_IMPORTS, (path.name, mod)


# -- malformed input and hostile environments -----------------------------------------------------
MALFORMED = ["", "not json", "{", "[1, 2, 3]", "null", '"a string"', "\x00\xff\xfe", '{"tool_input": "x"}',
             '{"tool_input": {"url": 5, "prompt": ["x"]}}', '{"prompt": null, "agent_id": {}}',
             "{" + '"a":' * 5000 + "1" + "}" * 5000]


@pytest.mark.parametrize("event", ["session-start", "user-prompt-submit", "pre-webfetch", "pre-context7",
                                   "subagent-start", "pre-bash"])
@pytest.mark.parametrize("payload", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_stdin_never_crashes(home, event, payload):
    result = hook(event, payload)

    doc = result.json  # nothing, or one JSON object
    assert doc is None or isinstance(doc, dict)


def test_unknown_event_and_broken_config_are_harmless(home):
    set_config(home, "hooks: [\n  : - {{\n\x00")
    assert hook("no-such-event", SESSION_START).stdout == ""
    assert "additionalContext" in hook("pre-webfetch", WEBFETCH).json["hookSpecificOutput"]


def test_unwritable_state_file_still_answers(home):
    """The state file cannot be written (a directory in its place, which fails even for root)."""
    add_job(home, "j", "completed")
    (home / "hooks-state.json").mkdir()

    first = hook("session-start", SESSION_START)
    second = hook("session-start", SESSION_START)

    assert "j (completed)" in context(first) and "j (completed)" in context(second)  # not remembered


def test_missing_home_directory(tmp_path):
    result = hook("user-prompt-submit", PROMPT, env={"GSD_RESEARCH_HOME": str(tmp_path / "does-not-exist")})

    assert result.stdout == ""


def _bare_hooks(tmp_path) -> tuple[Path, dict]:
    """A copy of the plugin's hooks/ and bootstrap/ with no environment anywhere."""
    for part in ("hooks", "bootstrap"):
        shutil.copytree(ROOT / part, tmp_path / "plugin" / part, ignore=shutil.ignore_patterns("__pycache__"))
    return (tmp_path / "plugin" / "hooks" / "run",
            {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "xdg"), "GSD_RESEARCH_VENV": ""})


def test_hooks_run_on_system_python_without_the_environment(tmp_path):
    runner, env = _bare_hooks(tmp_path)

    result = hook("pre-webfetch", WEBFETCH, env=env, runner=runner)

    assert "gsd-research fetch" in context(result)
    assert not list((tmp_path / "plugin").rglob("__pycache__"))  # nothing written (install.sh removes its files)


@pytest.mark.parametrize("entry", [None, "import sys; sys.exit(2)", "raise SystemExit('boom')", "def broken(:\n"],
                         ids=["deleted", "exits 2", "raises", "unparsable"])
def test_a_broken_or_deleted_entry_never_blocks_the_session(tmp_path, entry):
    """Claude Code blocks the prompt or tool call on a hook's exit status 2 (python's for a missing file): a
    GSD installer asked to remove our files, or an upgrade half done, must not stop the user's work."""
    runner, env = _bare_hooks(tmp_path)
    target = runner.parent / "entry.py"
    if entry is None:
        target.unlink()
    else:
        target.write_text(entry)

    result = hook("user-prompt-submit", PROMPT, env=env, runner=runner)

    assert (result.code, result.stdout) == (0, "")


def test_session_start_without_any_environment_says_not_available(tmp_path):
    """install.sh's route (no plugin data directory) with no environment: never 'available'."""
    runner, env = _bare_hooks(tmp_path)

    text = context(hook("session-start", SESSION_START, env=env, runner=runner))

    assert text.startswith("gsd-research is NOT available: no Python environment for gsd-research")
    assert "ENVIRONMENT_MISSING" in text and "install.sh" in text and "available through" not in text


def test_session_start_names_an_environment_without_the_package(tmp_path):
    runner, env = _bare_hooks(tmp_path)
    empty = tmp_path / "empty-venv"
    (empty / "bin").mkdir(parents=True)
    (empty / "bin" / "python").symlink_to("/usr/bin/python3")

    text = context(hook("session-start", SESSION_START, env={**env, "GSD_RESEARCH_VENV": str(empty)}, runner=runner))

    assert f"the Python environment {empty} lacks the gsd-research package" in text
    assert "available through" not in text


def test_subagent_start_without_the_tools_sends_the_researcher_to_its_usual_tools(tmp_path):
    runner, env = _bare_hooks(tmp_path)
    event = {**COMMON, "hook_event_name": "SubagentStart", "agent_id": "a1", "agent_type": "gsd-phase-researcher"}

    text = context(hook("subagent-start", event, env=env, runner=runner))

    assert "NOT available" in text and "Research with your usual tools" in text


# -- config.yaml, read as the CLI reads it --------------------------------------------------------
def _module(name: str = "common"):
    """A module of hooks/gsd_research_hooks/, imported as the entry script does (its directory on sys.path)."""
    import sys

    hooks_dir = str(ROOT / "hooks")
    if hooks_dir not in sys.path:
        sys.path.insert(0, hooks_dir)
    return importlib.import_module(f"gsd_research_hooks.{name}")


@pytest.mark.parametrize("text", [
    "hooks:\n  webfetch_mode: enforce\n",
    "hooks: {webfetch_mode: enforce}\n",
    "{hooks: {webfetch_mode: enforce}, cache: {backend: sqlite}}\n",
    "hooks:\n  webfetch_mode: \"enforce\"  # keep pages out\n",
    "---\nhooks:\n    webfetch_mode: !!str enforce\n",
])
def test_the_hook_enforces_what_the_cli_reads_in_any_yaml_style(home, text):
    from gsd_research.core.config import load_user_config

    set_config(home, text)

    assert load_user_config()["hooks"]["webfetch_mode"] == "enforce"
    assert hook("pre-webfetch", WEBFETCH).json["hookSpecificOutput"]["permissionDecision"] == "deny"


@pytest.mark.parametrize("text, problem", [
    ("hooks: [\n  webfetch_mode: enforce\n", "is not valid YAML"),
    ("- hooks\n", "does not hold a mapping"),
])
def test_a_config_the_hooks_cannot_read_is_said_at_session_start(home, text, problem):
    set_config(home, text)

    said = context(hook("session-start", SESSION_START))

    assert "could not read their settings" in said and problem in said


def test_the_hooks_keep_their_reading_of_the_config_without_keys_until_it_changes(home):
    set_config(home, "providers:\n  tavily:\n    api_key: tvly-canary-0042\nhooks: {webfetch_mode: enforce}\n")

    decisions = [hook("pre-webfetch", WEBFETCH).json["hookSpecificOutput"].get("permissionDecision")
                 for _ in range(2)]
    kept = (home / "hooks-config.json").read_text()
    set_config(home, "hooks: {webfetch_mode: suggest}\n")
    changed = hook("pre-webfetch", WEBFETCH).json["hookSpecificOutput"].get("permissionDecision")

    assert decisions == ["deny", "deny"] and changed is None
    assert "tvly-canary" not in kept and '"enforce"' in kept


def test_without_an_environment_to_read_it_the_config_leaves_every_mode_at_its_default(tmp_path):
    runner, env = _bare_hooks(tmp_path)
    (tmp_path / "gsd").mkdir(mode=0o700)
    (tmp_path / "gsd" / "config.yaml").write_text("hooks: {webfetch_mode: enforce}\n")

    result = hook("pre-webfetch", WEBFETCH, env={**env, "GSD_RESEARCH_HOME": str(tmp_path / "gsd")}, runner=runner)

    assert "permissionDecision" not in result.json["hookSpecificOutput"]  # suggest, not a guess at enforce


def test_mode_set_through_gsd_research_config_reaches_the_hook(home, cli):
    assert cli("config", "set", "hooks.webfetch_mode", "enforce").code == 0

    out = hook("pre-webfetch", WEBFETCH).json["hookSpecificOutput"]

    assert out["permissionDecision"] == "deny"
    assert cli("config", "set", "hooks.webfetch_mode", "off").code == 0
    assert hook("pre-webfetch", WEBFETCH).stdout == ""
