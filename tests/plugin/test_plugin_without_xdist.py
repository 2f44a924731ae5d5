"""The plugin works where pytest-xdist is absent or disabled: its xdist hooks are optional.

pytest refuses a plugin that implements a hook nobody declared (``PluginValidationError: unknown
hook``), and xdist declares its own hooks only when it is loaded; ``-p no:xdist`` (or an
environment without xdist) made every run an INTERNALERROR, exit 3.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def test_the_demo_gates_with_xdist_disabled(pytester: pytest.Pytester, demo_run_cache: Path) -> None:
    result = pytester.runpytest_inprocess("-p", "no:xdist", "--model", "demo", f"--novelty-cache={demo_run_cache}",
                                          "-k", "story", "-q")  # fmt: skip
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 0, out[-3000:]
    assert "INTERNALERROR" not in out and "unknown hook" not in out
    assert result.parseoutcomes().get("passed", 0) >= 1
