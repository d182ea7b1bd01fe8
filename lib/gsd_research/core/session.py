"""A research session across calls: which passages it has returned (so none is paid for twice), what it has
spent, and the cursors of answers cut by their budget.

One ledger file per session under GSD_RESEARCH_HOME/sessions/ (0600, written whole by rename, under a lock,
bounded: the newest MAX_PASSAGES passages, each at most MAX_PASSAGE_CHARS; sessions idle SESSION_DAYS pruned).
`core.budget` consults it while fitting an answer (dedupe, refs, cursors); the output edge commits what the
printed answer returned (`commit`), so a call counts once whatever its command re-fitted."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from pathlib import Path

MAX_PASSAGES = 400
MAX_PASSAGE_CHARS = 20_000
SESSION_DAYS = 7
KEEP_SESSIONS = 64
CURSOR_HOURS = 24
KEEP_CURSORS = 2048  # a queries file's lines and parallel researchers' chains: each call's own kept
REF_CHARS = 10
CURSOR_DIGITS = 12  # digits only: cl100k counts them in threes, so every token costs what its placeholder did
EXPAND = "gsd-research expand"
REF_KEY = "repeat"  # a result that is a reference to a passage returned before (recall's `ref` is its own)

_STATE: dict = {"id": None, "fresh": False}
_CURRENT: list = []


def configure(session_id: str | None = None, fresh: bool | None = None) -> None:
    """Record this call's session (--session, else GSD_RESEARCH_SESSION) and --fresh."""
    if session_id is not None:
        _STATE["id"] = session_id.strip() or None
    if fresh is not None:
        _STATE["fresh"] = bool(fresh)
    _CURRENT.clear()


def current() -> Ledger:
    """This call's ledger view (inactive without a session)."""
    if not _CURRENT:
        sid = _STATE["id"] or os.environ.get("GSD_RESEARCH_SESSION", "").strip() or None
        _CURRENT.append(Ledger(sid, _STATE["fresh"]))
    return _CURRENT[0]


def reset() -> None:
    """Forget this process's session choice (each in-process call starts afresh)."""
    _STATE.update(id=None, fresh=False)
    _CURRENT.clear()


def passage_id(text: str, source: str = "") -> str:
    """A passage's identity: its normalized text (whitespace folded) and its source."""
    norm = " ".join(str(text).split())
    return hashlib.sha256(f"{source}\0{norm}".encode("utf-8", "replace")).hexdigest()[:20]


def ref_of(pid: str) -> str:
    return "r" + pid[:REF_CHARS]


def root() -> Path:
    from gsd_research.core.config import home

    return home() / "sessions"


class Ledger:
    """One call's view of its session: read once, changes kept pending until the answer is printed."""

    def __init__(self, sid: str | None, fresh: bool):
        self.sid, self.fresh = sid, fresh
        self._data: dict | None = None
        self.pending: dict[str, dict] = {}
        self.cursor: dict | None = None
        self.cursor_token: str | None = None
        self.repeats = False  # a dry fit: any passage of a source returned before may repeat (budget.refuse_early)

    @property
    def active(self) -> bool:
        return self.sid is not None

    @property
    def dedupes(self) -> bool:
        return self.sid is not None and not self.fresh

    @property
    def path(self) -> Path:
        return root() / (hashlib.sha256(self.sid.encode()).hexdigest()[:24] + ".json")

    def data(self) -> dict:
        if self._data is None:
            self._data = _load(self.path) if self.active else _empty()
        return self._data

    def seen(self, pid: str, source: str | None = None) -> dict | None:
        if not self.dedupes:
            return None
        passages = self.data()["passages"]
        if self.repeats:  # a dry fit: any passage of this source may come back as a reference to it
            return {} if source and any(e.get("source") == source[:500] for e in passages.values()) else None
        return passages.get(pid)

    def find(self, ref: str) -> tuple[str, dict] | None:
        """The passage `ref` names in this session, else in the sessions it descends from: a subagent's is
        `<client session>.<agent id>` (hooks' pre-bash), so a reference the main conversation handed it expands."""
        key = ref[1:] if ref.startswith("r") else ref
        if len(key) < 6:
            return None
        sid, data = self.sid, self.data()
        while True:
            for pid, entry in data["passages"].items():
                if pid.startswith(key):
                    return pid, entry
            if not sid or "." not in sid:
                return None
            sid = sid.rsplit(".", 1)[0]
            data = Ledger(sid, fresh=False).data()

    def start_fit(self) -> None:
        """A command fits its answer (again): only the last fit's passages and cursor count."""
        self.pending, self.cursor, self.cursor_token = {}, None, None

    def returned(self, pid: str, text: str, source: str, whole: bool = True, beside: dict | None = None) -> None:
        """The answer returns passage `pid`: `text` is as much of it as was returned (from its start); `beside`,
        the answer's other external values a repeat of it leaves out (a report's citations), which `expand`
        gives back with it."""
        from gsd_research.core.output import _COMMAND

        if whole and len(text) > MAX_PASSAGE_CHARS:  # kept in part: a later answer gives its rest again
            text, whole = text[:MAX_PASSAGE_CHARS], False
        self.pending[pid] = {"text": text, "chars": len(text) if not whole else 10**9, "source": source[:500],
                             "where": f"{_COMMAND or 'gsd-research'} {time.strftime('%H:%M:%S')}", "at": time.time()}
        if beside:
            self.pending[pid]["beside"] = beside

    def reference(self, pid: str, entry: dict) -> dict:
        """A passage returned before, by name only: no external text beyond its source."""
        ref = {REF_KEY: ref_of(pid), "seen": entry.get("where", "")}
        if entry.get("source"):
            ref["source"] = entry["source"]
        return ref

    def mint_cursor(self, payload: dict) -> str:
        """A token for the rest of a cut answer; its file is written only if the answer is printed."""
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
        self.cursor, self.cursor_token = payload, "c" + str(int(digest, 16) % 10**CURSOR_DIGITS).zfill(CURSOR_DIGITS)
        return f"{EXPAND} {self.cursor_token}"

    def handoff(self) -> dict:
        """What this fit recorded, for the process that prints the answer (the resident search process's)."""
        return {"pending": self.pending, "cursor": self.cursor, "token": self.cursor_token}

    def adopt(self, state: object) -> None:
        """Take over what another process's fit of this call's answer recorded (`handoff`)."""
        if isinstance(state, dict) and isinstance(state.get("pending"), dict):
            self.pending.update(state["pending"])
            if isinstance(state.get("cursor"), dict) and isinstance(state.get("token"), str):
                self.cursor, self.cursor_token = state["cursor"], state["token"]

    def spent(self, tokens: int) -> dict:
        data = self.data()
        return {"id": self.sid[:12], "calls": int(data.get("calls", 0)) + 1, "tokens": int(data.get("tokens", 0)) + tokens}


def _empty() -> dict:
    return {"v": 1, "calls": 0, "tokens": 0, "passages": {}}


def _load(path: Path) -> dict:
    """The ledger at `path`; a damaged one is set aside (renamed .damaged) and the session starts over."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, dict) or not isinstance(data.get("passages"), dict) or not all(
                isinstance(data.get(k, 0), int) for k in ("calls", "tokens")) or not all(
                isinstance(e, dict) for e in data["passages"].values()):
            raise ValueError("not a ledger")
        return data
    except FileNotFoundError:
        return _empty()
    except (OSError, ValueError, UnicodeDecodeError):
        try:
            os.replace(path, path.with_suffix(f".damaged-{int(time.time())}"))
        except OSError:
            pass
        return _empty()


def commit(doc: dict, measure=None) -> dict:
    """At the output edge: write the cut answer's cursor, record the returned passages and the spend, and put
    what the session has spent into the answer's metadata. With `measure` (the printed document's tokens), an
    answer's `tokens_used` and the session's total are settled together: the total's digits count too."""
    if not _CURRENT or not isinstance(doc, dict):
        return doc
    led = _CURRENT[0]
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else None
    if led.cursor is not None and meta is not None and meta.get("next", "").endswith(led.cursor_token or "-"):
        write_cursor(led.cursor_token, led.cursor)
    if not led.active or not doc.get("success", True):
        return doc
    from gsd_research.core.config import atomic_write_text
    from gsd_research.core.private import flock

    folder = root()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with flock(folder / ".lock"):
        data = _load(led.path)
        data["calls"] = int(data.get("calls", 0)) + 1
        data["tokens"] = int(data.get("tokens", 0)) + _spend(doc, meta, led.sid, data, measure)
        data["passages"].update(led.pending)
        if len(data["passages"]) > MAX_PASSAGES:
            newest = sorted(data["passages"].items(), key=lambda kv: kv[1].get("at", 0))[-MAX_PASSAGES:]
            data["passages"] = dict(newest)
        atomic_write_text(led.path, _scrubbed(data))
        _prune(folder, "*.json", SESSION_DAYS * 86400, KEEP_SESSIONS, keep=led.path)
        _prune(folder, "*.damaged-*", SESSION_DAYS * 86400, 8, keep=led.path)
    led.pending = {}
    return doc


def _spend(doc: dict, meta: dict | None, sid: str, data: dict, measure) -> int:
    """This answer's tokens, its metadata showing the session's total with them (settled by `measure`). The total
    was reserved at the answer's whole budget, so it only gets shorter; should another call of the session have
    grown it past the budget meanwhile, the answer goes without it."""
    if meta is None:
        return 0
    base = int(data.get("tokens", 0))
    for _ in range(4):
        used = int(meta.get("tokens_used", 0))
        meta["session"] = {"id": sid[:12], "calls": data["calls"], "tokens": base + used}
        if measure is None or "tokens_used" not in meta:
            return used
        printed = measure(doc)
        if printed == used:
            break
        meta["tokens_used"] = printed
    if meta["tokens_used"] > int(meta.get("max_tokens", meta["tokens_used"])):
        del meta["session"]
        meta["tokens_used"] = measure(doc)
    return int(meta["tokens_used"])


def write_cursor(token: str, payload: dict) -> None:
    from gsd_research.core.config import atomic_write_text

    folder = root() / "cursors"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write_text(folder / f"{token}.json", _scrubbed(payload))
    _prune(folder, "c*.json", CURSOR_HOURS * 3600, KEEP_CURSORS, keep=folder / f"{token}.json")


def _scrubbed(data: dict) -> str:
    """The JSON of a state file with every known key replaced (a page may quote one): keys never reach files."""
    from gsd_research.core.secrets import scrub

    return scrub(json.dumps(data, ensure_ascii=False))


def load_cursor(token: str) -> dict | None:
    if not (token.startswith("c") and token[1:].isalnum() and len(token) <= 20):
        return None
    try:
        with open(root() / "cursors" / f"{token}.json", encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _prune(folder: Path, pattern: str, max_age: float, keep_count: int, keep: Path) -> None:
    """Files older than `max_age` seconds go, and all but the newest `keep_count`."""
    try:
        files = sorted(((p.stat().st_mtime, p) for p in folder.glob(pattern) if p != keep), reverse=True)
    except OSError:
        return
    now = time.time()
    for index, (mtime, path) in enumerate(files):
        if now - mtime > max_age or index >= keep_count - 1:
            try:
                path.unlink()
            except OSError:
                pass


def fenced_keys(doc: dict) -> list[str]:
    """The keys inside the answer's fence (core.untrusted.seal), in order."""
    keys = list(doc)
    if "untrusted" not in keys or "untrusted_end" not in keys:
        return []
    return keys[keys.index("untrusted") + 1: keys.index("untrusted_end")]


def shell(doc: dict, key: str) -> dict:
    """A copy of `doc` without its passages under `key`, its other external text (the fenced keys: it was
    returned already) and its per-answer metadata: a cursor's frame."""
    fenced = set(fenced_keys(doc))
    fenced |= {"injection_flagged", "injection_warnings", "injection_warnings_more"}  # about the first page
    out = copy.deepcopy({k: v for k, v in doc.items() if k != key and k not in fenced})
    out[key] = [] if isinstance(doc.get(key), list) else ""
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for k in ("total_available", "returned", "tokens_used", "truncated", "next", "session", REF_KEY, "expand"):
            meta.pop(k, None)
    order = list(doc) if key in doc else [*doc, key]  # the key keeps its place inside the fence
    return {k: out[k] for k in order if k in out}
