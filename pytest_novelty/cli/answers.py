"""``pytest-novelty answers export``: a model's raw answers to the suites, as pytest-novelty answers.

``pytest-novelty answers export --model MODEL --out FILE [run options]`` writes one JSON line per
prompt of every suite run (``--novelty-repeat N``: each repeat too), in the format
``--model answers:FILE`` reads (:mod:`pytest_novelty.generation.answer_files`). Answers in the
cache are read; the others are generated, exactly as ``pytest-novelty run`` would generate them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_commands", "cmd_answers_export"]


def cmd_answers_export(args: argparse.Namespace) -> int:
    """Handler of ``answers export``."""
    from pytest_novelty.cli.suites import load_suites_of
    from pytest_novelty.infra.progress import ProgressSink
    from pytest_novelty.infra.storage import cache_folder
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.preflight import check_models, check_options
    from pytest_novelty.pipeline.recorded import export_answers
    from pytest_novelty.pipeline.runner import Runner

    suites = load_suites_of(args)
    cache_dir = cache_folder(args.novelty_cache)
    model = check_options(args, model=str(args.novelty_model), front="cli")
    check_models(args, [model], None, cache_dir, suites)
    runner = Runner(RunConfig.from_options(args, model=model, cache_dir=cache_dir, progress=ProgressSink()))
    runs = [run.repeated(i) for suite in suites for run in suite.runs() for i in range(args.novelty_repeat)]
    written, skipped = export_answers(runner, runs, Path(args.out))
    for run in skipped:
        print(f"[novelty] {run.run_key}: left out (its inputs are built during the run)", file=sys.stderr)
    print(f"[novelty] answers of {model} to {written} prompts written to {args.out}", file=sys.stderr)
    return 0


def add_commands(sub: Any) -> None:
    """Register ``answers export`` on the top-level subparsers."""
    from pytest_novelty.pipeline.options import add_arguments
    from pytest_novelty.pipeline.values import Takes

    answers = sub.add_parser("answers", help="answers as files: export a model's, to gate them as answers:FILE")
    commands = answers.add_subparsers(dest="answers_command", required=True)
    export = commands.add_parser("export", help="write a model's raw answers to the suites as pytest-novelty answers")
    export.add_argument("--out", required=True, metavar="FILE", **Takes("out-file").argument(),
                        help="the JSON Lines file to write")
    add_arguments(export, exclusive=("model",))
    export.set_defaults(func=cmd_answers_export)
