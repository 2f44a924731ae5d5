"""The prompt record that flows from the suites layer to every later layer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TASKS = ("story", "poetry", "tool", "open")


@dataclass(frozen=True)
class Prompt:
    """One task input: ``text`` not yet formatted for a model, ``reference`` a human answer when the
    dataset has one, ``meta`` what the task's checks need (``characters`` for stories, ``contains`` /
    ``ends_with`` / ``rhymes_with`` for poetry, ``items`` for tool use), as far as a loader can tell."""

    id: str
    task: str
    text: str
    reference: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
