"""`gsd-research expand TOKEN`: a passage named by its session reference (rREF), or the rest of an answer its
budget cut (the cursor cTOKEN of `metadata.next`), fenced and fitted like any answer."""

from __future__ import annotations

import click

from gsd_research.core import session
from gsd_research.core.budget import MIN_CUT_TOKENS, fit_results, fit_text
from gsd_research.core.errors import UsageError
from gsd_research.core.runtime import agent_command
from gsd_research.core.untrusted import guard_text, seal, shown_warnings


@agent_command("expand")
@click.argument("token")
def expand(rt, token: str):
    """TOKEN: a reference (rXXXXXXXXXX) of this session, or a cursor (cXXXXXXXXXX) from metadata.next."""
    token = token.strip()
    if token.startswith("c"):
        return _continue(rt, token)
    if not token.startswith("r"):
        raise UsageError(f"Not a reference or cursor: {token[:40]}",
                         suggestions=["Pass a `ref` of an answer (rXXXXXXXXXX) or its metadata.next"])
    led = session.current()
    if not led.active:
        raise UsageError("References belong to a session: none is set",
                         suggestions=["Pass --session ID (or set GSD_RESEARCH_SESSION) as in the call that gave it"])
    found = led.find(token)
    if found is None:
        raise UsageError(f"This session has no passage {token[:40]}",
                         suggestions=["It may have been pruned: run the original command again with --fresh"])
    _pid, entry = found
    content, warnings = guard_text(str(entry.get("text", "")), "content")
    doc = {"ref": token, "source": entry.get("source", ""), "seen": entry.get("where", ""), "content": content}
    beside = entry.get("beside") if isinstance(entry.get("beside"), dict) else {}
    beside = {k: v for k, v in beside.items() if k not in doc and k != "metadata"}  # what the repeat left out
    doc = seal({**doc, **beside, **shown_warnings(warnings), "metadata": {}}, ("source", "content", *beside))
    return fit_text(doc, ("content",), rt.max_tokens, dedupe=False)


def _flagged(doc: dict, warnings: list[dict]) -> dict:
    """`doc` with the flags of the external text it now carries, before its metadata."""
    out = {k: v for k, v in doc.items() if k != "metadata"}
    return {**out, **shown_warnings(warnings), "metadata": doc.get("metadata", {})}


def _continue(rt, token: str) -> dict:
    """The rest of a cut answer, from exactly where it stopped, under this call's budget."""
    cursor = session.load_cursor(token)
    if cursor is None:
        raise UsageError(f"No cursor {token[:40]} (cursors last {session.CURSOR_HOURS} hours)",
                         suggestions=["Run the original command again"])
    if cursor.get("command"):
        rt.command = cursor["command"]
    doc, fenced = cursor["frame"], "untrusted" in cursor["frame"]
    if cursor.get("kind") == "text":
        text, warnings = guard_text(cursor["text"], cursor["key"]) if fenced else (cursor["text"], [])
        doc = _flagged({**doc, cursor["key"]: text}, warnings)
        return fit_text(doc, (cursor["key"],), rt.max_tokens)
    items, warnings = cursor["items"], []
    if fenced:  # external text, guarded as every answer guards it (its first page's flags were its own)
        items = [dict(item) for item in items]
        for i, item in enumerate(items):
            item[cursor["text_key"]], found = guard_text(item.get(cursor["text_key"]), f"{cursor['key']}[{i}]")
            warnings += found
    doc = fit_results(_flagged(doc, warnings), items, rt.max_tokens, text_key=cursor["text_key"],
                      results_key=cursor["key"])
    meta = doc["metadata"]
    if meta["tokens_used"] > rt.max_tokens or not doc[cursor["key"]]:  # over, or a cursor to itself: never ends
        need = meta["tokens_used"] + (0 if doc[cursor["key"]] else MIN_CUT_TOKENS)
        raise UsageError(f"--max-tokens {rt.max_tokens} is too small to continue this answer (it needs {need} or "
                         "more to return a passage)", suggestions=[f"Use --max-tokens {max(need + 200, 500)} or more"])
    return doc
