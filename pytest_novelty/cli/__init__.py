"""The ``pytest-novelty`` command line: the same layers as the plugin, without pytest.

Subcommands: ``run`` (gate a checkpoint on suites and print the table), ``demo build`` (build the
demo assets ahead of time), and the scoring tools ``index build``, ``originality`` and ``judge`` (with
``judge calibrate`` and ``judge calibration-file``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, USAGE_EXIT_STATUS, HarnessError, NoveltyError
from pytest_novelty.infra.storage import default_cache_dir
from pytest_novelty.pipeline.options import add_arguments


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
    """Gate a checkpoint on every case pytest would run (each sweep value and each denial round),
    decided by the same case decision, on the same results session, with the same exit statuses."""
    from pytest_novelty.gate.case import decide_in, with_repeats
    from pytest_novelty.gate.snapshot import SnapshotFile, snapshot_file
    from pytest_novelty.infra.cache import clear_cache, repaired
    from pytest_novelty.infra.progress import ProgressSink
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.export import repeats_json, suite_data
    from pytest_novelty.pipeline.preflight import check_models, check_options, preflight
    from pytest_novelty.pipeline.session import ResultsSession
    from pytest_novelty.report.terminal import gate_summary

    if args.novelty_log:
        from pytest_novelty.integrations import check_trackers

        check_trackers(args.novelty_log)  # a bad spec, URI or folder: exit 4; a tracker down: exit 8
    suites = _load_suites(args)
    cache_dir = Path(args.novelty_cache).expanduser().resolve() if args.novelty_cache else default_cache_dir()
    checkpoints = []
    if args.novelty_model_series:  # the newest checkpoint is the candidate; the others make its series
        from pytest_novelty.pipeline.series import find_checkpoints

        checkpoints = find_checkpoints(args.novelty_model_series)
    model = check_options(args, model=checkpoints[-1].path if checkpoints else str(args.novelty_model), front="cli")
    if args.novelty_cache_clear:
        clear_cache(cache_dir)
    check_models(args, [model, *(c.path for c in checkpoints[:-1])], args.novelty_baseline_model, cache_dir, suites)
    session = ResultsSession(
        lambda m: RunConfig.from_options(args, model=m, cache_dir=cache_dir, progress=ProgressSink()),
        model=model, baseline_model=args.novelty_baseline_model, series=checkpoints,
    )  # fmt: skip
    runs = [run for suite in suites for run in suite.runs()]
    for runner in filter(None, [session.candidate, session.baseline_runner()]):
        preflight(runner, runs)  # every service and input checked once, before any generation
    snapshots = bool(args.novelty_snapshots or args.novelty_snapshot_update)
    from pytest_novelty.gate.case import compared_cases

    comparisons = max(1, compared_cases([run for run in runs for _ in run.thresholds],
                                        baseline=bool(args.novelty_baseline_model), snapshots=snapshots,
                                        series=bool(checkpoints)))
    root = Path(args.novelty_snapshot_dir).expanduser().resolve() if args.novelty_snapshot_dir else None
    rows: list[dict[str, Any]] = []
    data: dict[str, Any] = {}
    exported: dict[str, Any] = {}
    harness = False
    for run in runs:
        tails: dict[str, list[str]] = {}
        try:
            result = session.result(run)
            base = session.baseline(run)
            data[run.name] = suite_data(result, None if base is None else base.result,
                                        alpha=run.gate.alpha / comparisons)
            exported[run.name] = {"prompts": [p.id for p in result.prompts], "answers": result.answers,
                                  "metrics": result.metrics}
            for threshold in run.thresholds:
                store = None
                if snapshots:
                    path = snapshot_file(run.path, f"{run.name}-{threshold.label}", root)
                    store = SnapshotFile(path, update=args.novelty_snapshot_update, rerecord=args.novelty_rerecord)
                outcome = decide_in(session, run, threshold, snapshot=store, mode=args.novelty_threshold_mode,
                                    comparisons=comparisons)
                outcome = with_repeats(session, run, threshold, outcome, args.novelty_repeat, snapshot=store,
                                       mode=args.novelty_threshold_mode, comparisons=comparisons)
                if args.novelty_repeat > 1 and "repeats" not in data[run.name]:
                    data[run.name]["repeats"] = repeats_json(session, run, args.novelty_repeat)
                if outcome.tail_ids is not None:
                    tails[outcome.metric] = list(outcome.tail_ids)
                rows.append({**outcome.row(), "outcome": "passed" if outcome.passed else "failed"})
            if checkpoints:
                from pytest_novelty.gate.series import suite_series

                earlier = session.earlier(run)
                series = suite_series(list(zip(checkpoints, [*earlier, result], strict=True)), tails)
                data[run.name]["series"] = exported[run.name]["series"] = series
        except HarnessError as exc:  # as under pytest: the suite's cases are errors, the others still run
            harness = True
            print(f"pytest-novelty: harness error in suite {run.name}: {exc}", file=sys.stderr)
            rows.extend(_error_row(run, t, str(exc)) for t in run.thresholds if not _has_row(rows, run, t))
    print("\n".join(gate_summary(rows, data, repaired())))
    status = HARNESS_EXIT_STATUS if harness else (1 if any(not row["passed"] for row in rows) else 0)
    if args.novelty_report:
        from pytest_novelty.report import write_report

        files = write_report(Path(args.novelty_report), rows, data, {"model": model, "exit status": status})
        print(f"novelty report: {files.json.parent}")
    if args.novelty_log:  # the trackers read the report, as under pytest
        from pytest_novelty.integrations import log_session

        logged = log_session(args.novelty_log, rows, data, {"model": model, "exit status": status},
                             report_dir=args.novelty_report, write=print)
        if logged.status and status in (0, 1):
            status = logged.status
            if args.novelty_report:  # the report records the status the run exits with: the tracker's
                write_report(Path(args.novelty_report), rows, data, {"model": model, "exit status": status})
    if args.novelty_output:
        from pytest_novelty.infra.storage import atomic_write_json

        atomic_write_json(Path(args.novelty_output), exported)
    return status


def _load_suites(args: argparse.Namespace) -> list[Any]:
    from pytest_novelty.infra.resources import bundled_path
    from pytest_novelty.pipeline.options import by_name
    from pytest_novelty.suites.schema import load_suites

    folder = args.novelty_suites or (Path("suites") if Path("suites").is_dir() else bundled_path("suites"))
    suites = load_suites(Path(folder).expanduser(), field=by_name("suites").cli_flag if args.novelty_suites else None)
    if args.novelty_suite:
        wanted = set(args.novelty_suite)
        unknown = sorted(wanted - {s.name for s in suites})
        if unknown:
            from pytest_novelty.infra.errors import ConfigError, did_you_mean

            names = [s.name for s in suites]
            raise ConfigError(f"no suite named {unknown[0]!r}{did_you_mean(unknown[0], names)}; "
                              f"the suites are {', '.join(names)}", field="--suite")
        suites = [s for s in suites if s.name in wanted]
    return suites


def _has_row(rows: list[dict[str, Any]], run: Any, threshold: Any) -> bool:
    return any(r["suite"] == run.name and r["metric"] == threshold.metric and r["op"] == threshold.op for r in rows)


def _error_row(run: Any, threshold: Any, message: str) -> dict[str, Any]:
    """A case that reached no verdict: the harness failed before it could be decided."""
    return {"suite": run.name, "metric": threshold.metric, "op": threshold.op, "threshold": threshold.value,
            "value": None, "passed": False, "outcome": "error", "message": f"harness error: {message}"}


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
    parser = _Parser(
        prog="pytest-novelty",
        description="Gate a language-model checkpoint on the novelty of what it writes, without pytest "
        "(the same layers as pytest --model), and the scoring tools behind it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="gate a checkpoint on suites and print the table (no pytest)")
    add_arguments(run)
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


class _Parser(argparse.ArgumentParser):
    """argparse that exits with the bad-input status pytest uses (4), not argparse's 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(USAGE_EXIT_STATUS, f"{self.prog}: error: {message}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script: 0 passed, 1 the gate failed, 4 bad input, 8 harness error."""
    from pytest_novelty.cli.judge import nested_parser

    argv = list(sys.argv[1:] if argv is None else argv)
    nested = nested_parser(argv)  # `judge calibrate ...`, `judge calibration-file ...`
    args = nested.parse_args(argv[1:]) if nested else build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except NoveltyError as exc:
        error = _in_our_words(exc)
        print(f"pytest-novelty: error: {error}", file=sys.stderr)
        status = HARNESS_EXIT_STATUS if isinstance(error, HarnessError) else USAGE_EXIT_STATUS
        _no_verdict(args, f"{'harness error' if status == HARNESS_EXIT_STATUS else 'bad input'}: {error}", status)
        return status
    except KeyboardInterrupt:
        print("pytest-novelty: interrupted; finished work is cached and a rerun resumes", file=sys.stderr)
        _no_verdict(args, "interrupted", 130)
        return 130


def _in_our_words(exc: NoveltyError) -> NoveltyError:
    """``exc`` naming the command line's own options: a field the layers spell as pytest does
    (``--novelty-log``) is respelled from the option table (``--log``)."""
    from pytest_novelty.infra.errors import ConfigError
    from pytest_novelty.pipeline.options import CLI, spelled

    if not isinstance(exc, ConfigError) or exc.field is None or spelled(exc.field, CLI) == exc.field:
        return exc
    return ConfigError(exc.detail, path=exc.path, field=spelled(exc.field, CLI))


def _no_verdict(args: argparse.Namespace, reason: str, status: int) -> None:
    """``run --report DIR`` that stops before its verdict: the folder says so, why, and the exit
    status (never the previous run's report)."""
    folder = getattr(args, "novelty_report", None)
    if folder and getattr(args, "func", None) is _cmd_run:
        from pytest_novelty.report.json_report import record_no_verdict

        record_no_verdict(Path(folder).expanduser(), reason, status)


if __name__ == "__main__":
    sys.exit(main())
