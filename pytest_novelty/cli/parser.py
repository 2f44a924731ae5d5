"""The command line's argument parser: argparse, with one line for bad input and exit status 4."""

from __future__ import annotations

import argparse
from typing import NoReturn

from pytest_novelty.infra.errors import USAGE_EXIT_STATUS


class Parser(argparse.ArgumentParser):
    """argparse that says bad input in one line and exits with the status pytest gives it (4, not 2)."""

    def error(self, message: str) -> NoReturn:
        """One line: the command, what is wrong and where to read the usage (not argparse's usage block)."""
        self.exit(USAGE_EXIT_STATUS, f"{self.prog}: error: {message} (see {self.prog} --help)\n")
