"""Error codes are classes in core/errors.py: no code is written as a string anywhere else in lib/."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gsd_research.core import errors

LIB = Path(__file__).resolve().parents[1] / "lib" / "gsd_research"



def _code_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(LIB)}:{node.lineno} {node.value}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in errors.EXIT_CODES]


def test_no_error_code_is_a_string_literal_outside_core_errors():
    found = [hit for path in sorted(LIB.rglob("*.py")) if path != LIB / "core" / "errors.py"
             for hit in _code_literals(path)]

    assert found == []


def test_no_two_error_classes_share_a_code():
    classes = [errors.InternalError, *errors._classes(errors.GsdError)]
    codes = [c.code for c in classes if c.__module__ == errors.__name__ and "code" in vars(c)]

    assert sorted(codes) == sorted(set(codes))


@pytest.mark.parametrize(("code", "exit_status"), [("USAGE_ERROR", 2), ("MISSING_API_KEY", 3), ("NOT_FOUND", 4),
                                                   ("UPSTREAM_ERROR", 5), ("TIMEOUT", 6), ("INDEX_DAMAGED", 1),
                                                   ("UNKNOWN_CODE", 1)])
def test_a_stored_code_reads_back_as_its_class_with_its_exit_status(code, exit_status):
    exc = errors.error_class(code)("message")

    assert exc.exit_code == exit_status
