"""The text of a small ``story`` suite file, for the tests that write one into a temporary folder.

Every field the tests vary is a keyword; the rest is the one layout they all share, so a test says
only what makes its suite different (a judge, a token budget, a gate, its thresholds).
"""

from __future__ import annotations

from collections.abc import Sequence


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
