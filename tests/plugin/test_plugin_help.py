"""``--help`` texts read as plain text: no reST or Markdown markup in what the terminal shows."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

MARKUP = re.compile(r"``|`[^`\s]+`|:(func|class|meth|attr|mod):")


def test_pytest_novelty_help_is_plain_text() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest_novelty.cli", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "pytest-novelty" in out and "run" in out
    assert not MARKUP.search(out), out


@pytest.mark.parametrize("command", ["run", "cache", "demo", "index", "originality", "judge"])
def test_subcommand_help_is_plain_text(command: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest_novelty.cli", command, "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert not MARKUP.search(out), out
