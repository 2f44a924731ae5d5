"""The fault matrix: every declared option and argument against every class of bad input it can take.

The rows come from the code's own declarations, never from a list kept here: the run's options
table (:data:`pytest_novelty.pipeline.options.OPTIONS`, each option's ``takes``), offered under
pytest and under ``pytest-novelty run``, and every argument of every other subcommand of the
command line (each argparse argument's declared type, :func:`pytest_novelty.pipeline.values.declared`).
A new option or subcommand joins the matrix by being declared. What this module keeps is what a
declaration cannot say: how to call each subcommand with valid values (:data:`BASES`), so that one
argument at a time can be given a bad one, and what makes each option meaningful (``--judge-base-url``
goes with an ``openai:`` judge).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from pytest_novelty.pipeline.values import Takes, declared
from tests.faults.faults import FAULTS, Fault

PYTEST = "pytest"
CLI = "cli"


@dataclass(frozen=True)
class Target:
    """One option or argument of one front end, and how to give it a value."""

    front: str
    command: tuple[str, ...]
    """The subcommand (``("cache", "merge")``); ``()`` for pytest."""
    flag: str
    """``--novelty-cache``, ``--into``; for a positional argument its metavar (``SRC``)."""
    takes: Takes
    positional: bool = False
    valid: str | None = None
    """A valid value of the option (what ``truncated`` cuts short, what ``misspelt-spec`` misspells)."""
    context: tuple[str, ...] = ()
    """Other arguments that make the option meaningful (``--novelty-judge openai:judge-model``)."""

    @property
    def label(self) -> str:
        where = "pytest" if self.front == PYTEST else "pytest-novelty " + " ".join(self.command)
        return f"{where} {self.flag}"


@dataclass(frozen=True)
class Case:
    target: Target
    fault: Fault

    @property
    def id(self) -> str:
        return f"{self.target.label} {self.fault.name}".replace(" ", ":")


@dataclass
class Base:
    """A valid call of a subcommand: its arguments (placeholders ``{name}`` filled from the valid
    files), and the positional arguments' places in it by metavar."""

    args: tuple[str, ...]
    valid: dict[str, str] = field(default_factory=dict)
    """A valid value for an argument, by flag or metavar (placeholders allowed)."""
    context: dict[str, tuple[str, ...]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], int] = field(default_factory=dict)
    """Exit statuses other than the class's, by (argument, class), and why: a pack cut short is damage to
    a file the tool wrote itself (a harness error, 8), not a file of the wrong kind (4)."""


def walk(parser: argparse.ArgumentParser, command: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                             argparse.Action]]:
    """Every (subcommand, argument) of a parser, subcommands within subcommands."""
    for action in parser._actions:  # argparse has no public list of a parser's arguments
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*command, name))
        elif not isinstance(action, argparse._HelpAction):
            yield command, action


def undeclared(parser: argparse.ArgumentParser) -> list[str]:
    """The arguments of ``parser`` that declare nothing they take."""
    return [f"pytest-novelty {' '.join(c)} {a.option_strings[0] if a.option_strings else a.metavar or a.dest}"
            for c, a in walk(parser) if declared(a) is None and not a.dest.startswith("novelty_")]  # table's own


def cases(targets: Sequence[Target], *, faults: Sequence[Fault] = FAULTS) -> list[Case]:
    """Every applicable (target, class) pair."""
    return [Case(t, f) for t in targets for f in faults if f.applies(t.takes, t.valid)]


def table_targets(options: Sequence[object], *, valid: Callable[[str], str | None],
                  context: Callable[[str], tuple[str, ...]]) -> list[Target]:
    """The run options table's rows, as each front end offers them (``valid``/``context`` by name)."""
    found = []
    for option in options:
        takes: Takes = option.takes  # type: ignore[attr-defined]
        name: str = option.name  # type: ignore[attr-defined]
        where: tuple[str, ...] = option.where  # type: ignore[attr-defined]
        if takes.kind == "flag":
            continue
        if PYTEST in where:
            found.append(Target(PYTEST, (), option.long, takes, valid=valid(name),  # type: ignore[attr-defined]
                                context=context(name)))
        if CLI in where:
            found.append(Target(CLI, ("run",), option.cli_flag, takes, valid=valid(name),  # type: ignore[attr-defined]
                                context=context(name)))
    return found


def command_targets(parser: argparse.ArgumentParser, bases: dict[tuple[str, ...], Base],
                    skip: Callable[[tuple[str, ...], argparse.Action], bool]) -> list[Target]:
    """Every declared argument of every subcommand (``skip``: those the table's rows cover)."""
    found = []
    for command, action in walk(parser):
        takes = declared(action)
        if takes is None or takes.kind == "flag" or skip(command, action):
            continue
        base = bases.get(command, Base(()))
        flag = action.option_strings[-1] if action.option_strings else str(action.metavar or action.dest)
        found.append(Target(CLI, command, flag, takes, positional=not action.option_strings,
                            valid=base.valid.get(flag), context=base.context.get(flag, ())))
    return found
