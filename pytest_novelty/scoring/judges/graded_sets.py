"""Calibration files from public graded datasets (``pytest-novelty judge calibration-file``).

A source is ``KIND:PATH``; the files are read where the user downloaded them, never shipped.

``macgyver:PATH``
    MacGyver's ``problem_solution_pair`` workbook (``.xlsx``) or its JSON Lines conversion
    (allenai/MacGyver, Apache-2.0). Each solution carries a human ``Label``; the grade is ordinal,
    the same 0-2 scale for both kinds of problem:

    ========================  =================================  =====
    solvable problem          unsolvable problem                 grade
    ========================  =================================  =====
    ``efficient``             ``correct_right_reason``           2
    ``inefficient``           ``correct_wrong_reason``           1
    ``infeasible``            ``wrong_solution``                 0
    ========================  =================================  =====

    Rows labelled ``none`` or without a solution have no grade and are left out. Every problem has
    one graded solution, so the items carry no ``group``. Task ``tool``.

``noveltybench:PATH``
    A NoveltyBench scored-output file (``sample_data/*.jsonl``: ``humans.jsonl``, ``gpt-4o.jsonl``;
    novelty-bench/novelty-bench, MIT). **Its grades are the benchmark's reward-model scores (1-10),
    not human judgements**: use it to check that a judge reproduces NoveltyBench's reference scale.
    Only the first generation of each equivalence class is taken, since the benchmark scores that
    one alone (the others hold 0 in ``generation_scores``); ``group`` is the prompt id. Task ``open``.

CoPoet's published files hold instructions, references and model outputs but no grades, so they
cannot make a calibration file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.infra.jsonlines import json_lines
from pytest_novelty.infra.storage import atomic_write_text

MACGYVER_GRADES = {
    "efficient": 2, "inefficient": 1, "infeasible": 0, "correct_right_reason": 2, "correct_wrong_reason": 1,
    "wrong_solution": 0,
}  # fmt: skip
"""MacGyver ``Label`` → ordinal grade (see the module docstring)."""

Rows = list[dict[str, Any]]


def _macgyver(path: Path) -> tuple[str, Rows]:
    from pytest_novelty.suites.loaders import load_prompts

    prompts = load_prompts(f"macgyver:{path}", base_dir=Path.cwd(), solvable_only=False, split="all")
    if not any("label" in p.meta for p in prompts):
        raise ConfigError("no 'Label' column: use problem_solution_pair (the labelled file), not "
                          "additional_human_solutions", path=path)
    rows = []
    for prompt in prompts:
        grade = MACGYVER_GRADES.get(str(prompt.meta.get("label", "")).strip().lower())
        if grade is None or not prompt.reference:
            continue
        meta = {k: v for k, v in prompt.meta.items() if k != "label"}  # the grade must not reach the judge
        rows.append({"id": prompt.id, "prompt": prompt.text, "response": prompt.reference, "human": grade,
                     "meta": meta})
    return "tool", rows


def _noveltybench(path: Path) -> tuple[str, Rows]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the file ({exc.strerror})", path=path) from None
    for number, record in json_lines(lines, path, objects=False):
        needed = ("id", "prompt", "generations", "partition", "generation_scores")
        missing = [k for k in needed if not isinstance(record, dict) or k not in record]
        if missing:
            raise ConfigError(
                f"missing {', '.join(map(repr, missing))}; give a NoveltyBench scored-output file "
                "(sample_data/*.jsonl), not the prompt list", path=path, field=f"line {number}",
            )
        seen: set[Any] = set()
        for k, (text, cls, score) in enumerate(
            zip(record["generations"], record["partition"], record["generation_scores"], strict=False)
        ):
            if cls in seen:
                continue
            seen.add(cls)
            rows.append({"id": f"{record['id']}-{k}", "prompt": str(record["prompt"]), "response": str(text),
                         "human": score, "group": str(record["id"])})
    return "open", rows


KINDS: dict[str, Callable[[Path], tuple[str, Rows]]] = {"macgyver": _macgyver, "noveltybench": _noveltybench}
NOTES = {"noveltybench": "the grades are NoveltyBench's reward-model scores, not human judgements"}


def graded_rows(source: str) -> tuple[str, Rows]:
    """The task and calibration rows of ``source`` (``macgyver:PATH`` or ``noveltybench:PATH``)."""
    kind, sep, location = source.partition(":")
    if not sep or kind not in KINDS:
        raise ConfigError(
            f"unknown source {source!r}{did_you_mean(kind, KINDS)}; use macgyver:PATH or noveltybench:PATH",
            field="--from",
        )
    path = Path(location).expanduser()
    if not path.is_file():
        raise ConfigError("file not found; give the downloaded dataset file", path=path)
    task, rows = KINDS[kind](path)
    if not rows:
        raise ConfigError("no graded item in this file", path=path)
    return task, rows


def write_rows(path: Path, rows: Rows) -> None:
    """Write calibration rows as JSON Lines (atomically)."""
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
