"""The one check of an unknown backend kind, shared by the tests of every ``open_*`` function."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from pytest_novelty.infra.errors import ConfigError


def check_unknown_kind(open_spec: Callable[[str], object], spec: str, usage: str, close: str | None) -> None:
    """``open_spec(spec)`` refuses the unknown kind of ``spec`` in one line that lists the kinds
    (``usage``) and suggests ``close``, the registered kind it is close to, or nothing when ``None``."""
    with pytest.raises(ConfigError, match=re.escape(f"; use {usage}")) as caught:
        open_spec(spec)
    message = str(caught.value)
    suggestion = re.search(r"did you mean '([^']*)'", message)
    assert (suggestion.group(1) if suggestion else None) == close, message
    assert "\n" not in message
