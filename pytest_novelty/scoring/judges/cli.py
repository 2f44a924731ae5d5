"""``pytest-novelty judge``: score a JSON Lines file of (prompt, response) pairs with a judge.

Each input line is an object with ``id``, ``prompt`` and ``response`` (and optionally ``meta``,
the task hints of :class:`~pytest_novelty.scoring.judges.JudgeItem`). Each output line is
``{"id": ..., "quality": 0.8, "scores": [4, 4, 5, 3, 4], "judge": "openai:MODEL"}``, in input
order, with ``"quality": null`` and an ``"error"`` when the item could not be scored.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from pytest_novelty.errors import ConfigError
from pytest_novelty.suites.prompts import TASKS


def add_commands(subparsers: Any) -> None:
    """Register the ``judge`` command on an ``argparse`` subparsers object."""
    judge = subparsers.add_parser(
        "judge",
        help="score (prompt, response) pairs with a quality judge",
        description=(
            "Score each (prompt, response) of a JSON Lines file (fields id, prompt, response, optional "
            "meta) and write one JSON line per item: id, quality (0-1, null when unscored), scores, "
            "judge, and error when unscored."
        ),
    )
    judge.add_argument("input", metavar="INPUT.jsonl", help="JSON Lines with id, prompt, response")
    judge.add_argument("--task", required=True, choices=TASKS, help="the task the responses answer")
    judge.add_argument(
        "--judge", default="rules", metavar="SPEC", help="rules (default), openai:MODEL, hf:PATH, reward:PATH"
    )
    judge.add_argument("--samples", type=int, default=5, help="samples per item (default 5)")
    judge.add_argument("--temperature", type=float, default=0.7, help="sampling temperature (default 0.7)")
    judge.add_argument("--base-url", help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)")
    judge.add_argument("--budget", type=int, help="most requests to send; items past it stay unscored")
    judge.add_argument("--concurrency", type=int, default=32, help="requests in flight at once (default 32)")
    judge.add_argument("--dry-run", action="store_true", help="print how many calls a run would make")
    judge.add_argument("--cache", metavar="DIR", help="answer cache (default: pytest-novelty's cache)")
    judge.add_argument("-o", "--output", metavar="FILE", help="write results here instead of standard output")
    judge.add_argument("--progress", action="store_true", help="show a progress bar on standard error")
    judge.set_defaults(func=run_judge_command)


def read_items(path: Path, task: str) -> tuple[list[Any], list[Any]]:
    """The ids and :class:`JudgeItem` records of a JSON Lines input; ``ConfigError`` on a bad line."""
    from pytest_novelty.scoring.judges import JudgeItem

    ids, items = [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the input: {exc.strerror}", path=path) from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON ({exc.msg})", path=path, field=f"line {number}") from None
        if not isinstance(row, dict):
            raise ConfigError("expected a JSON object", path=path, field=f"line {number}")
        for name in ("id", "prompt", "response"):
            if name not in row:
                raise ConfigError(f"missing {name!r}", path=path, field=f"line {number}")
        if not isinstance(row["prompt"], str) or not isinstance(row["response"], str):
            raise ConfigError("'prompt' and 'response' must be strings", path=path, field=f"line {number}")
        meta = row.get("meta") or {}
        if not isinstance(meta, dict):
            raise ConfigError("'meta' must be an object", path=path, field=f"line {number}")
        ids.append(row["id"])
        items.append(JudgeItem(task=task, prompt=row["prompt"], response=row["response"], meta=meta))
    return ids, items


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def write_results(out: TextIO, ids: list[Any], results: list[Any]) -> None:
    """One JSON line per result, in input order."""
    for item_id, result in zip(ids, results, strict=True):
        row: dict[str, Any] = {
            "id": item_id,
            "quality": result.quality,
            "scores": [_number(s) for s in result.scores],
            "judge": result.judge,
        }
        if result.quality is None:
            row["error"] = result.error
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_judge_command(args: argparse.Namespace) -> int:
    """The ``judge`` command: read, score (or count calls with ``--dry-run``), write."""
    from pytest_novelty.scoring.judges import dry_run, open_judge

    path = Path(args.input)
    ids, items = read_items(path, args.task)
    if args.cache:
        cache = Path(args.cache)
    else:
        from pytest_novelty.storage import default_cache_dir

        cache = default_cache_dir() / "judge"
    judge = open_judge(
        args.judge,
        cache_dir=cache,
        samples=args.samples,
        temperature=args.temperature,
        base_url=args.base_url,
        budget=args.budget,
        concurrency=args.concurrency,
    )
    if args.dry_run:
        calls = dry_run(judge, items)
        print(f"dry run: {judge.spec} would make {calls} calls for {len(items)} items")
        return 0
    results = judge.score(items, progress=args.progress)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            write_results(out, ids, results)
    else:
        write_results(sys.stdout, ids, results)
    unscored = sum(result.quality is None for result in results)
    if unscored:
        print(f"pytest-novelty judge: {unscored} of {len(results)} items unscored", file=sys.stderr)
    return 0
