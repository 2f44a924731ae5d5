"""``pytest-novelty judge``: score a JSON Lines file of (prompt, response) pairs with a judge.

Each input line is an object with ``id``, ``prompt`` and ``response`` (and optionally ``meta``,
the task hints of :class:`~pytest_novelty.scoring.judges.JudgeItem`). Each output line is
``{"id": ..., "quality": 0.8, "scores": [4, 4, 5, 3, 4], "judge": "openai:MODEL"}``, in input
order, with ``"quality": null`` and an ``"error"`` when the item could not be scored.

Two subcommands work on human-graded files (see :mod:`.calibrate` and :mod:`.graded_sets`):
``judge calibrate FILE`` measures a judge's agreement with the grades, and ``judge
calibration-file --from KIND:PATH --out FILE`` builds such a file from a public graded dataset.
They are parsed by :func:`nested_parser` (``judge INPUT.jsonl`` keeps its positional input; a file
actually named ``calibrate`` is given as ``./calibrate``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.jsonlines import json_lines
from pytest_novelty.pipeline.values import Takes
from pytest_novelty.suites.prompts import TASKS

OUT_FILE = Takes("out-file")


def add_commands(subparsers: Any) -> None:
    """Register the ``judge`` command on an ``argparse`` subparsers object."""
    judge = subparsers.add_parser(
        "judge",
        help="score (prompt, response) pairs with a quality judge (also: judge calibrate, judge calibration-file)",
        description=(
            "Score each (prompt, response) of a JSON Lines file (fields id, prompt, response, optional "
            "meta) and write one JSON line per item: id, quality (0-1, null when unscored), scores, "
            "judge, and error when unscored. See also `judge calibrate` and `judge calibration-file`."
        ),
    )
    _judge_options(judge, "input", "INPUT.jsonl", "JSON Lines with id, prompt, response")
    judge.add_argument("-o", "--output", metavar="FILE", **OUT_FILE.argument(),
                       help="write results here instead of standard output")
    judge.set_defaults(func=run_judge_command)


def _judge_options(parser: argparse.ArgumentParser, name: str, metavar: str, what: str) -> None:
    """The input file (argument ``name``) and the options that choose and run a judge, shared by
    ``judge`` and ``judge calibrate``."""
    parser.add_argument(name, metavar=metavar, **Takes("file").argument(), help=what)
    parser.add_argument("--task", required=True, metavar="TASK", **Takes("choice", choices=TASKS).argument(),
                        help=f"the task the responses answer: {', '.join(TASKS)}")
    parser.add_argument("--progress", action="store_true", help="show a progress bar on standard error")
    parser.add_argument(
        "--judge", default="rules", metavar="SPEC", **Takes("spec").argument(),
        help="rules (default), openai:MODEL, hf:PATH, reward:PATH",
    )
    parser.add_argument("--samples", **Takes("number", 1, 100).argument(), default=5,
                        help="samples per item (default 5)")
    parser.add_argument("--temperature", **Takes("number", 0, 2, whole=False).argument(), default=0.7,
                        help="sampling temperature (default 0.7)")
    parser.add_argument("--base-url", **Takes("url").argument(),
                        help="OpenAI-compatible endpoint (default $OPENAI_BASE_URL)")
    parser.add_argument("--budget", **Takes("number", 0, 10**9).argument(),
                        help="most requests to send; items past it stay unscored")
    parser.add_argument("--concurrency", **Takes("number", 1, 1024).argument(), default=32,
                        help="requests in flight at once (default 32)")
    parser.add_argument("--dry-run", action="store_true", help="print how many calls a run would make")
    parser.add_argument("--cache", metavar="DIR", **Takes("out-folder").argument(),
                        help="answer cache (default: pytest-novelty's cache)")


def read_items(path: Path, task: str) -> tuple[list[Any], list[Any]]:
    """The ids and :class:`JudgeItem` records of a JSON Lines input; ``ConfigError`` on a bad line."""
    from pytest_novelty.scoring.judges import JudgeItem

    ids, items = [], []
    try:
        lines = path.read_bytes().decode("utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read the input: {exc.strerror}", path=path) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start:,}); give a UTF-8 JSON Lines file",
                          path=path) from None
    for number, row in json_lines(lines, path):
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


def open_judge_from(args: argparse.Namespace) -> Any:
    """The judge the command-line options name, with its answer cache."""
    from pytest_novelty.infra.abilities import Preflighted
    from pytest_novelty.infra.errors import PreflightError
    from pytest_novelty.infra.storage import default_cache_dir
    from pytest_novelty.pipeline.preflight import check_cache_folder
    from pytest_novelty.scoring.judges import open_judge

    cache = Path(args.cache) if args.cache else default_cache_dir() / "judge"
    check_cache_folder(cache, option="--cache", given=bool(args.cache))
    judge = open_judge(args.judge, cache_dir=cache, samples=args.samples, temperature=args.temperature,
                       base_url=args.base_url, budget=args.budget, concurrency=args.concurrency)
    if isinstance(judge, Preflighted) and not args.dry_run:  # one quick request, not the scoring's retries
        try:
            judge.check()
        except PreflightError as exc:
            raise PreflightError(f"--base-url: {exc}" if args.base_url else str(exc)) from None
    return judge


def run_judge_command(args: argparse.Namespace) -> int:
    """The ``judge`` command: read, score (or count calls with ``--dry-run``), write."""
    path = Path(args.input)
    ids, items = read_items(path, args.task)
    judge = open_judge_from(args)
    if args.dry_run:
        return _dry_run(judge, items)
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


def _dry_run(judge: Any, items: list[Any]) -> int:
    """``--dry-run``: say how many calls the judge would make for ``items``, and send none."""
    from pytest_novelty.scoring.judges import dry_run

    print(f"dry run: {judge.spec} would make {dry_run(judge, items)} calls for {len(items)} items")
    return 0


NESTED = ("calibrate", "calibration-file")


def nested_parser(argv: Sequence[str]) -> argparse.ArgumentParser | None:
    """The parser of ``judge calibrate`` / ``judge calibration-file`` when ``argv`` starts with one
    of them (the argument list after the program name), else None."""
    if len(argv) < 2 or argv[0] != "judge" or argv[1] not in NESTED:
        return None
    from pytest_novelty.cli.parser import Parser
    from pytest_novelty.metrics.agreement import DEFAULT_RESAMPLES

    parser = Parser(prog="pytest-novelty judge")
    sub = parser.add_subparsers(dest="judge_command", required=True)
    cal = sub.add_parser(
        "calibrate",
        help="measure a judge's agreement with human grades",
        description=(
            "Score every item of a calibration file (JSON Lines: id, prompt, response, human, optional group "
            "and meta) with a judge and report, over the scored items: Spearman rho, Kendall tau-b and "
            "pairwise ranking accuracy within groups (judge ties count 1/2, human ties are left out), each "
            "with a percentile-bootstrap 95% CI, and the mean judge score per human grade."
        ),
    )
    _judge_options(cal, "file", "FILE", "calibration file (JSON Lines)")
    cal.add_argument("--resamples", **Takes("number", 1, 1_000_000).argument(), default=DEFAULT_RESAMPLES,
                     help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    cal.add_argument("--seed", **Takes("number", 0, 2**32 - 1).argument(), default=0,
                     help="bootstrap seed (default 0)")
    cal.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    cal.set_defaults(func=run_calibrate_command)
    build = sub.add_parser(
        "calibration-file",
        help="build a calibration file from a public graded dataset",
        description="Convert a graded dataset you downloaded into a calibration file: macgyver:PATH "
        "(problem_solution_pair.xlsx or .jsonl; human labels) or noveltybench:PATH (a sample_data/*.jsonl "
        "file; NoveltyBench's reward-model scores, not human grades).",
    )
    build.add_argument(
        "--from", dest="source", required=True, metavar="KIND:PATH", **Takes("spec").argument(),
        help="macgyver:PATH or noveltybench:PATH",
    )
    build.add_argument("--out", required=True, metavar="FILE", **OUT_FILE.argument(), help="calibration file to write")
    build.set_defaults(func=run_calibration_file_command)
    return parser


def run_calibrate_command(args: argparse.Namespace) -> int:
    """``judge calibrate``: score the graded items (or count calls with ``--dry-run``) and report agreement."""
    from pytest_novelty.pipeline.calibration import calibrate, read_calibration_file

    if args.resamples < 1:
        raise ConfigError(f"must be at least 1, got {args.resamples}", field="--resamples")
    graded = read_calibration_file(args.file)
    judge = open_judge_from(args)
    if args.dry_run:
        return _dry_run(judge, [item.judge_item(args.task) for item in graded])
    result = calibrate(
        judge, graded, args.task, path=args.file, resamples=args.resamples, seed=args.seed, progress=args.progress
    )
    if args.json:
        print(json.dumps(result.as_dict(), ensure_ascii=False))
    else:
        print("\n".join(result.lines()))
    return 0


def run_calibration_file_command(args: argparse.Namespace) -> int:
    """``judge calibration-file``: write the calibration rows of a graded dataset."""
    from pytest_novelty.scoring.judges.graded_sets import NOTES, graded_rows, write_rows

    task, rows = graded_rows(args.source)
    write_rows(Path(args.out), rows)
    kind = args.source.partition(":")[0]
    note = f"; note: {NOTES[kind]}" if kind in NOTES else ""
    print(f"wrote {len(rows)} graded items (task {task}) to {args.out}{note}")
    return 0
