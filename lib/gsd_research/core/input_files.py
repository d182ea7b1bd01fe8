"""The one way a user-given file (or stdin) is read: regular files only, never more than a cap.

A FIFO or a device could block or never end and a sparse file can claim gigabytes, so the kind is
checked by fstat on the open descriptor (no check-then-open race; opened non-blocking so a FIFO
cannot hang the open) and at most cap + 1 bytes are ever read: one byte more than the cap tells
"over the cap" from "exactly the cap" without reading the rest.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path

from gsd_research.core.errors import NotFound, UsageError

MB = 1_000_000
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_file(path: str | os.PathLike, cap: int, *, what: str = "file", setting: str | None = None,
              shown: str | None = None, suggestions: list[str] | None = None) -> bytes:
    """The bytes of the regular file `path`, refused (UsageError; NotFound when absent) when it is not a
    regular file or holds more than `cap` bytes. `setting` names the config key that sets the cap."""
    shown = shown if shown is not None else str(path)
    hints = list(suggestions or [])
    try:
        fd = os.open(Path(path).expanduser(), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"No such file: {shown}", suggestions=["Check the path", *hints]) from None
    except PermissionError:
        raise UsageError(f"Cannot read {shown}: permission denied",
                         suggestions=["Check the file's permissions", *hints]) from None
    except OSError as exc:  # ENXIO: a socket; ELOOP, EIO, ...
        kind = "a socket" if exc.errno == errno.ENXIO else f"unreadable ({errno.errorcode.get(exc.errno, 'error')})"
        raise UsageError(f"{shown} is {kind}, not a regular {what}", suggestions=["Pass a regular file", *hints]) from None
    info = os.fstat(fd)
    refusal = None
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "of an unknown kind")
        refusal = UsageError(f"{shown} is {kind}, not a regular {what}", suggestions=["Pass a regular file", *hints])
    elif info.st_size > cap:
        refusal = _over(shown, what, cap, setting, hints)
    if refusal is not None:
        os.close(fd)
        raise refusal
    with os.fdopen(fd, "rb", buffering=0) as fh:
        data = _read_at_most(fh, cap + 1)
    if len(data) > cap:  # it grew after fstat, or its size lies (procfs)
        raise _over(shown, what, cap, setting, hints)
    return data


def read_stdin(cap: int, *, what: str = "input", setting: str | None = None,
               suggestions: list[str] | None = None) -> bytes:
    """stdin's bytes, refused past `cap` (a pipe or `< /dev/zero` is read no further); closed reads as empty."""
    stream = sys.stdin
    if stream is None:
        return b""
    try:
        data = _read_at_most(stream.buffer, cap + 1) if hasattr(stream, "buffer") else \
            stream.read(cap + 1).encode("utf-8", "replace")
    except (OSError, ValueError):  # a closed or unreadable descriptor
        return b""
    if len(data) > cap:
        raise _over("stdin", what, cap, setting, list(suggestions or []))
    return data


def _read_at_most(fh, limit: int) -> bytes:
    """Up to `limit` bytes. Asked for all at once (one buffer: a file or pipe of `limit` bytes costs `limit`,
    not twice that), again after a short read (raw descriptors and pipes may return less)."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = fh.read(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _over(shown: str, what: str, cap: int, setting: str | None, hints: list[str]) -> UsageError:
    size = f"{cap / MB:g} MB" if cap >= MB else f"{cap} bytes"
    raise_it = [f"Raise the cap: gsd-research config set {setting} N (in MB)"] if setting else []
    return UsageError(f"{shown} holds more than {size}: the {what} cap (read no further)",
                      suggestions=[f"Pass at most {size}", *raise_it, *hints])
