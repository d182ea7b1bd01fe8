"""Claude Code hooks of gsd-research, one module per event (stdlib only, run under `python -I -S`).

`hooks/entry.py EVENT` dispatches to the module named in `EVENTS`; each module's `handle(event)`
takes the event JSON (a dict) and returns the JSON to print, or None. The shared pieces: `common` (event
input, GSD_RESEARCH_HOME's config), `jobs` (finished deep research announcements) and `env_context` (what the
hooks say of gsd-research's Python environment, as decided by the plugin's bootstrap/ package)."""

# event sub-command -> module holding handle(event)
EVENTS = {
    "session-start": "session_start",
    "user-prompt-submit": "user_prompt_submit",
    "pre-webfetch": "pre_webfetch",
    "pre-context7": "pre_context7",
    "pre-bash": "pre_bash",
    "subagent-start": "subagent_start",
}
