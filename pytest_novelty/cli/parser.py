"""The command line's argument parser: argparse, with one line for bad input and exit status 4."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

from pytest_novelty.infra.errors import USAGE_EXIT_STATUS, ConfigError


class Parser(argparse.ArgumentParser):
    """argparse that says bad input in one line and exits with the status pytest gives it (4, not 2)."""

    def error(self, message: str) -> NoReturn:
        """One line: the command, what is wrong and where to read the usage (not argparse's usage block)."""
        self.exit(USAGE_EXIT_STATUS, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


@contextmanager
def named_as(option: str, *fields: str | None) -> Iterator[None]:
    """Bad input raised inside the block about one of ``fields`` (the layers' name for a value:
    ``tokenizer``, ``originality``; None: an error naming no field) names ``option`` instead, the
    argument the user typed."""
    try:
        yield
    except ConfigError as exc:
        if exc.field not in fields:
            raise
        raise ConfigError(exc.detail, path=exc.path, field=option) from None
