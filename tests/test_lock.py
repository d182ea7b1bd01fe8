"""The pinned locks: every dependency pyproject.toml declares is pinned (with hashes) in requirements.lock
(runtime) and requirements-dev.lock (runtime + the dev extra), so the lock cannot drift from pyproject; the
two locks agree; and the environment the tests run in is the locked one (test.sh installs from the lock)."""

from __future__ import annotations

import re
import sys
from importlib import metadata

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10
    import tomli as tomllib

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def parse_lock(text: str) -> list[tuple[str, str, str | None, int]]:
    """(name, version, marker, number of hashes) per pinned line of a `uv pip compile --generate-hashes` lock."""
    pins: list[tuple[str, str, str | None, int]] = []
    for line in text.splitlines():
        if line.startswith((" ", "#")) or not line.strip():
            if pins and line.strip().startswith("--hash=sha256:"):
                name, version, marker, hashes = pins[-1]
                pins[-1] = (name, version, marker, hashes + 1)
            continue
        match = PIN.match(line)
        if not match:
            raise ValueError(f"not a pinned requirement: {line!r}")
        pins.append((canonicalize_name(match[1]), match[2], match[3], 0))
    return pins


def drift(requirements: list[str], lock_text: str) -> list[str]:
    """What in `requirements` the lock does not pin at a version the specifier allows (empty: no drift)."""
    pins: dict[str, list[str]] = {}
    for name, version, _marker, _hashes in parse_lock(lock_text):
        pins.setdefault(name, []).append(version)
    problems = []
    for text in requirements:
        req = Requirement(text)
        versions = pins.get(canonicalize_name(req.name))
        if not versions:
            problems.append(f"{req.name}: not in the lock")
        elif not all(req.specifier.contains(v, prereleases=True) for v in versions):
            problems.append(f"{req.name}: lock pins {versions}, pyproject asks {req.specifier}")
    return problems


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def read(name: str) -> str:
    return (ROOT / name).read_text()


def test_every_runtime_dependency_is_pinned_in_both_locks():
    runtime = pyproject()["project"]["dependencies"]

    assert drift(runtime, read("requirements.lock")) == []
    assert drift(runtime, read("requirements-dev.lock")) == []


def test_the_dev_extra_is_pinned_in_the_dev_lock_only():
    dev = pyproject()["project"]["optional-dependencies"]["dev"]

    assert drift(dev, read("requirements-dev.lock")) == []
    assert {p.split(":")[0] for p in drift(dev, read("requirements.lock"))} >= {"pytest", "ruff"}


@pytest.mark.parametrize("lock", ["requirements.lock", "requirements-dev.lock"])
def test_every_pin_is_exact_and_hashed(lock):
    pins = parse_lock(read(lock))

    assert len(pins) > 100
    assert all(hashes >= 1 for _n, _v, _m, hashes in pins), [p for p in pins if p[3] == 0]
    assert "--require-hashes" not in read(lock)  # installers pass it; the file stays a plain lock


def test_the_runtime_pins_are_the_same_in_both_locks():
    runtime = {(n, v, m) for n, v, m, _h in parse_lock(read("requirements.lock"))}
    dev = {(n, v, m) for n, v, m, _h in parse_lock(read("requirements-dev.lock"))}

    assert runtime <= dev
    assert {n for n, _v, _m in dev - runtime} >= {"pytest", "ruff", "tiktoken"}


def test_the_test_environment_is_the_locked_one():
    """test.sh installs requirements-dev.lock: every pin that applies to this interpreter is what is installed."""
    wrong = []
    for name, version, marker, _h in parse_lock(read("requirements-dev.lock")):
        if marker and not Marker(marker).evaluate():
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}: missing")
            continue
        if installed != version:
            wrong.append(f"{name}: {installed} installed, {version} locked")
    assert wrong == []


# -- the checks above catch drift (they are not vacuous) ------------------------------------------
LOCK = """\
# header
click==8.1.7 \\
    --hash=sha256:aa
requests==2.31.0 ; python_full_version >= '3.10' \\
    --hash=sha256:bb \\
    --hash=sha256:cc
    # via gsd-research
"""


def test_drift_is_found_for_a_missing_or_out_of_range_dependency():
    assert drift(["click>=8.1", "requests>=2.31"], LOCK) == []
    assert drift(["click>=8.2"], LOCK) == ["click: lock pins ['8.1.7'], pyproject asks >=8.2"]
    assert drift(["Rich>=13"], LOCK) == ["Rich: not in the lock"]


def test_lock_parser_counts_hashes_and_refuses_an_unpinned_line():
    assert parse_lock(LOCK) == [("click", "8.1.7", None, 1), ("requests", "2.31.0", "python_full_version >= '3.10'", 2)]
    with pytest.raises(ValueError, match="not a pinned requirement"):
        parse_lock("click>=8\n")
