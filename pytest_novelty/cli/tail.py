"""``pytest-novelty tail build`` and ``tail agreement``: a suite's tail as q@Tail's paper builds it, and
whether its bins agree with people.

``tail build SUITE --pool SOURCE [--pool SOURCE ...] --alpha A [--alpha B ...] --out FILE`` runs every
pool member on the suite (through the same results session as a gate: cached answers are reused),
ranks the prompts by s_j = (input novelty + the pool's mean output novelty) / 2 at n = 4 on one
index (:mod:`pytest_novelty.metrics.tail_pool`) and writes the tail file the suite's ``[gate] tail``
freezes: the tail and the peak at every α, with their provenance (:mod:`pytest_novelty.suites.tail_file`).
The scores use no quality, so the pool is judged by the offline ``rules`` judge unless ``--judge``
names another: building a tail costs no judge calls.

``tail agreement SUITE --model SOURCE [--model SOURCE ...] --reference FILE [--bins B]`` scores
every model on the suite, ranks the prompts by the same shared score (the models are the pool, or a
built tail file's scores with ``--scores``), splits them into B bins from the peak to the tail and
prints Kendall's τ-b of the models' mean quality with the reference per bin and for q@Tail(α), each
with a bootstrap interval over prompts (:mod:`pytest_novelty.metrics.tail_agreement`); ``--plot``
draws τ against bin. A model is given as ``SOURCE`` or ``NAME=SOURCE``; the reference file is
``{"scores": {NAME: number}}`` (higher better, e.g. an arena rating) or ``{"ranks": {NAME: rank}}``
(1 the best), naming each model as it is given.

Both check every source before anything is generated; bad input is one line and exit 4, a broken
service one line and exit 8 (the command line's :func:`~pytest_novelty.cli.main`).
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.infra.redact import echo
from pytest_novelty.pipeline.options import by_name
from pytest_novelty.pipeline.values import Takes

OUT_FILE = Takes("out-file")

__all__ = ["add_commands", "run_agreement_command", "run_build_command"]

#: The run options both commands take, declared once in :data:`pytest_novelty.pipeline.options.OPTIONS`.
RUN_OPTIONS = ("cache", "suites", "originality", "judge", "judge-base-url", "device", "generator", "seed",
               "model-base-url", "trust-remote-code", "base-model", "gpus-per-worker")  # fmt: skip

_NAMED = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)=(?P<source>.+)$")


FRACTION = Takes("number", 0, 1, whole=False, above=True)
SUITE = Takes("text", why="a suite file or a suite's name in --suites: an unknown one is refused, naming the suites")
MODEL = by_name("model").takes


def _command(
    tail: Any, name: str, run: Callable[[argparse.Namespace], int], *, help: str, description: str
) -> argparse.ArgumentParser:
    """One ``tail`` command: its SUITE argument and its handler; the run options come last
    (:func:`_run_options`), after the command's own."""
    command: argparse.ArgumentParser = tail.add_parser(name, help=help, description=description)
    command.add_argument("suite", metavar="SUITE", **SUITE.argument(),
                         help="a suite file, or the name of a suite in --suites")
    command.set_defaults(func=run)
    return command


def _run_options(parser: argparse.ArgumentParser) -> None:
    for name in RUN_OPTIONS:
        option = by_name(name)
        parser.add_argument(option.cli_flag, **option.settings())


def add_commands(subparsers: Any) -> None:
    """Register ``tail build`` and ``tail agreement`` on an ``argparse`` subparsers object."""
    tail = subparsers.add_parser("tail", help="build a suite's q@Tail tail from a pool of models; check it against "
                                 "a reference ranking").add_subparsers(dest="tail_command", required=True)  # fmt: skip
    build = _command(
        tail, "build", run_build_command,
        help="rank a suite's prompts by a pool of models and write the tail file [gate] tail reads",
        description="Score every prompt of SUITE as q@Tail's paper does, s = (input novelty + the pool's mean "
        "output novelty) / 2 at n = 4 on one index, and write the tail and the peak at every --alpha, with the "
        "pool's identities, the index identity, every score and the date, to --out.",
    )  # fmt: skip
    build.add_argument("--pool", required=True, metavar="SOURCE", **MODEL.argument(append=True),
                       help="a member of the pool, as --model takes it (repeatable; every one counts alike)")
    build.add_argument("--alpha", required=True, **FRACTION.argument(append=True), metavar="A",
                       help="a tail fraction in (0, 1] (repeatable): writes q_at_tail@A and novelty_at_peak@A")
    build.add_argument("--out", required=True, metavar="FILE", **OUT_FILE.argument(),
                       help="the tail file to write (JSON)")
    _run_options(build)
    agree = _command(
        tail, "agreement", run_agreement_command,
        help="Kendall tau of models' mean quality with a reference ranking, per bin from peak to tail",
        description="Score every --model on SUITE, split its prompts into --bins equal bins from the peak to the "
        "tail by their shared novelty score, and report Kendall's tau-b of the models' mean quality with the "
        "reference in each bin and on q@Tail(--alpha), with bootstrap intervals over prompts.",
    )  # fmt: skip
    agree.add_argument("--model", required=True, metavar="[NAME=]SOURCE", dest="models", **MODEL.argument(append=True),
                       help="a model to rank, as --model takes it, named NAME in the reference (repeatable, 3+)")
    agree.add_argument("--reference", required=True, metavar="FILE", **Takes("file").argument(),
                       help='JSON: {"scores": {NAME: number}} (higher better) or {"ranks": {NAME: rank}} (1 best)')
    agree.add_argument("--bins", **Takes("number", 1, 1000).argument(), default=5, metavar="B",
                       help="bins from peak to tail (default 5)")
    agree.add_argument("--alpha", **FRACTION.argument(), default=0.1, metavar="A",
                       help="q@Tail's fraction (default 0.1)")
    agree.add_argument("--scores", metavar="FILE", **Takes("file").argument(),
                       help="rank the prompts by a built tail file's scores instead")
    agree.add_argument("--plot", metavar="PNG", **OUT_FILE.argument(),
                       help="also draw tau against bin into this PNG file")
    agree.add_argument("--json", metavar="FILE", dest="json_out", **OUT_FILE.argument(),
                       help="also write the result as JSON")
    agree.add_argument("--resamples", **Takes("number", 1, 1_000_000).argument(), default=2000, metavar="N",
                       help="bootstrap resamples (2000)")
    agree.add_argument("--confidence", **FRACTION.argument(), default=0.95, metavar="C", help="interval level (0.95)")
    _run_options(agree)


def _suite(name: str, folder: str | None) -> Any:
    """The suite a command names: a suite file, else a suite of ``--suites`` (or ./suites, else the
    bundled), read without its ``[gate] tail`` (:func:`~pytest_novelty.suites.suite_file.load_suite`)."""
    from pytest_novelty.cli.suites import no_such_suite, suites_folder
    from pytest_novelty.suites.suite_file import load_suite, load_suites

    if name.endswith(".toml") or Path(name).is_file():
        suite = load_suite(Path(name).expanduser(), tail=False)
    else:
        where = suites_folder(folder)
        found = {s.name: s for s in load_suites(where, tail=False)}
        if name not in found:
            raise no_such_suite(name, list(found.values()), where, "SUITE")
        suite = found[name]
    if suite.sweep is not None:
        raise ConfigError("a [sweep] suite runs once per value; a tail ranks one set of answers: use a suite "
                          "without [sweep]", path=suite.path, field="sweep")  # fmt: skip
    return suite


def _session(args: argparse.Namespace, sources: list[str], option: str, suite: Any) -> Any:
    """Check the options and every source, then open one results session over them (preflight run)."""
    from pytest_novelty.infra.progress import ProgressSink
    from pytest_novelty.infra.storage import cache_folder
    from pytest_novelty.pipeline.config import RunConfig
    from pytest_novelty.pipeline.preflight import check_options
    from pytest_novelty.pipeline.tail import check_sources, open_session

    cache_dir = cache_folder(args.novelty_cache)
    for source in sources:
        check_options(args, model=source, front="cli")
    check_sources(args, sources, option, cache_dir, suite)
    return open_session(
        lambda m: RunConfig.from_options(args, model=m, cache_dir=cache_dir, progress=ProgressSink()), sources, suite
    )


def run_build_command(args: argparse.Namespace) -> int:
    """``tail build``: run the pool, rank the prompts, write the tail file (module doc)."""
    from pytest_novelty.pipeline.tail import build_tail, shared_index
    from pytest_novelty.report.tail import build_lines
    from pytest_novelty.suites.tail_file import write_tail_file

    out = Path(args.out).expanduser()
    suite = _suite(args.suite, args.novelty_suites)
    if args.novelty_judge is None:
        args.novelty_judge = "rules"  # the score uses no quality: no judge calls for the pool
    sources = list(args.pool)
    session = _session(args, sources, "--pool", suite)
    index = shared_index(session, suite, sources)
    results = session.results_of(sources, suite)  # each from the cache where it has them
    built = build_tail(suite, sources, results, args.alpha, index=index)
    write_tail_file(out, built.entries, built.provenance)
    print("\n".join(build_lines(built.provenance, built.entries, out)))
    return 0


def _models(values: list[str]) -> tuple[list[str], list[str]]:
    """Names and sources of ``--model [NAME=]SOURCE`` values (a bare source is its own name)."""
    names, sources = [], []
    for value in values:
        match = _NAMED.match(value)
        name, source = (match["name"], match["source"]) if match and not Path(value).exists() else (value, value)
        if name in names:
            raise ConfigError(f"the name {name!r} is given twice; every model needs its own", field="--model")
        names.append(name)
        sources.append(source)
    if len(names) < 3:
        raise ConfigError(f"{len(names)} models agree with any ranking by chance; give at least three",
                          field="--model")  # fmt: skip
    return names, sources


def read_reference(path: Path, names: list[str]) -> tuple[dict[str, float], str]:
    """A reference file: ``{"scores": {...}}`` or ``{"ranks": {...}}`` naming exactly the models given."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the reference ({echo(str(exc), limit=120)}); give a JSON file such as "
                          '{"ranks": {"NAME": 1, ...}}', path=path, field="--reference") from None
    kinds = [k for k in ("scores", "ranks") if isinstance(data, dict) and k in data]
    if len(kinds) != 1:
        raise ConfigError('must be a JSON object with one of "scores" (higher better) or "ranks" (1 the best), '
                          "mapping each model's name to a number", path=path)  # fmt: skip
    kind = kinds[0]
    table = data[kind]
    if not isinstance(table, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                              for v in table.values()):  # fmt: skip
        raise ConfigError(f"{kind} must map each model's name to a number", path=path, field=kind)
    for name in names:
        if name not in table:
            raise ConfigError(f"has no entry for the model {name!r}{did_you_mean(name, table)}; name each --model "
                              "as the reference does (--model NAME=SOURCE)", path=path, field=kind)  # fmt: skip
    extra = sorted(set(table) - set(names))
    if extra:
        raise ConfigError(f"names {extra[0]!r}, which no --model is; give it or drop it", path=path, field=kind)
    return {str(k): float(v) for k, v in table.items()}, kind.rstrip("s")


def _provenance(path: Path) -> dict[str, Any]:
    """A built tail file's provenance, read before anything is generated (its errors name ``--scores``)."""
    from pytest_novelty.cli.parser import named_as
    from pytest_novelty.suites.tail_file import read_provenance

    with named_as("--scores", None):
        return dict(read_provenance(path) or {})


def _scores_from(path: Path, provenance: dict[str, Any], ids: list[str]) -> list[float]:
    """Each prompt's score in a built tail file's provenance (NaN: unranked there)."""
    scores = provenance.get("scores")
    if not isinstance(scores, dict):
        raise ConfigError("records no scores (it was not built by `pytest-novelty tail build`)", path=path,
                          field="provenance.scores")  # fmt: skip
    missing = [i for i in ids if i not in scores]
    if missing:
        raise ConfigError(f"has no score for the suite's prompt {missing[0]!r}; rebuild it for this suite",
                          path=path, field="provenance.scores")  # fmt: skip
    return [float("nan") if scores[i].get("score") is None else float(scores[i]["score"]) for i in ids]


def run_agreement_command(args: argparse.Namespace) -> int:
    """``tail agreement``: score every model, rank the prompts, τ per bin and for q@Tail (module doc)."""
    import numpy as np

    from pytest_novelty.metrics.tail import NGRAM_ORDER
    from pytest_novelty.metrics.tail_agreement import reference_scores, tail_agreement
    from pytest_novelty.metrics.tail_pool import rank_pool
    from pytest_novelty.pipeline.tail import shared_index
    from pytest_novelty.report.tail import agreement_lines, agreement_plot, write_agreement_json

    names, sources = _models(list(args.models))
    reference, kind = read_reference(Path(args.reference).expanduser(), names)
    plot = Path(args.plot).expanduser() if args.plot else None
    json_out = Path(args.json_out).expanduser() if args.json_out else None
    provenance = _provenance(Path(args.scores).expanduser()) if args.scores else None
    suite = _suite(args.suite, args.novelty_suites)
    session = _session(args, sources, "--model", suite)
    shared_index(session, suite, sources)
    results = session.results_of(sources, suite)  # each from the cache where it has them
    ids = [p.id for p in results[0].prompts]
    if provenance is not None:
        scores = np.array(_scores_from(Path(args.scores).expanduser(), provenance, ids))
    else:
        own = np.asarray(results[0].scores.prompt_novelty, dtype=float)
        scores = rank_pool(ids, own, [np.asarray(r.originality[NGRAM_ORDER], dtype=float) for r in results]).scores
    quality = np.array([r.per_prompt["quality"] for r in results], dtype=float)
    try:
        found = tail_agreement(ids, scores, quality, reference_scores(reference, names, kind=kind), models=names,
                               bins=args.bins, alpha=args.alpha, confidence=args.confidence,
                               resamples=args.resamples)  # fmt: skip
    except ValueError as exc:
        raise ConfigError(str(exc), field="--bins") from None
    print("\n".join(agreement_lines(found, suite.name)))
    from pytest_novelty.infra.storage import folder_error

    for path, option, write in ((plot, "--plot", lambda p: agreement_plot(found, p, suite.name)),
                                (json_out, "--json", lambda p: write_agreement_json(found, p))):
        if path is None:
            continue
        try:
            write(path)
        except OSError as exc:  # a disk that filled up while the models were scored
            raise folder_error(path, "file", exc, named_by=option) from None
        print(f"{option[2:]}: {path}")
    return 0
