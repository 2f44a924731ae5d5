"""Where the files that ship with the project live: the bundled suites and fixtures.

In a source checkout (or an editable install) they are the repository's own ``suites/`` and
``fixtures/`` folders; a wheel carries copies under ``pytest_novelty/_bundled/`` (see the
``force-include`` table in ``pyproject.toml``).
"""

from __future__ import annotations

from pathlib import Path

from pytest_novelty.infra.errors import ConfigError, HarnessError, did_you_mean

BUNDLED = ("suites", "fixtures")

_PACKAGE = Path(__file__).resolve().parent.parent


def bundled_path(name: str) -> Path:
    """The folder of the bundled ``suites`` or ``fixtures``: the wheel's copy, else the checkout's,
    recognised by the ``pyproject.toml`` beside it (never an unrelated ``suites`` in site-packages)."""
    if name not in BUNDLED:
        raise ConfigError(f"unknown bundled folder {name!r}; expected one of {', '.join(BUNDLED)}"
                          + did_you_mean(name, BUNDLED))
    wheel = _PACKAGE / "_bundled" / name
    if wheel.is_dir():
        return wheel
    checkout = _PACKAGE.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / name).is_dir():
        return checkout / name
    raise HarnessError(
        f"the bundled {name!r} folder is missing (looked in {wheel} and {checkout / name}); "
        "reinstall pytest-novelty"
    )
