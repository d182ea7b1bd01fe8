"""Error codes are classes in core/errors.py, each with its exit status."""

from __future__ import annotations

import pytest

from gsd_research.core import errors


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
