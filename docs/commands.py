"""How the docs' generated examples show a command: the very arguments the producer ran, with its
scratch paths written as a reader would type them, so an example's command is what the code ran."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

WIDTH = 100
"""A shown command longer than this is broken over lines with a backslash, as a shell takes it."""
RAN: list[list[str]] = []
"""The arguments of every command the producers ran (their own harness flags aside), newest last:
the test suite holds each example's shown commands to them."""


def shown(program: str, args: Sequence[str], names: Mapping[str, str] | None = None) -> str:
    """``$ program ARGS``, each scratch path (a key of ``names``, longest first) written as its value.

    A value may be shell text a reader types (``$(pytest-novelty demo path index)``): it is shown
    unquoted."""
    names = dict(names or {})
    words = []
    for arg in args:
        raw = False
        for path in sorted(names, key=len, reverse=True):
            if path in arg:
                arg, raw = arg.replace(path, names[path]), raw or "$(" in names[path]
        words.append(arg if raw else shlex.quote(arg))
    groups: list[str] = []  # an option with its value: never broken apart
    for word in words:
        if groups and not word.startswith("-") and groups[-1].startswith("-") and " " not in groups[-1]:
            groups[-1] += " " + word
        else:
            groups.append(word)
    lines, line = [], f"$ {program}"
    for group in groups:
        if len(line) + 1 + len(group) > WIDTH:
            lines.append(line + " \\")
            line = "    " + group
        else:
            line += " " + group
    return "\n".join([*lines, line])
