"""The job store's records, validated where they are loaded: a file with the wrong types is named, never used.

status.json, job.json and conversation.json are read through pydantic models (strict types; fields we do not
know pass through untouched). A document that is not JSON, holds a non-finite number (1e999, NaN) or has a
field of the wrong type comes back as a problem naming the file and the field, so one damaged folder is
reported with its fix and skipped instead of stopping `jobs list`, `jobs wait` or the worker. The models are
built on first use: pydantic is not imported by calls that never read a job file.
"""

from __future__ import annotations

import functools
from pathlib import Path

from gsd_research.deep.files import STATUSES, parse

MAX_BYTES = 8_000_000  # a job file is kilobytes; a bigger one is not read whole


class Damaged(ValueError):
    """A job file that cannot be used as it is; the message names the file and what is wrong."""


def read(path: Path) -> dict | None:
    """A JSON object from `path`; None when it is missing; Damaged when it is not a (finite) JSON object."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Damaged(f"{path.name} cannot be read ({exc.__class__.__name__})") from None
    if len(raw) > MAX_BYTES:
        raise Damaged(f"{path.name} is larger than {MAX_BYTES} bytes")
    try:
        doc = parse(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the parser goes
        what = f"holds a {exc}" if str(exc).startswith("non-finite") else "is not valid JSON"
        raise Damaged(f"{path.name} {what}") from None
    if not isinstance(doc, dict):
        raise Damaged(f"{path.name} is not a JSON object")
    return doc


@functools.cache
def _models() -> dict:
    from typing import Any, Literal

    from pydantic import BaseModel, ConfigDict, Field

    class Record(BaseModel):
        model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    Stamp = str | None
    Count = int

    class Status(Record):
        id: str | None = None
        status: Literal[STATUSES]  # type: ignore[valid-type]
        attempts: Count = Field(0, ge=0)
        interruptions: Count = Field(0, ge=0)
        revivals: Count = Field(0, ge=0)
        submissions: Count = Field(0, ge=0)
        priority: int = 0
        seq: int = Field(0, ge=0)
        workerPid: int | None = None  # noqa: N815 - the file's own field names
        createdAt: Stamp = None  # noqa: N815
        updatedAt: Stamp = None  # noqa: N815
        startedAt: Stamp = None  # noqa: N815
        attemptStartedAt: Stamp = None  # noqa: N815
        completedAt: Stamp = None  # noqa: N815
        failedAt: Stamp = None  # noqa: N815
        cancelledAt: Stamp = None  # noqa: N815
        retryAt: Stamp = None  # noqa: N815
        providerRetryAt: Stamp = None  # noqa: N815
        revivedAt: Stamp = None  # noqa: N815
        agentSubmittedAt: Stamp = None  # noqa: N815
        model: str | None = None
        effort: str | None = None
        query: str | None = None
        mode: str | None = None
        key: str | None = None
        remoteId: str | None = None  # noqa: N815 - its shape is checked where it is used (perplexity.checked_id)
        remoteApi: str | None = None  # noqa: N815
        submitKey: str | None = None  # noqa: N815
        error: dict[str, Any] | str | None = None
        errors: list[Any] = []
        usage: dict[str, Any] | None = None
        cost: dict[str, Any] | None = None
        remoteDone: bool = False  # noqa: N815
        untracked: bool = False
        ledgerRecorded: bool = False  # noqa: N815
        budgetAdmitted: bool = False  # noqa: N815 - passed its budget check to pay (deep.guard)

    class Job(Record):
        id: str
        query: str = Field(min_length=1)
        priority: int = 0
        seq: int = Field(0, ge=0)
        createdAt: Stamp = None  # noqa: N815
        effort: str | None = None
        model: str | None = None
        timeout: float | None = Field(None, gt=0)
        no_cache: bool = False

    class Message(Record):
        role: str
        content: str = ""

    class Conversation(Record):
        id: str | None = None
        messages: list[Message] = []

    return {"status.json": Status, "job.json": Job, "conversation.json": Conversation}


def _problem(name: str, exc) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc") or ()) or "the document"
    return f"{name}: {where}: {first.get('msg', 'invalid')}"


def load(folder: Path, name: str) -> dict | None:
    """The validated document `name` of job `folder` (missing fields absent, as in the file); None when the
    file is missing; Damaged naming the file and the field when it cannot be used."""
    from pydantic import ValidationError

    doc = read(folder / name)
    if doc is None:
        return None
    try:
        _models()[name].model_validate(doc)
    except ValidationError as exc:
        raise Damaged(_problem(name, exc)) from None
    if doc.get("id") not in (None, folder.name):
        raise Damaged(f"{name}: id is {str(doc.get('id'))[:40]!r}, not the folder's {folder.name!r}")
    return doc
