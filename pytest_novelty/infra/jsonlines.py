"""Reading JSON Lines input (judge inputs, calibration files, corpora, graded sets) with one-line errors.

Every reader of a ``.jsonl`` file skips blank lines and stops at the first line that is not JSON
(or not an object, when ``objects`` is set) with a :class:`~pytest_novelty.infra.errors.ConfigError`
that names the file and the line: ``FILE: line 3: not valid JSON (Expecting value)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError

__all__ = ["json_lines"]


def json_lines(
    lines: Iterable[str], path: str | Path, *, objects: bool = True, hint: str = ""
) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` for each non-blank line of ``lines`` (1-based numbers).

    ``path`` only names the file in errors; ``objects`` requires each value to be a JSON object;
    ``hint`` is appended to the "not valid JSON" error (say what a line should hold).
    """
    numbered = enumerate(lines, 1)
    while True:
        try:
            number, line = next(numbered)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:  # a binary file read as text
            raise ConfigError(f"not UTF-8 text ({exc.reason} at a byte {exc.object[exc.start]:#04x}); give a UTF-8 "
                              "JSON Lines file", path=path) from None
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            why = hint or "; write each line as one whole JSON object (a file cut short ends in half a line)"
            raise ConfigError(f"not valid JSON ({exc.msg}){why}", path=path, field=f"line {number}") from None
        if objects and not isinstance(value, dict):
            raise ConfigError("expected a JSON object", path=path, field=f"line {number}")
        yield number, value
