"""User-given files are read through one bounded helper (core.input_files): a FIFO, a device or a file over
its cap is refused with one JSON envelope without being read whole; the child's peak RSS shows it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

from gsd_research.core.errors import NotFound, UsageError
from gsd_research.core.input_files import read_file, read_stdin
from tests.conftest import BIN, Result

SPARSE_BYTES = 1 << 30  # over every cap; sparse, so it costs no disk
RSS_CEILING_KB = 250_000  # a refused call; reading the file whole would take over 1 GB

COMMANDS = {  # every command that takes a file: console script and arguments, {} for the file
    "verify": ("gsd-research", ["verify", "{}"]),
    "summarize": ("gsd-research", ["summarize", "{}"]),
    "analyze": ("gsd-research", ["analyze", "What is this?", "{}"]),
    "image": ("gsd-research", ["image", "{}"]),
    "researcher search --queries-file": ("researcher", ["search", "--queries-file", "{}", "--json"]),
}
INPUTS = {  # kind -> the words the refusal says
    "fifo": "is a FIFO",
    "device": "is a character device",
    "sparse": "holds more than",
}


def _input(kind: str, tmp_path) -> str:
    if kind == "device":
        return "/dev/zero"
    path = tmp_path / f"input-{kind}"
    if kind == "fifo":
        os.mkfifo(path)  # opening it for reading would block until a writer comes
    else:
        with open(path, "wb") as fh:
            fh.truncate(SPARSE_BYTES)
    return str(path)


# The child is started by a small fresh process, not by this test process: a fork records the forking
# process's resident size as the child's peak (a test worker holding Chroma is over the ceiling by itself).
MEASURE = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[2:]); _, s, u = os.wait4(p.pid, 0); "
           "open(sys.argv[1], 'w').write(str(u.ru_maxrss)); sys.exit(os.waitstatus_to_exitcode(s))")


def run_measured(script: str, *args: str, cwd=None, stdin=subprocess.DEVNULL) -> tuple[Result, int]:
    """Run a console script; its result and its peak RSS in KB (wait4 in its parent: this child alone)."""
    with open(os.devnull if stdin is subprocess.DEVNULL else stdin, "rb") as given, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", MEASURE, peak.name, str(BIN / script), *args],
                                stdin=given, stdout=out, stderr=err, cwd=cwd, start_new_session=True)
        watchdog = threading.Timer(120, os.killpg, (proc.pid, signal.SIGKILL))  # a blocked child fails the test
        watchdog.start()
        try:
            proc.wait()
        finally:
            watchdog.cancel()
        out.seek(0), err.seek(0)
        return Result(proc.returncode, out.read().decode(), err.read().decode()), int(peak.read() or 0)


@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_fifo_a_device_or_a_file_over_its_cap_is_refused_unread(tmp_path, command, kind):
    script, template = COMMANDS[command]
    path = _input(kind, tmp_path)

    result, peak_kb = run_measured(script, *[a.replace("{}", path) for a in template], cwd=tmp_path)

    error = result.json["error"]
    assert result.code == 2 and error["code"] == "USAGE_ERROR", result.stdout
    assert INPUTS[kind] in error["message"] and error["suggestions"]
    assert peak_kb < RSS_CEILING_KB, f"peak RSS {peak_kb} KB"
    assert "Traceback" not in result.stderr


def test_stdin_past_the_cap_is_refused_after_reading_the_cap_only(tmp_path, home):
    (home / "config.yaml").write_text("inputs:\n  max_mb: 2\n")

    result, peak_kb = run_measured("gsd-research", "summarize", "-", stdin="/dev/zero")

    assert result.code == 2 and result.json["error"]["code"] == "USAGE_ERROR"
    assert result.json["error"]["message"] == "stdin holds more than 2 MB: the document cap (read no further)"
    assert "gsd-research config set inputs.max_mb N (in MB)" in " ".join(result.json["error"]["suggestions"])
    assert peak_kb < RSS_CEILING_KB, f"peak RSS {peak_kb} KB"


def test_a_lockfile_over_its_cap_is_skipped_with_a_note_unread(fake, tmp_path):
    with open(tmp_path / "package-lock.json", "wb") as fh:
        fh.truncate(SPARSE_BYTES)

    result, peak_kb = run_measured("gsd-research", "docs", "react", "hooks", cwd=tmp_path)

    assert result.code == 0, result.stdout
    notes = result.json["metadata"]["lockfile_notes"]
    assert notes == ["package-lock.json holds more than 20 MB: the lockfile cap (read no further); it was skipped"]
    assert peak_kb < RSS_CEILING_KB, f"peak RSS {peak_kb} KB"


def test_a_missing_file_is_still_not_found(cli, tmp_path):
    result = cli("summarize", str(tmp_path / "absent.md"))

    assert result.code == 4 and "No such file" in result.json["error"]["message"]


# -- the helper itself ----------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "refused"), [(0, False), (10, False), (11, True)])
def test_a_file_is_read_up_to_its_cap_exactly(tmp_path, size, refused):
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)

    if refused:
        with pytest.raises(UsageError, match="holds more than 10 bytes"):
            read_file(path, 10)
    else:
        assert read_file(path, 10) == b"x" * size


def _special(kind: str, tmp_path) -> str:
    if kind == "directory":
        return str(tmp_path)
    if kind == "socket":
        path = str(tmp_path / "sock")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        return path
    return _input(kind, tmp_path)


@pytest.mark.parametrize(("kind", "words"), [
    ("directory", "is a directory, not a regular file"),
    ("fifo", "is a FIFO (named pipe), not a regular file"),
    ("device", "is a character device, not a regular file"),
    ("socket", "is a socket, not a regular file"),
])
def test_what_is_not_a_regular_file_is_refused_by_its_kind(tmp_path, kind, words):
    path = _special(kind, tmp_path)

    with pytest.raises(UsageError, match=re.escape(words)):
        read_file(path, 10)


def test_a_missing_file_is_not_found(tmp_path):
    with pytest.raises(NotFound, match="No such file"):
        read_file(tmp_path / "absent", 10)


def test_the_cap_names_the_config_key_that_sets_it(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 3_000_001)

    with pytest.raises(UsageError) as refused:
        read_file(path, 3_000_000, what="document", setting="inputs.max_mb")

    assert refused.value.message.startswith(f"{path} holds more than 3 MB: the document cap")
    assert "Raise the cap: gsd-research config set inputs.max_mb N (in MB)" in refused.value.suggestions


def test_stdin_is_read_up_to_its_cap(monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"y" * 11)))

    with pytest.raises(UsageError, match="stdin holds more than 10 bytes"):
        read_stdin(10)
