"""Fixtures of the search and report tests: a project folder, the fake keyless boundary, a Tavily key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gsd_research.search import keyless
from tests.fakes.tavily import FakeKeyless

KEY = "tvly-canary-XXXX-3f9a"


@pytest.fixture(autouse=True)
def workdir(tmp_path, monkeypatch) -> Path:
    """Each test runs in its own project folder (reports are written relative to it)."""
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.fixture(autouse=True)
def kl(monkeypatch) -> FakeKeyless:
    """No test reaches the real ddgs library: the keyless boundary is a fake."""
    fake_backend = FakeKeyless()
    monkeypatch.setattr(keyless, "make_backend", lambda cfg: fake_backend)
    return fake_backend


@pytest.fixture
def tavily(fake, monkeypatch):
    monkeypatch.setenv("TAVILY_API_KEY", KEY)
    return fake
