"""The suites a command of ``pytest-novelty`` runs: ``--suites`` and ``--suite``."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_novelty.suites.schema import Suite
from pytest_novelty.suites.suite_file import load_suites


def load_suites_of(args: argparse.Namespace) -> list[Suite]:
    """The suites a command runs: those of ``--suites`` (default ./suites, else the bundled ones), only
    those ``--suite`` names when it is given (an unknown name is bad input with a did-you-mean)."""
    from pytest_novelty.infra.resources import bundled_path
    from pytest_novelty.pipeline.options import by_name

    folder = args.novelty_suites or (Path("suites") if Path("suites").is_dir() else bundled_path("suites"))
    suites = load_suites(Path(folder).expanduser(), field=by_name("suites").cli_flag if args.novelty_suites else None)
    if args.novelty_suite:
        wanted = set(args.novelty_suite)
        unknown = sorted(wanted - {s.name for s in suites})
        if unknown:
            from pytest_novelty.infra.errors import ConfigError, did_you_mean

            names = [s.name for s in suites]
            raise ConfigError(f"no suite named {unknown[0]!r}{did_you_mean(unknown[0], names)}; "
                              f"the suites are {', '.join(names)}", field="--suite")
        suites = [s for s in suites if s.name in wanted]
    return suites
