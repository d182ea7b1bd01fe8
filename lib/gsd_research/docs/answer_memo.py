"""The answer a cached `docs` call printed, kept so the next identical call prints it without redoing its work.

A docs answer is a pure function of what went into it: the two Context7 answers (from the HTTP cache), the
library and query asked, the project's version pin, --max-tokens, whether a key was sent, and the code that
fenced, scanned and fitted it. Redoing that work (the injection scan of every snippet, title and URL, the
cl100k vocabulary for the budget) was most of what a cached call spent beyond its imports. The memo is keyed
by a digest of all of those inputs, the code included (every loaded gsd_research module's size and mtime,
the data files, the Python version), so any change of input gives another key: nothing is ever invalidated,
stale keys just stop being asked for. Only answers served from the HTTP cache are kept and reused: a call that
reached Context7 is computed afresh.

Files: GSD_RESEARCH_HOME/cache/docs/<key>.json, 0600, written in one rename (ASCII JSON, known keys
scrubbed). Read only from a private folder of ours (no symlink in place of `cache` or `cache/docs`, nobody
else can write there), only a regular file of ours (never through a symlink, never blocking on a FIFO),
and only a docs answer for that key: anything else is ignored (and overwritten). At most MAX_ENTRIES are
kept (the oldest go first); `cache clear` removes them with the HTTP cache. Each entry records when the
earliest of the HTTP answers it was made from expires (`expires`, Unix seconds; null: never), brought up to
date when the answer is served again from refreshed HTTP answers; `cache clear --expired` removes the entries
whose HTTP answers have expired (an entry without the field: once older than the docs TTL) and any file there
that is not an entry of ours.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import stat
import sys
import time
from pathlib import Path

from gsd_research import __version__
from gsd_research.core.config import home

FORMAT = 2  # 2: one fence per answer (core.untrusted.seal)
MAX_ENTRIES = 200
MAX_BYTES = 4_000_000
TMP_GRACE = 3600  # seconds: a temporary file older than this was left by a killed writer
_DATA_FILES = ("cl100k_vocab.txt", "cl100k_extra.txt", "confusables.txt")
# what a docs answer holds at its top level (anything else, e.g. `success` or `exit_code`, is not ours)
_ANSWER_KEYS = frozenset({"query", "library", "library_title", "untrusted", "untrusted_end", "metadata", "results",
                          "injection_flagged", "injection_warnings"})


def memo_dir() -> Path:
    return home() / "cache" / "docs"


def _private_folder(create: bool) -> Path | None:
    """The memo folder when it is ours alone: `cache` and `cache/docs` real folders (no symlink, which would
    send reads, writes and `cache clear` elsewhere), owned by us and writable by nobody else; else None (the
    memo is then not used). With `create`, a planted symlink is removed (the link, never its target) and
    the folder made."""
    folder = memo_dir()
    if create:
        for path in (folder.parent, folder):
            if path.is_symlink():
                path.unlink()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for path in (folder.parent, folder):
        try:
            info = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return None
    return folder


def code_stamp() -> str:
    """What the code that made an answer was: version, Python, and the size and mtime of every loaded module
    of the package and of the data files the answer depends on."""
    parts = [__version__, sys.version]
    for name, module in sorted(sys.modules.items()):
        path = getattr(module, "__file__", None) if name.startswith("gsd_research") else None
        if path:
            parts.append(f"{name}:{_stat(path)}")
    data = Path(__file__).resolve().parent.parent / "data"
    parts.extend(f"{name}:{_stat(data / name)}" for name in _DATA_FILES)
    return "\n".join(parts)


def _stat(path) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "-"
    return f"{info.st_size}:{info.st_mtime_ns}"


def key(**inputs) -> str:
    """The digest of an answer's inputs (JSON-encodable values) and of the code."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)  # ASCII: a lone surrogate too
    return hashlib.sha256(f"{FORMAT}\n{code_stamp()}\n{text}".encode()).hexdigest()[:40]


def earliest(expiries) -> float | None:
    """When the first of the HTTP answers expires (Unix seconds; from their `expires`, aware datetimes); None
    when none of them ever does."""
    known = [e.timestamp() for e in expiries if e is not None]
    return min(known) if known else None


def get(memo_key: str, expires: float | None) -> dict | None:
    """The answer stored under `memo_key`, or None: none, unreadable, not a regular file of ours (a FIFO would
    block, a symlink leads elsewhere, another user's file was not written by us), too big, or not a docs
    answer for this key. `expires` is when the HTTP answers it is served from expire: an entry that recorded
    another time (they were refreshed since) is rewritten with it."""
    folder = _private_folder(create=False)
    if folder is None:
        return None
    entry = _read(folder / f"{memo_key}.json")
    doc = _answer(entry, memo_key)
    if doc is not None and entry.get("expires", "unrecorded") != expires:
        put(memo_key, doc, expires)
    return doc


def _read(path: Path) -> dict | None:
    """The JSON object in `path` when it is a regular file of ours, private and not too big; else None."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if (not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077
                    or info.st_size > MAX_BYTES):
                return None
            entry = json.loads(fh.read(MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
        return None
    return entry if isinstance(entry, dict) else None


def _answer(entry: dict | None, memo_key: str) -> dict | None:
    """The docs answer an entry holds for `memo_key`, or None."""
    if entry is None or entry.get("format") != FORMAT or entry.get("key") != memo_key:
        return None
    doc = entry.get("answer")
    if (not isinstance(doc, dict) or not set(doc) <= _ANSWER_KEYS or not isinstance(doc.get("metadata"), dict)
            or not isinstance(doc.get("results", []), list)):
        return None
    return doc


def put(memo_key: str, doc: dict, expires: float | None) -> None:
    """Keep `doc` under `memo_key` (known keys scrubbed out) with when its HTTP answers expire (see `earliest`);
    a failure to write only costs the next call time."""
    from gsd_research.core.secrets import scrub

    tmp = None
    try:
        folder = _private_folder(create=True)
        if folder is None:
            return
        tmp = folder / f".{memo_key}.{os.getpid()}.{os.urandom(3).hex()}.tmp"
        text = scrub(json.dumps({"format": FORMAT, "key": memo_key, "expires": expires, "answer": doc}))  # ASCII
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
        os.replace(tmp, folder / f"{memo_key}.json")
        _prune(folder)
    except (OSError, ValueError):
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _prune(folder: Path) -> None:
    entries = list(folder.glob("*.json"))
    if len(entries) > MAX_ENTRIES:
        for path in sorted(entries, key=_mtime)[: len(entries) - MAX_ENTRIES]:
            with contextlib.suppress(OSError):
                path.unlink()


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


def clear(expired_only: bool = False, ttl: float = -1) -> int:
    """Remove every kept answer (and what killed writers left); returns how many answers. With `expired_only`,
    only the answers whose HTTP answers have expired (recorded before expiries were: older than `ttl` seconds,
    a negative `ttl` never expiring) and files that are no answer of ours. A symlink in place of the folder is
    removed itself, never followed."""
    folder = memo_dir()
    if folder.is_symlink():
        folder.unlink()
        return 0
    if _private_folder(create=False) is None:
        return 0
    now = time.time()
    removed = 0
    for path in folder.glob("*.json"):
        if not expired_only or _expired(path, now, ttl):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    for path in folder.glob(".*.tmp"):
        if not expired_only or now - _mtime(path) > TMP_GRACE:
            with contextlib.suppress(OSError):
                path.unlink()
    return removed


def _expired(path: Path, now: float, ttl: float) -> bool:
    """Whether the entry at `path` can no longer be served: its HTTP answers expired, or it is no answer of ours
    (unreadable, planted, damaged), which nothing would ever read."""
    entry = _read(path)
    if _answer(entry, path.stem) is None:
        return True
    if "expires" not in entry:  # kept before expiries were recorded
        return 0 <= ttl < now - _mtime(path)
    until = entry["expires"]
    if until is None:
        return False
    return (isinstance(until, bool) or not isinstance(until, int | float) or not math.isfinite(until)
            or until <= now)
