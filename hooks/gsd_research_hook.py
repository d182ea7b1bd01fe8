"""Claude Code hooks of gsd-research: one stdlib-only script, one sub-command per event.

    gsd_research_hook.py session-start | user-prompt-submit | pre-webfetch | pre-context7

Each reads the event JSON on stdin and prints at most one JSON document on stdout. It never crashes a
session: malformed input, unreadable files or any bug end in exit 0 with no decision. Only
`pre-webfetch` in `enforce` mode blocks, on purpose, with a JSON `permissionDecision: "deny"`.
It runs under `python -I -S` (no site-packages): it must not import the gsd_research package, so it reads
GSD_RESEARCH_HOME/config.yaml with a small block-YAML reader and the deep-research job layout
(conversation-logs/<id>/status.json) directly.
"""

from __future__ import annotations

import json
import os
import sys

# Provider -> (key variables), as in gsd_research.core.provider_env.PROVIDER_ENV; docs work without a key.
PROVIDER_KEYS = {
    "context7": ("CONTEXT7_API_KEY",),
    "perplexity": ("PERPLEXITY_API_KEY",),
    "tavily": ("TAVILY_API_KEY", "OD_TAVILY_API_KEY"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
}
MODES = ("off", "suggest", "enforce")
FINISHED = ("completed", "failed", "cancelled")
STATE_FILE = "hooks-state.json"
MAX_LISTED = 5


# -- state and configuration ----------------------------------------------------------------------
def gsd_home() -> str:
    return os.environ.get("GSD_RESEARCH_HOME") or os.path.join(os.path.expanduser("~"), ".gsd-research")


def _scalar(text: str):
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if " #" in text:
        text = text.split(" #", 1)[0].rstrip()
    return text


def read_block_yaml(text: str) -> dict:
    """Nested block mappings of scalars (what `gsd-research config set` writes); anything else is ignored."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.lstrip()
        if not stripped or stripped.startswith(("#", "-", "---")) or ":" not in stripped:
            continue
        indent = len(line) - len(stripped)
        key, _, value = stripped.partition(":")
        key = _scalar(key)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else root
        value = value.strip()
        if value and not value.startswith("#"):
            parent[key] = _scalar(value)
        else:
            child: dict = {}
            parent[key] = child
            stack.append((indent, child))
    return root


def load_config() -> dict:
    try:
        with open(os.path.join(gsd_home(), "config.yaml"), encoding="utf-8") as fh:
            return read_block_yaml(fh.read(65536))
    except (OSError, UnicodeDecodeError, ValueError):
        return {}


def config_get(cfg: dict, dotted: str, default=None):
    node = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


def mode(cfg: dict, key: str) -> str:
    value = str(config_get(cfg, f"hooks.{key}", "suggest") or "suggest").strip().lower()
    if value in ("false", "no", "0"):  # YAML reads a bare `off` as false: `config set ... off` writes that
        return "off"
    return value if value in MODES else "suggest"


def load_state() -> dict:
    try:
        with open(os.path.join(gsd_home(), STATE_FILE), encoding="utf-8") as fh:
            state = json.load(fh)
        return state if isinstance(state, dict) and isinstance(state.get("announced"), list) else {"announced": []}
    except (OSError, ValueError):
        return {"announced": []}


def save_state(state: dict) -> None:
    path = os.path.join(gsd_home(), STATE_FILE)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(gsd_home(), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state, fh)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


# -- deep research jobs ---------------------------------------------------------------------------
def finished_jobs(announced: set) -> tuple[list[tuple[str, str]], set]:
    """(id, status) of finished jobs not announced yet, oldest first; and the ids that still exist."""
    root = os.path.join(gsd_home(), "conversation-logs")
    found, existing = [], set()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return [], set()
    for entry in entries:
        existing.add(entry.name)
        if entry.name in announced or not entry.is_dir():
            continue
        try:
            with open(os.path.join(entry.path, "status.json"), encoding="utf-8") as fh:
                status = json.load(fh)
            mtime = os.stat(os.path.join(entry.path, "status.json")).st_mtime
        except (OSError, ValueError):
            continue
        state = str(status.get("status", "")) if isinstance(status, dict) else ""
        if state in FINISHED:
            found.append((mtime, entry.name, state))
    found.sort()
    return [(name, state) for _, name, state in found], existing


def announce_jobs() -> str:
    """One sentence about deep research jobs that finished since the last announcement ('' when none)."""
    state = load_state()
    announced = set(state["announced"])
    jobs, existing = finished_jobs(announced)
    if not jobs:
        return ""
    state["announced"] = sorted((announced & existing) | {name for name, _ in jobs})
    save_state(state)
    listed = ", ".join(f"{name} ({status})" for name, status in jobs[:MAX_LISTED])
    more = f" and {len(jobs) - MAX_LISTED} more (gsd-research jobs list)" if len(jobs) > MAX_LISTED else ""
    return (f"Deep research finished: {listed}{more}. "
            f"Read a result with `gsd-research jobs result {jobs[0][0]}`.")


# -- events ---------------------------------------------------------------------------------------
def providers_line(cfg: dict) -> str:
    """Which providers have a key (names only, never values)."""
    with_key, without = [], []
    for provider, names in PROVIDER_KEYS.items():
        has = any(os.environ.get(n, "").strip() for n in names) or bool(
            config_get(cfg, f"providers.{provider}.api_key"))
        (with_key if has else without).append(provider)
    docs = "docs ready (Context7 key)" if "context7" in with_key else "docs ready (Context7 anonymous)"
    others = [p for p in with_key if p != "context7"]
    missing = [p for p in without if p != "context7"]
    line = f"{docs}; keys set: {', '.join(others) or 'none'}"
    if missing:
        line += f"; no key: {', '.join(missing)}"
    if "tavily" in missing:
        line += " (search uses its keyless fallback)"
    return line


def session_start(event: dict) -> dict | None:
    cfg = load_config()
    text = ("gsd-research is available through Bash (gsd-research docs|search|fetch|deep|jobs, researcher "
            f"search): {providers_line(cfg)}.")
    jobs = announce_jobs()
    if jobs:
        text += " " + jobs
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}


def user_prompt_submit(event: dict) -> dict | None:
    text = announce_jobs()
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "gsd-research: " + text}}


def _is_local(url: str) -> bool:
    """URLs `gsd-research fetch` refuses anyway (loopback, private, link-local): never deny WebFetch for them."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost") or host.endswith(".local"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_private or ip.is_loopback or ip.is_link_local


def _clip(text, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pre_webfetch(event: dict) -> dict | None:
    import shlex

    tool_input = event.get("tool_input") if isinstance(event.get("tool_input"), dict) else {}
    url = str(tool_input.get("url") or "")
    how = mode(load_config(), "webfetch_mode")
    if how == "off" or not url or _is_local(url):
        return None
    command = f"gsd-research fetch {shlex.quote(_clip(url, 2000))}"
    focus = _clip(tool_input.get("prompt"), 200)
    if focus:
        command += f" --focus {shlex.quote(focus)}"
    reason = (f"Read this page with `{command}` instead of WebFetch: it returns a token-budgeted summary "
              "(fenced as untrusted evidence), never the raw page, so your context stays small.")
    out = {"hookEventName": "PreToolUse"}
    if how == "enforce":
        out.update(permissionDecision="deny",
                   permissionDecisionReason="WebFetch is disabled by gsd-research (hooks.webfetch_mode=enforce). "
                   + reason)
    else:
        out["additionalContext"] = "gsd-research: " + reason
    return {"hookSpecificOutput": out}


def pre_context7(event: dict) -> dict | None:
    import shlex

    if not event.get("agent_id") and not event.get("agent_type"):
        return None  # the main conversation may use Context7 MCP as it likes
    how = mode(load_config(), "context7_mode")
    if how == "off":
        return None
    tool_input = event.get("tool_input") if isinstance(event.get("tool_input"), dict) else {}
    lib = (tool_input.get("libraryId") or tool_input.get("context7CompatibleLibraryID")
           or tool_input.get("libraryName") or "LIBRARY")
    query = tool_input.get("query") or tool_input.get("topic") or "QUESTION"
    command = f"gsd-research docs {shlex.quote(_clip(lib, 200))} {shlex.quote(_clip(query, 300))}"
    reason = (f"In subagents prefer `{command}` (Bash) over Context7 MCP tools: same Context7 data, "
              "resolved in one call, cut to --max-tokens, cached 24 h, and it works where MCP tools are missing.")
    out = {"hookEventName": "PreToolUse"}
    if how == "enforce":
        out.update(permissionDecision="deny", permissionDecisionReason=reason)
    else:
        out["additionalContext"] = "gsd-research: " + reason
    return {"hookSpecificOutput": out}


EVENTS = {
    "session-start": session_start,
    "user-prompt-submit": user_prompt_submit,
    "pre-webfetch": pre_webfetch,
    "pre-context7": pre_context7,
}


def read_event() -> dict:
    try:
        data = json.loads(sys.stdin.read(1_000_000) or "{}")
    except (ValueError, UnicodeDecodeError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


def main(argv: list[str]) -> int:
    handler = EVENTS.get(argv[1] if len(argv) > 1 else "")
    if handler is None:
        return 0
    try:
        result = handler(read_event())
        if result:
            sys.stdout.write(json.dumps(result) + "\n")
    except Exception:  # noqa: BLE001 - a hook never breaks the session
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
