"""The ``pytest-novelty`` command line: the same layers as the plugin, without pytest.

Subcommands: ``run`` (gate a checkpoint on suites and print the table), ``demo build`` (build the
demo assets ahead of time), and the scoring tools ``index build``, ``originality`` and ``judge`` (with
``judge calibrate`` and ``judge calibration-file``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_novelty.generation import GENERATORS
from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, HarnessError, NoveltyError


def _cmd_demo_build(args: argparse.Namespace) -> int:
    from pytest_novelty.infra.storage import default_cache_dir
    from pytest_novelty.pipeline import demo

    cache = Path(args.cache) if args.cache else default_cache_dir()
    if args.force:
        import shutil

        shutil.rmtree(demo.demo_dir(cache), ignore_errors=True)
    folder = demo.ensure_demo(cache)  # prepares it, or repairs what is damaged
    check = demo.check_demo(cache)  # success is reported for what was checked, file by file
    if not check.ok:
        raise HarnessError(f"the demo in {folder} is damaged ({check.summary}); remove the folder and run "
                           "`pytest-novelty demo build` again")
    print(f"[novelty] demo checked: its {check.files} files match the checksums recorded when it was prepared",
          file=sys.stderr)
    print(folder)
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """Gate a checkpoint on every case pytest would run: each sweep value and each denial round."""
    from pytest_novelty.infra.progress import ProgressSink
    from pytest_novelty.infra.resources import bundled_path
    from pytest_novelty.infra.storage import default_cache_dir
    from pytest_novelty.pipeline.runner import RunConfig, Runner, SessionModels
    from pytest_novelty.report import render_table
    from pytest_novelty.suites.schema import load_suites

    suites = load_suites(args.suites or (Path("suites") if Path("suites").is_dir() else bundled_path("suites")))
    if args.suite:
        wanted = set(args.suite)
        suites = [s for s in suites if s.name in wanted]
    cache_dir = Path(args.cache) if args.cache else default_cache_dir()
    checkpoints = []
    if args.model_series:  # the newest checkpoint is the candidate; the others make its series
        from pytest_novelty.pipeline.series import find_checkpoints

        checkpoints = find_checkpoints(args.model_series)
    models: list[SessionModels] = []

    def runner_for(model: str) -> Runner:
        config = RunConfig.from_options(args, model=model, cache_dir=cache_dir, progress=ProgressSink())
        models.append(models[0] if models else SessionModels(config))  # the scoring models load once
        return Runner(config, models[0])

    runner = runner_for(checkpoints[-1].path if checkpoints else args.model)
    earlier_runners = [runner_for(c.path) for c in checkpoints[:-1]]
    from pytest_novelty.pipeline.preflight import preflight

    preflight(runner, suites)  # every service and input checked once, before any generation
    rows: list[dict[str, Any]] = []
    notes: dict[str, str] = {}
    results: dict[str, Any] = {}
    rounds: dict[tuple[str, str], Any] = {}
    for run in (run for suite in suites for run in suite.runs()):
        result = _suite_result(runner, run, rounds)
        if run.scoring.calibration is not None:
            result = replace(result, judge_agreement=runner.judge_agreement(run))
        earlier = [_suite_result(r, run, rounds) for r in earlier_runners]
        results[run.name] = {"prompts": [p.id for p in result.prompts], "answers": result.answers,
                             "metrics": result.metrics}
        if checkpoints:
            from pytest_novelty.gate.series import suite_series

            results[run.name]["series"] = suite_series([*zip(checkpoints, [*earlier, result], strict=True)])
        rows.extend(_case_rows(run, result, earlier))
        notes[run.name] = ", ".join(f"{k} {v:.4f}" for k, v in result.metrics.items() if k.startswith("coverage@"))
        notes[run.name] += f", unscored {result.metrics['unscored']:.4f}; originality in {result.scores.units}"
    print("\n".join(render_table(rows, None, notes)))
    if checkpoints:
        from pytest_novelty.report.series import series_tables

        print("\n".join(series_tables(results)))
    if args.output:
        from pytest_novelty.infra.storage import atomic_write_json

        atomic_write_json(Path(args.output), results)
    return 1 if any(not row["passed"] for row in rows) else 0


def _suite_result(runner: Any, run: Any, rounds: dict[tuple[str, str], Any]) -> Any:
    """One checkpoint's result on one run of a suite; a denial suite's rounds run once, together."""
    if run.denial_round is None:
        return runner.run(run)
    key = (runner.config.model, run.name.rsplit("[round=", 1)[0])
    if key not in rounds:
        from pytest_novelty.pipeline.denial import open_extractor_for, run_denial

        rounds[key] = run_denial(runner, run, open_extractor_for(runner.config, run))
    return rounds[key][run.denial_round - 1]


def _case_rows(run: Any, result: Any, earlier: list[Any]) -> list[dict[str, Any]]:
    """The table's rows for one run of a suite, one per threshold, decided as under pytest."""
    from pytest_novelty.gate import check_threshold
    from pytest_novelty.gate.agreement import agreement_failure
    from pytest_novelty.gate.regression import choose_tail, gated_metrics

    rows = []
    for threshold in run.thresholds:
        metrics, tail = result.metrics, None
        if threshold.base == "q_at_tail":  # the suite's frozen tail when it names one, as under pytest
            own = result.measured.tail_ids.get(threshold.metric) or []
            tail = choose_tail(threshold.metric, tail_file=run.gate.tail, candidate=own)
            ids = [p.id for p in result.prompts]
            metrics, used = gated_metrics(threshold.metric, metrics, ids, result.per_prompt["quality"], tail)
        verdict = check_threshold(run.name, threshold, metrics)
        row = {**verdict.as_dict(), **({"tail": tail.describe(len(used))} if tail else {})}
        passed = verdict.passed
        distrusted = agreement_failure(run, threshold, result.judge_agreement)
        if distrusted:  # [gate] min_judge_agreement not met: the quality-based case does not count
            row["message"], passed = distrusted, False
        if earlier and run.gate.against == "series-best":
            from pytest_novelty.gate.series import compare_with_best

            found = compare_with_best(earlier, result, threshold)
            if found is not None:
                row.update(found[1].as_dict(), against=found[0].model)
                passed = passed and found[1].passed
        row["passed"] = passed
        rows.append(row)
    return rows


def _cmd_cache(args: argparse.Namespace) -> int:
    from pytest_novelty.infra.cache import cache_usage, clear_cache
    from pytest_novelty.infra.storage import default_cache_dir

    cache = Path(args.cache) if args.cache else default_cache_dir()
    if args.action == "clear":
        removed = clear_cache(cache, keep_demo=not args.all)
        print(f"removed {removed / 1e6:.1f} MB from {cache}")
        return 0
    usage = cache_usage(cache)
    print(f"{cache}: {sum(usage.values()) / 1e6:.1f} MB")
    for name, size in sorted(usage.items()):
        print(f"  {name:24s} {size / 1e6:10.1f} MB")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="pytest-novelty",
        description="Gate a language-model checkpoint on the novelty of what it writes, without pytest "
        "(the same layers as pytest --model), and the scoring tools behind it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="gate a checkpoint on suites and print the table (no pytest)")
    which = run.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="local Hugging Face folder, hub id, or demo / demo-early")
    which.add_argument(
        "--model-series",
        metavar="RUN_DIR",
        help="gate the newest checkpoint-<step> of RUN_DIR (or of a quoted glob) and print the series",
    )
    run.add_argument("--suites", help="folder of suite files (default ./suites or the bundled ones)")
    run.add_argument("--suite", action="append", help="run only this suite (repeatable)")
    run.add_argument("--device", dest="novelty_device", default="auto")
    run.add_argument(
        "--generator", dest="novelty_generator", default="hf", choices=GENERATORS, help="hf (default), vllm or auto"
    )
    run.add_argument("--cache", help="cache folder (default ~/.cache/pytest-novelty)")
    run.add_argument("--originality", dest="novelty_originality", help="originality backend spec for every suite")
    run.add_argument("--judge", dest="novelty_judge", help="judge spec for every suite")
    run.add_argument("--judge-base-url", dest="novelty_judge_base_url")
    run.add_argument("--trust-remote-code", dest="novelty_trust_remote_code", action="store_true")
    run.add_argument("--model-base-url", dest="novelty_model_base_url", help="endpoint of a served --model openai:NAME")
    run.add_argument(
        "--model-revision", dest="novelty_model_revision", help="revision of the served model's weights (cache key)"
    )
    run.add_argument("--base-model", dest="novelty_base_model", help="base checkpoint of a PEFT adapter --model")
    run.add_argument(
        "--gpus", dest="novelty_gpus_per_worker", type=int, default=1, help="GPUs to spread one model over (default 1)"
    )
    run.add_argument("--output", help="write each suite's prompts, answers and metrics to this JSON file")
    run.set_defaults(func=_cmd_run)

    cache = sub.add_parser("cache", help="size of the cache, or clear it")
    cache.add_argument("action", choices=("info", "clear"))
    cache.add_argument("--cache", help="cache folder (default ~/.cache/pytest-novelty)")
    cache.add_argument("--all", action="store_true", help="with clear: also remove the built demo assets")
    cache.set_defaults(func=_cmd_cache)

    demo = sub.add_parser("demo", help="the embedded demo").add_subparsers(dest="demo_command", required=True)
    build = demo.add_parser("build", help="build the demo checkpoint, corpus and index into the cache")
    build.add_argument("--cache", help="cache folder (default ~/.cache/pytest-novelty)")
    build.add_argument("--force", action="store_true", help="rebuild even when present")
    build.set_defaults(func=_cmd_demo_build)

    from pytest_novelty.cli.judge import add_commands as add_judge_commands
    from pytest_novelty.cli.originality import add_commands as add_originality_commands

    add_originality_commands(sub)
    add_judge_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script."""
    from pytest_novelty.cli.judge import nested_parser

    argv = list(sys.argv[1:] if argv is None else argv)
    nested = nested_parser(argv)  # `judge calibrate ...`, `judge calibration-file ...`
    args = nested.parse_args(argv[1:]) if nested else build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except NoveltyError as exc:
        print(f"pytest-novelty: error: {exc}", file=sys.stderr)
        return HARNESS_EXIT_STATUS if isinstance(exc, HarnessError) else 2
    except KeyboardInterrupt:
        print("pytest-novelty: interrupted; finished work is cached and a rerun resumes", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
