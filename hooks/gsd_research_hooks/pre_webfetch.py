"""PreToolUse on WebFetch: point the agent at `gsd-research fetch` (hooks.webfetch_mode off|suggest|enforce).

Local addresses (which `gsd-research fetch` refuses anyway) are never redirected."""

from __future__ import annotations

import shlex

from gsd_research_hooks.common import clip, load_config, mode, tool_input, unsafe_home


def _is_local(url: str) -> bool:
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


def handle(event: dict) -> dict | None:
    args = tool_input(event)
    url = str(args.get("url") or "")
    how = "off" if unsafe_home() else mode(load_config(), "webfetch_mode")  # never point at a refusing tool
    if how == "off" or not url or _is_local(url):
        return None
    command = f"gsd-research fetch {shlex.quote(clip(url, 2000))}"
    focus = clip(args.get("prompt"), 200)
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
