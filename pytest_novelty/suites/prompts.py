"""The prompt record that flows from the suites layer to every later layer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TASKS = ("story", "poetry", "tool", "open")


@dataclass(frozen=True)
class Prompt:
    """One task input.

    ``text`` is the task input itself (a story opening, a poetry instruction, a problem with its
    items, an open question), not yet formatted for a model. ``reference`` is a human answer when
    the dataset has one. ``meta`` carries what the task's checks need, by convention:
    ``characters`` (story), ``contains`` / ``ends_with`` / ``rhymes_with`` (poetry),
    ``items`` (tool use); loaders fill what they can.
    """

    id: str
    task: str
    text: str
    reference: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
