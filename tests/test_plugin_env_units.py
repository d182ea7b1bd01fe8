"""The plugin environment's decisions that need no build: the free-space estimate, the route a fix is given for,
plugin roots Claude Code leaves off PATH, the launcher's verdicts on unsafe directories."""

from __future__ import annotations

import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "hooks"))

from gsd_research_hooks import plugin_env  # noqa: E402


def test_the_free_space_estimate_is_close_to_the_real_environment():
    """The real lock's environment measured 594 MB (`du -sm` of a plugin build, CPython 3.11, see plugin_env);
    the estimate keeps a modest margin, not a third more."""
    needed = plugin_env.needed_bytes(str(ROOT)) >> 20
    assert plugin_env.locked_count(str(ROOT)) > 100
    assert 594 <= needed <= 1.12 * 594, needed
