"""The suites a command of ``pytest-novelty`` runs: ``--suites`` and ``--suite``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.infra.resources import bundled_path
from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suites


def suites_folder(given: str | None) -> Path:
    """The folder of ``--suites``, else ./suites, else the bundled suites."""
    if given:
        return Path(given).expanduser()
    return Path("suites") if Path("suites").is_dir() else bundled_path("suites")


def no_such_suite(name: str, suites: Sequence[Suite], folder: Path, field: str) -> ConfigError:
    """Bad input for a suite name the ``suites`` of ``folder`` lack, with a did-you-mean and their names."""
    names = sorted(s.name for s in suites)
    return ConfigError(f"no suite named {name!r} in {folder}{did_you_mean(name, names)}; the suites are "
                       f"{', '.join(names)}", field=field)  # fmt: skip


def load_suites_of(args: argparse.Namespace) -> list[Suite]:
    """The suites a command runs: those of ``--suites`` (:func:`suites_folder`), only those ``--suite``
    names when it is given (an unknown name is bad input with a did-you-mean)."""
    from pytest_novelty.pipeline.options import by_name

    folder = suites_folder(args.novelty_suites)
    suites = load_suites(folder, field=by_name("suites").cli_flag if args.novelty_suites else None)
    if args.novelty_suite:
        wanted = set(args.novelty_suite)
        unknown = sorted(wanted - {s.name for s in suites})
        if unknown:
            raise no_such_suite(unknown[0], suites, folder, "--suite")
        suites = [s for s in suites if s.name in wanted]
    return suites
