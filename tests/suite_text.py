"""The text of a small ``story`` suite file, for the tests that write one into a temporary folder.

Every field the tests vary is a keyword; the rest is the one layout they all share, so a test says
only what makes its suite different (a judge, a token budget, a gate, its thresholds).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Who goes where in the prompts of the small story suites; a suite takes the first rows it needs.
CAST = [("Lily", "Tom", "park"), ("Mia", "Ben", "garden"), ("Sam", "Anna", "beach"),
        ("Max", "Lucy", "forest"), ("Tom", "Mia", "school"), ("Ben", "Lily", "house")]


def suite_toml(
    *,
    task: str = "story",
    samples: int = 2,
    max_new_tokens: int | str = 16,
    batch_size: int | None = 4,
    ngrams: Sequence[int] | None = None,
    judge: str = "rules",
    judge_samples: int = 1,
    scoring: str = "",
    gate: str = "",
    thresholds: Sequence[tuple[str, float | int | str]] = (("quality", 0.0),),
) -> str:
    """A suite over ``prompts.jsonl`` in the same folder; ``scoring`` and ``gate`` are extra TOML lines
    for those tables (``gate`` adds a ``[gate]`` table when given), ``thresholds`` (metric, min) pairs."""
    lines = [f'task = "{task}"', "[prompts]", 'source = "jsonl:prompts.jsonl"', "[generation]"]
    lines += [f"samples = {samples}", f"max_new_tokens = {max_new_tokens}"]
    if batch_size is not None:
        lines.append(f"batch_size = {batch_size}")
    lines.append("[scoring]")
    if ngrams is not None:
        lines.append(f"ngrams = [{', '.join(str(n) for n in ngrams)}]")
    lines += [f'judge = "{judge}"', f"judge_samples = {judge_samples}"]
    lines += scoring.splitlines()
    if gate:
        lines += ["[gate]", *gate.splitlines()]
    for metric, minimum in thresholds:
        lines += ["[[thresholds]]", f'metric = "{metric}"', f"min = {minimum}"]
    return "\n" + "\n".join(lines) + "\n"


def story_prompts(count: int) -> list[dict[str, Any]]:
    """The first ``count`` rows of a small story suite's ``prompts.jsonl``: two of the cast go to a place
    (after the cast's pairs, the same pairs named the other way round)."""
    cast = [*CAST, *((b, a, place) for a, b, place in CAST)]
    if not 0 < count <= len(cast):
        raise ValueError(f"story_prompts: count must be 1 to {len(cast)}, got {count}")
    return [
        {"id": f"p{i}", "text": f"{a} and {b} went to the {place}.", "meta": {"characters": [a, b]}}
        for i, (a, b, place) in enumerate(cast[:count])
    ]


def write_story_suite_folder(folder: Path, prompts: list[dict[str, Any]], suite: str) -> Path:
    """Write ``prompts.jsonl`` (``prompts``) and ``story.toml`` (the text ``suite``) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (folder / "story.toml").write_text(suite)
    return folder
