"""SessionStart: whether gsd-research can run (its environment: ready, being prepared, or broken with the fix;
the plugin's build starts here), which providers are configured (names only, never keys), finished deep
research."""

from __future__ import annotations

import os

from gsd_research_hooks.common import config_get, context, load_config, unsafe_notice
from gsd_research_hooks.env_context import describe, export_data_dir, plugin_paths, remember_pending, status
from gsd_research_hooks.jobs import announce_jobs
from gsd_research_hooks.reach import export_session, reach

# Provider -> (key variables), as in gsd_research's config; docs work without a key.
PROVIDER_KEYS = {
    "context7": ("CONTEXT7_API_KEY",),
    "perplexity": ("PERPLEXITY_API_KEY",),
    "tavily": ("TAVILY_API_KEY", "OD_TAVILY_API_KEY"),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openai": ("OPENAI_API_KEY",),
}


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
    line = docs + (f"; keys set: {', '.join(others)}" if others else "")
    if missing:
        line += f"; no key: {', '.join(missing)}"
    if "tavily" in missing:
        line += " (search: keyless fallback)"
    return line


def handle(event: dict) -> dict | None:
    export_session(str(event.get("session_id") or ""))  # before anything that may fail: answers dedupe from here
    found = status()  # a missing environment gets its build started here
    _root, data = plugin_paths()
    if data:
        export_data_dir(data)
    text = describe(found)
    usable = found.state in ("ready", "building")
    if found.state == "ready":
        where = reach(export=True, session=str(event.get("session_id") or ""))  # may put install.sh's bin folder on the Bash tool's PATH
        text, usable = where.fix or text, where.usable
    if usable:
        text += f": {providers_line(load_config())}"
    text += "."
    unsafe = unsafe_notice()
    if unsafe:
        text += " " + unsafe + "."
    if found.state == "building":
        remember_pending(str(event.get("session_id") or ""))
    jobs = announce_jobs()
    if jobs:
        text += " " + jobs
    return context("SessionStart", text)
