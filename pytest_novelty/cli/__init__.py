"""The ``pytest-novelty`` command line: the same layers as the plugin, without pytest.

Subcommands: ``run`` (gate a checkpoint on suites and print the table), ``cache`` (its size,
clearing, merging and packing: :mod:`pytest_novelty.cli.cache`), ``demo build`` (build the demo
assets ahead of time), the scoring tools ``index build``, ``originality`` and ``judge`` (with
``judge calibrate`` and ``judge calibration-file``), ``answers export`` (a model's raw answers as a
file) and ``tail build`` / ``tail agreement`` (q@Tail's tail from a pool of models, and its check).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.cli.parser import Parser
from pytest_novelty.infra.errors import HARNESS_EXIT_STATUS, USAGE_EXIT_STATUS, HarnessError, NoveltyError
from pytest_novelty.infra.storage import cache_folder, default_cache_dir
from pytest_novelty.pipeline.options import add_arguments

if TYPE_CHECKING:
    from pytest_novelty.gate.cases import CaseLoop
    from pytest_novelty.gate.record import CaseRecord
    from pytest_novelty.pipeline.session import ResultsSession
    from pytest_novelty.pipeline.suite_data import SuiteData
    from pytest_novelty.suites.schema import Suite


def _cmd_demo_build(args: argparse.Namespace) -> int:
    from pytest_novelty.pipeline import demo
    from pytest_novelty.pipeline.preflight import check_cache_folder

    cache = Path(args.cache) if args.cache else default_cache_dir()
    check_cache_folder(cache, option="--cache", given=bool(args.cache))  # one line, before anything is built
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


def _cmd_demo_path(args: argparse.Namespace) -> int:
    """Print where the demo's checkpoint (or its weaker one, its index, its corpus) lies in the cache,
    preparing the demo first when it is not there: the folder another tool can be pointed at."""
    from pytest_novelty.pipeline import demo
    from pytest_novelty.pipeline.preflight import check_cache_folder

    cache = Path(args.cache) if args.cache else default_cache_dir()
    check_cache_folder(cache, option="--cache", given=bool(args.cache))
    folder = demo.ensure_demo(cache)
    print(folder / {"corpus": "corpus.jsonl"}.get(args.what, args.what))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """Gate a checkpoint on every case pytest would run (each sweep value and each denial round),
    through the same case loop, on the same results session, with the same exit statuses."""
    from pytest_novelty.cli.suites import load_suites_of
    from pytest_novelty.gate.case import compared_cases
    from pytest_novelty.gate.cases import CaseLoop, CaseSettings
    from pytest_novelty.infra.cache import clear_cache, repaired
    from pytest_novelty.infra.progress import ProgressSink
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.preflight import check_folders, check_models, check_options, preflight
    from pytest_novelty.pipeline.session import ResultsSession
    from pytest_novelty.report.terminal import gate_summary

    if args.novelty_log:
        from pytest_novelty.integrations import check_trackers

        check_trackers(args.novelty_log)  # a bad spec, URI or folder: exit 4; a tracker down: exit 8
    suites = load_suites_of(args)
    cache_dir = cache_folder(args.novelty_cache)
    checkpoints = []
    if args.novelty_model_series:  # the newest checkpoint is the candidate; the others make its series
        from pytest_novelty.pipeline.series import check_series, find_checkpoints

        checkpoints = find_checkpoints(args.novelty_model_series)
        check_series(checkpoints, trust_remote_code=bool(args.novelty_trust_remote_code),
                     base_model=args.novelty_base_model)
    model = check_options(args, model=checkpoints[-1].path if checkpoints else str(args.novelty_model), front="cli")
    check_folders(args, cache_dir, front="cli")  # the cache, --report and --output can be written, before any model
    if args.novelty_cache_clear:
        clear_cache(cache_dir)
    check_models(args, [model, *(c.path for c in checkpoints[:-1])], args.novelty_baseline_model, cache_dir, suites)
    session = ResultsSession(
        lambda m: RunConfig.from_options(args, model=m, cache_dir=cache_dir, progress=ProgressSink(), front="cli"),
        model=model, baseline_model=args.novelty_baseline_model, series=checkpoints,
    )  # fmt: skip
    runs = [run for suite in suites for run in suite.runs()]
    for runner in filter(None, [session.candidate, session.baseline_runner()]):
        preflight(runner, runs)  # every service and input checked once, before any generation
    if args.novelty_shard:  # --shard K/N: this run does its part of the gate and decides no case (issue 31)
        from pytest_novelty.cli.shard import run_shard

        return run_shard(args, session, runs, cache_dir)
    snapshots = bool(args.novelty_snapshots or args.novelty_snapshot_update)
    cases = [run for run in runs for _ in run.thresholds]
    comparisons = compared_cases(cases, baseline=bool(args.novelty_baseline_model), snapshots=snapshots,
                                 series=bool(checkpoints))  # fmt: skip
    settings = CaseSettings.from_options(args, max(1, comparisons))
    loop = CaseLoop(session, settings, series=checkpoints)
    records, errors = loop.run(runs, _snapshot_stores(args) if snapshots else lambda run, threshold: None)
    for line in errors:  # as under pytest: the suite's cases are errors, the others still ran
        print(f"pytest-novelty: {line}", file=sys.stderr)
    print("\n".join([*gate_summary(records, loop.suite_data, repaired()), *loop.series_gaps.values()]))
    status = HARNESS_EXIT_STATUS if errors else (0 if all(r.passed for r in records) else 1)
    return _write_results(args, model, session, runs, loop, records, status)


def _write_results(
    args: argparse.Namespace, model: str, session: ResultsSession, runs: list[Suite], loop: CaseLoop,
    records: list[CaseRecord], status: int,
) -> int:
    """What a decided gate leaves behind: ``--report``, the trackers of ``--log`` and ``--output``;
    the exit status, which a report or output that cannot be written (or a tracker) may change."""
    from pytest_novelty.report import write_report

    versions = {"model": model, "exit status": status}
    report_dir = args.novelty_report
    if report_dir:
        try:
            files = write_report(Path(report_dir), records, loop.suite_data, versions)
            print(f"novelty report: {files.json.parent}")
        except HarnessError as exc:  # a full disk after the gate: one line, and the harness status
            print(f"pytest-novelty: error: {exc}", file=sys.stderr)
            status, report_dir = HARNESS_EXIT_STATUS, None
    if args.novelty_log:  # the trackers read the report, as under pytest
        from pytest_novelty.integrations import log_session

        logged = log_session(args.novelty_log, records, loop.suite_data, versions, report_dir=report_dir,
                             write=print)  # fmt: skip
        if logged.status and status in (0, 1):
            status = logged.status
            if report_dir:  # the report records the status the run exits with: the tracker's
                write_report(Path(report_dir), records, loop.suite_data, {**versions, "exit status": status})
    if args.novelty_output:
        status = _write_output(Path(args.novelty_output), _exported(session, runs, loop.suite_data), status)
    return status


def _write_output(path: Path, exported: dict[str, Any], status: int) -> int:
    """``--output FILE``, written atomically; a write the file system refuses is one line and the
    harness status."""
    from pytest_novelty.infra.storage import atomic_write_json, folder_error

    try:
        atomic_write_json(path, exported)
    except OSError as exc:
        print(f"pytest-novelty: error: {folder_error(path.parent, 'folder of the output file', exc)}", file=sys.stderr)
        return HARNESS_EXIT_STATUS
    return status


def _snapshot_stores(args: argparse.Namespace) -> Any:
    """Each case's snapshot file, read and written as syrupy would under pytest."""
    from pytest_novelty.gate.snapshot import SnapshotFile, snapshot_file

    root = Path(args.novelty_snapshot_dir).expanduser().resolve() if args.novelty_snapshot_dir else None

    def store(run: Any, threshold: Any) -> SnapshotFile:
        path = snapshot_file(run.path, f"{run.name}-{threshold.label}", root)
        return SnapshotFile(path, update=args.novelty_snapshot_update, rerecord=args.novelty_rerecord)

    return store


def _exported(session: Any, runs: Sequence[Any], data: Mapping[str, SuiteData]) -> dict[str, Any]:
    """``--output``: each suite's prompt ids, answers and metrics (and series), for other tools."""
    out = {}
    for run in runs:
        if run.name in data:  # a suite whose harness failed has nothing to export
            result, series = session.result(run), data[run.name].series
            out[run.name] = {"prompts": [p.id for p in result.prompts], "answers": result.answers,
                             "metrics": result.metrics, **({"series": list(series)} if series else {})}  # fmt: skip
    return out


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = Parser(
        prog="pytest-novelty",
        description="Gate a language-model checkpoint on the novelty of what it writes, without pytest "
        "(the same layers as pytest --model), and the scoring tools behind it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="gate a checkpoint on suites and print the table (no pytest)")
    add_arguments(run)
    run.set_defaults(func=_cmd_run)

    from pytest_novelty.cli.cache import CACHE
    from pytest_novelty.cli.cache import add_commands as add_cache_commands
    from pytest_novelty.pipeline.values import Takes

    add_cache_commands(sub)

    demo = sub.add_parser("demo", help="the embedded demo").add_subparsers(dest="demo_command", required=True)
    build = demo.add_parser("build", help="build the demo checkpoint, corpus and index into the cache")
    build.add_argument("--cache", **CACHE)
    build.add_argument("--force", action="store_true", help="rebuild even when present")
    build.set_defaults(func=_cmd_demo_build)
    where = demo.add_parser("path", help="print where the demo's checkpoint, its weaker one, its index or corpus lies")
    where.add_argument("what", nargs="?", default="demo", metavar="WHAT",
                       **Takes("choice", choices=("demo", "demo-early", "index", "corpus")).argument(),
                       help="demo (default: the demo checkpoint's folder), demo-early, index or corpus")
    where.add_argument("--cache", **CACHE)
    where.set_defaults(func=_cmd_demo_path)

    from pytest_novelty.cli.answers import add_commands as add_answers_commands
    from pytest_novelty.cli.judge import add_commands as add_judge_commands
    from pytest_novelty.cli.originality import add_commands as add_originality_commands
    from pytest_novelty.cli.tail import add_commands as add_tail_commands

    add_originality_commands(sub)
    add_judge_commands(sub)
    add_answers_commands(sub)
    add_tail_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script: 0 passed, 1 the gate failed, 4 bad input, 8 harness error."""
    from pytest_novelty.cli.judge import nested_parser

    argv = list(sys.argv[1:] if argv is None else argv)
    nested = nested_parser(argv)  # `judge calibrate ...`, `judge calibration-file ...`
    args: argparse.Namespace | None = None  # a value refused as it is read (pipeline/values.py) leaves none
    try:
        try:  # argparse's own bad input is one line (cli/parser.py) and its exit; --help exits 0
            args = nested.parse_args(argv[1:]) if nested else build_parser().parse_args(argv)
        except SystemExit as exc:
            return int(exc.code or 0)
        from pytest_novelty.pipeline.options import CLI, check_values

        check_values(args, CLI)  # the run options' values, checked as pytest checks them
        return int(args.func(args) or 0)
    except OSError as exc:  # a write to a destination the user named (a disk that filled up): one line
        from pytest_novelty.infra.storage import folder_error
        from pytest_novelty.pipeline.values import written_by

        named = written_by(args, exc)
        if named is None:
            raise
        return _failed(args, folder_error(named[0], "destination", exc, named_by=named[1]))
    except NoveltyError as exc:
        return _failed(args, exc)
    except KeyboardInterrupt:
        print("pytest-novelty: interrupted; finished work is cached and a rerun resumes", file=sys.stderr)
        _no_verdict(args, "interrupted", 130)
        return 130


def _failed(args: argparse.Namespace | None, exc: NoveltyError) -> int:
    """Say ``exc`` in one line (the command line's own option names), leave ``run --report`` no
    verdict, and return the exit status: 8 for a harness error, 4 for bad input."""
    error = _in_our_words(exc)
    print(f"pytest-novelty: error: {error}", file=sys.stderr)
    status = HARNESS_EXIT_STATUS if isinstance(error, HarnessError) else USAGE_EXIT_STATUS
    _no_verdict(args, f"{'harness error' if status == HARNESS_EXIT_STATUS else 'bad input'}: {error}", status)
    return status


def _in_our_words(exc: NoveltyError) -> NoveltyError:
    """``exc`` naming the command line's own options: a field the layers spell as pytest does
    (``--novelty-log``) is respelled from the option table (``--log``)."""
    from pytest_novelty.infra.errors import ConfigError
    from pytest_novelty.pipeline.options import CLI, spelled

    if not isinstance(exc, ConfigError) or exc.field is None or spelled(exc.field, CLI) == exc.field:
        return exc
    return ConfigError(exc.detail, path=exc.path, field=spelled(exc.field, CLI))


def _no_verdict(args: argparse.Namespace | None, reason: str, status: int) -> None:
    """``run --report DIR`` that stops before its verdict: the folder says so, why, and the exit
    status (never the previous run's report)."""
    folder = getattr(args, "novelty_report", None)
    if folder and getattr(args, "func", None) is _cmd_run:
        from pytest_novelty.report.json_report import record_no_verdict

        record_no_verdict(Path(folder).expanduser(), reason, status)


if __name__ == "__main__":
    sys.exit(main())
