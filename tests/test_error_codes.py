"""Error codes are classes in core/errors.py: no code is written as a string anywhere else in lib/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gsd_research.core import errors

LIB = Path(__file__).resolve().parents[1] / "lib" / "gsd_research"

# Rewritten in parallel under issue 23; their engineers switch to the classes, and the merge empties this set.
PENDING_REWRITE: set[str] = set()


def _exempt(path: Path) -> bool:
    rel = path.relative_to(LIB).as_posix()
    return rel == "core/errors.py" or any(rel == p or rel.startswith(p + "/") for p in PENDING_REWRITE)


def _code_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(LIB)}:{node.lineno} {node.value}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in errors.EXIT_CODES]


def test_no_error_code_is_a_string_literal_outside_core_errors():
    found = [hit for path in sorted(LIB.rglob("*.py")) if not _exempt(path) for hit in _code_literals(path)]

    assert found == []


@pytest.mark.parametrize("code", sorted(errors.EXIT_CODES))
def test_every_code_has_one_class_with_its_exit_status(code):
    cls = errors.error_class(code)

    assert (cls.code, cls("message").exit_code if code != "INTERRUPTED" else cls.exit_status) == (
        code, errors.EXIT_CODES[code])


def test_a_transitional_code_argument_gives_the_class_of_that_code():
    exc = errors.GsdError("gone", code="INDEX_DAMAGED")

    assert isinstance(exc, errors.IndexDamaged)


def test_a_transitional_code_argument_keeps_a_subclass_that_the_code_class_does_not_extend():
    class MaybeTaken(errors.ProviderError):  # as deep's: its own behaviour, another code
        pass

    exc = MaybeTaken("lost", code="TIMEOUT", details={"provider": "perplexity"})

    assert (type(exc), exc.code, exc.exit_code, exc.details) == (MaybeTaken, "TIMEOUT", 6, {"provider": "perplexity"})
