"""Reading a suite file: TOML validated into a :class:`~pytest_novelty.suites.schema.Suite`.

Every error names the file, the key and what is allowed; misspelt keys get a did-you-mean. A
``[sweep]`` expands into one suite per value, each validated like a suite file of its own, and a
denial-prompting suite into one suite per round. The format is documented with an example in the
README ("Suite files").
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, did_you_mean
from pytest_novelty.suites.prompts import TASKS
from pytest_novelty.suites.schema import (
    BOUNDED_METRICS,
    COUNT_METRICS,
    CREATIVITY_METRICS,
    GATE_AGAINST,
    PROMPTING_METHODS,
    SWEEPABLE,
    THRESHOLD_MODES,
    GateSettings,
    GenerationSettings,
    Prompting,
    PromptSource,
    Scoring,
    Suite,
    Threshold,
)

__all__ = ["find_suite_files", "load_suite", "load_suites", "parse_suite"]

_METRIC_RE = re.compile(r"^(?P<base>[a-z0-9_]+?)(?:@(?P<arg>[0-9.]+))?$")
_TABLES = {"prompts": PromptSource, "prompting": Prompting, "generation": GenerationSettings, "scoring": Scoring,
           "gate": GateSettings}
_SECTIONS = {name: {f.name for f in fields(kind)} for name, kind in _TABLES.items()}
"""The keys of each table: the fields of its dataclass."""
_TOP_KEYS = {"name", "task", "description", "thresholds", "sweep", *_SECTIONS}
_THRESHOLD_KEYS = {"metric", "min", "max", "tolerance_abs", "tolerance_rel"}


class _Checker:
    """Typed access to one table of a suite file, with errors that name the file and key."""

    def __init__(self, path: Path, prefix: str, table: Mapping[str, Any], allowed: set[str]) -> None:
        self.path, self.prefix, self.table = path, prefix, table
        for key in table:
            if key not in allowed:
                allowed_keys = ", ".join(sorted(allowed))
                raise self.fail(key, f"unknown key{did_you_mean(key, allowed)}; allowed keys: {allowed_keys}")

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, name: str, message: str) -> ConfigError:
        return ConfigError(message, path=self.path, field=self.key(name))

    def get(self, name: str, kind: type | tuple[type, ...], default: Any) -> Any:
        if name not in self.table:
            return default
        value = self.table[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            wanted = " or ".join(k.__name__ for k in kinds)
            raise self.fail(name, f"expected {wanted}, got {type(value).__name__} {value!r}")
        return value

    def number(self, name: str, default: float, *, low: float, high: float, integer: bool = False) -> Any:
        value = self.get(name, int if integer else float, default)
        if not low <= value <= high:
            raise self.fail(name, f"must be between {low:g} and {high:g}, got {value!r}")
        return value

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        value: str = self.get(name, str, default)
        if value not in choices:
            raise self.fail(name, f"{value!r} is not one of {', '.join(choices)}{did_you_mean(value, choices)}")
        return value


def _section(path: Path, data: Mapping[str, Any], name: str) -> _Checker:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"expected a table ([{name}]), got {type(table).__name__}", path=path, field=name)
    return _Checker(path, name, table, _SECTIONS[name])


def _parse_prompts(path: Path, data: Mapping[str, Any]) -> PromptSource:
    c = _section(path, data, "prompts")
    source = c.get("source", str, None)
    if not source:
        raise c.fail("source", "missing; e.g. source = \"builtin:story\" or \"tinystories:data/valid.txt\"")
    limit = c.get("limit", int, None)
    if limit is not None and limit < 1:
        raise c.fail("limit", f"must be at least 1, got {limit}")
    options = c.get("options", dict, {})
    return PromptSource(source=source, limit=limit, seed=c.get("seed", int, 0), options=options)


def _parse_generation(path: Path, data: Mapping[str, Any]) -> GenerationSettings:
    c = _section(path, data, "generation")
    stop = c.get("stop", list, [])
    if not all(isinstance(s, str) and s for s in stop):
        raise c.fail("stop", "must be a list of non-empty strings")
    return GenerationSettings(
        samples=c.number("samples", 1, low=1, high=1000, integer=True),
        temperature=c.number("temperature", 1.0, low=0.0, high=10.0),
        top_p=c.number("top_p", 1.0, low=0.0, high=1.0),
        top_k=c.number("top_k", 0, low=0, high=1_000_000, integer=True),
        max_new_tokens=c.number("max_new_tokens", 64, low=1, high=100_000, integer=True),
        seed=c.get("seed", int, 1234),
        batch_size=_batch_size(c),
        stop=tuple(stop),
    )


def _batch_size(c: _Checker) -> int:
    """``"auto"`` (the default; stored as 0) or a fixed number of rows (prompt × sample) per batch."""
    value = c.table.get("batch_size", "auto")
    if value == "auto":
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
        raise c.fail("batch_size", f'must be "auto" or a whole number of rows from 1 to 100000, got {value!r}')
    return value


def _parse_scoring(path: Path, data: Mapping[str, Any]) -> Scoring:
    c = _section(path, data, "scoring")
    ngrams = c.get("ngrams", list, [4, 5, 6])
    if not ngrams or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 32 for n in ngrams):
        raise c.fail("ngrams", f"must be a non-empty list of integers between 1 and 32, got {ngrams!r}")
    return Scoring(
        ngrams=tuple(sorted(set(ngrams))),
        originality=c.get("originality", str, "auto"),
        judge=c.get("judge", str, "rules"),
        judge_samples=c.number("judge_samples", 5, low=1, high=100, integer=True),
        judge_temperature=c.number("judge_temperature", 0.7, low=0.0, high=2.0),
        equivalence=c.get("equivalence", str, "unigram"),
        max_unscored=c.number("max_unscored", 0.05, low=0.0, high=1.0),
        calibration=_calibration(c, path),
        max_judge_spread=c.number("max_judge_spread", 0.25, low=0.0, high=1.0),
        creativity_lengths=_creativity_lengths(c),
    )


def _creativity_lengths(c: _Checker) -> tuple[int, int]:
    """``[scoring] creativity_lengths = [shortest, longest]``: the Creativity Index's range of L, both
    included, whole numbers from 1 to 32 (the paper's [5, 12] by default)."""
    value = c.get("creativity_lengths", list, [5, 12])
    whole = all(isinstance(n, int) and not isinstance(n, bool) for n in value)
    if len(value) != 2 or not whole or not 1 <= value[0] <= value[1] <= 32:
        raise c.fail("creativity_lengths", "must be [shortest, longest], whole numbers with 1 <= shortest <= "
                     f"longest <= 32 (the paper's range is [5, 12]), got {value!r}")
    return value[0], value[1]


def _calibration(c: _Checker, path: Path) -> str | None:
    """``[scoring] calibration``: a graded JSON Lines file, relative to the suite file; it must exist."""
    value: str | None = c.get("calibration", str, None) or None
    if value is not None and not (path.parent / Path(value).expanduser()).is_file():
        raise c.fail("calibration", f"file not found: {value!r} (relative to the suite file); "
                     "build one with `pytest-novelty judge calibration-file`")
    return value


def _min_judge_agreement(c: _Checker, scoring: Scoring) -> float | None:
    """``[gate] min_judge_agreement``: a Spearman rho in [-1, 1], only with ``[scoring] calibration``."""
    if "min_judge_agreement" not in c.table:
        return None
    value: float = c.number("min_judge_agreement", 0.0, low=-1.0, high=1.0)
    if scoring.calibration is None:
        raise c.fail("min_judge_agreement", 'needs a calibration file: add [scoring] calibration = "graded.jsonl"')
    return value


def _parse_threshold(path: Path, index: int, raw: Any, suite: dict[str, Any]) -> Threshold:
    prefix = f"thresholds[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError("expected a table ([[thresholds]])", path=path, field=prefix)
    c = _Checker(path, prefix, raw, _THRESHOLD_KEYS)
    metric = c.get("metric", str, None)
    if metric is None:
        raise c.fail("metric", "missing; e.g. metric = \"novelty@5\"")
    match = _METRIC_RE.match(metric)
    base = match.group("base") if match else metric
    known = tuple(dict.fromkeys((*BOUNDED_METRICS, *COUNT_METRICS, *CREATIVITY_METRICS)))
    if base not in known:
        raise c.fail("metric", f"unknown metric {metric!r}{did_you_mean(base, known)}; known: {', '.join(known)}")
    arg = match.group("arg") if match else None
    ngrams: tuple[int, ...] = suite["scoring"].ngrams
    if base in ("novelty", "top10_novelty", "originality", "coverage"):
        if arg is None or not arg.isdigit():
            raise c.fail("metric", f"{base} needs an n-gram order, e.g. {base}@{ngrams[0]}")
        if int(arg) not in ngrams:
            raise c.fail("metric", f"{metric}: n = {arg} is not in scoring.ngrams {list(ngrams)}; add it there")
    elif base == "uniqueness":
        shortest, longest = suite["scoring"].creativity_lengths
        if arg is None or not arg.isdigit():
            raise c.fail("metric", f"uniqueness needs a span length L, e.g. uniqueness@{shortest}")
        if not shortest <= int(arg) <= longest:
            raise c.fail("metric", f"{metric}: L = {arg} is outside scoring.creativity_lengths "
                         f"[{shortest}, {longest}]; widen it there")
    elif base in ("q_at_tail", "novelty_at_peak"):
        alpha = float(arg) if arg and re.fullmatch(r"[0-9]*\.?[0-9]+", arg) else -1.0
        if not 0.0 < alpha <= 1.0:
            what = "tail" if base == "q_at_tail" else "peak"
            raise c.fail("metric", f"{base} needs a {what} fraction in (0, 1], e.g. {base}@0.1")
        metric = f"{base}@{alpha:g}"
    elif arg is not None:
        raise c.fail("metric", f"{base} takes no @ argument")
    if base in COUNT_METRICS and suite["generation"].samples < 2:
        raise c.fail("metric", f"{base} needs several samples per prompt: set generation.samples >= 2")
    has_min, has_max = "min" in raw, "max" in raw
    if has_min == has_max:
        raise c.fail("min", "give exactly one of min = ... or max = ...")
    bound = "min" if has_min else "max"
    value = c.get(bound, float, None)
    if base in BOUNDED_METRICS:
        high = 1.0
    elif base == "creativity_index":
        high = float(len(suite["scoring"].creativity_range))
    elif base == "distinct_k":
        high = float(suite["generation"].samples)
    else:
        high = 10.0
    low = 1.0 if base == "distinct_k" else 0.0
    if not low <= value <= high:
        raise c.fail(bound, f"{metric} lies between {low:g} and {high:g}, so {value:g} can never be met")
    tol_abs = c.get("tolerance_abs", float, None)
    tol_rel = c.get("tolerance_rel", float, None)
    for name, tol in (("tolerance_abs", tol_abs), ("tolerance_rel", tol_rel)):
        if tol is not None and tol < 0:
            raise c.fail(name, "must not be negative")
    return Threshold(metric, ">=" if has_min else "<=", value, tol_abs, tol_rel)


def _tail_file(c: _Checker, path: Path) -> Path | None:
    """``[gate] tail``: a JSON file of prompt ids (a list, or ``{"q_at_tail@0.1": [...]}``), relative to the suite."""
    name = c.get("tail", str, None)
    if name is None:
        return None
    file = (path.parent / name).resolve()
    if not file.is_file():
        raise c.fail("tail", f"{name!r} is not a file; give a JSON list of prompt ids, relative to the suite file")
    return file


def _parse_sweep(path: Path, data: Mapping[str, Any], base: Suite) -> Suite:
    """Expand ``[sweep]`` into one suite per value, each validated like a suite file of its own."""
    table = data["sweep"]
    if not isinstance(table, dict):
        raise ConfigError("expected a table ([sweep])", path=path, field="sweep")
    c = _Checker(path, "sweep", table, {"parameter", "values"})
    parameter = c.choice("parameter", "", SWEEPABLE) if "parameter" in table else None
    if parameter is None:
        raise c.fail("parameter", f"missing; one of {', '.join(SWEEPABLE)}")
    values = c.get("values", list, [])
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise c.fail("values", "must be a non-empty list of numbers, e.g. values = [0.5, 1.0, 1.5]")
    if len(set(values)) != len(values):
        raise c.fail("values", "lists a value twice")
    section, key = parameter.split(".")
    variants = []
    for value in values:
        variant_data = {k: v for k, v in data.items() if k != "sweep"}
        variant_data[section] = {**variant_data.get(section, {}), key: value}
        variant_data["name"] = f"{base.name}[{key}={value:g}]"
        try:
            variant = parse_suite(variant_data, path)
        except ConfigError as exc:
            detail = str(exc).removeprefix(f"{path}: ")
            message = f"value {value!r} of the sweep is invalid: {detail}"
            raise ConfigError(message, path=path, field="sweep.values") from None
        variants.append(replace(variant, sweep_value=float(value), family_name=base.name))
    return replace(base, sweep=(parameter, tuple(float(v) for v in values)), variants=tuple(variants))


def parse_suite(data: Mapping[str, Any], path: Path) -> Suite:
    """Validate the parsed TOML ``data`` of the suite file at ``path``."""
    top = _Checker(path, "", data, _TOP_KEYS)
    task = top.choice("task", "", TASKS) if "task" in data else None
    if task is None:
        raise top.fail("task", f"missing; one of {', '.join(TASKS)}")
    name = top.get("name", str, path.stem)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*(\[[a-z_]+=[0-9.e+-]+\])?", name):
        raise top.fail("name", f"{name!r}: use letters, digits, '-', '_' and '.' only")
    parsed: dict[str, Any] = {
        "prompts": _parse_prompts(path, data),
        "generation": _parse_generation(path, data),
        "scoring": _parse_scoring(path, data),
    }
    pc = _section(path, data, "prompting")
    parsed["prompting"] = Prompting(
        method=pc.choice("method", "few-shot", PROMPTING_METHODS),
        examples=pc.number("examples", 0, low=0, high=64, integer=True),
        rounds=pc.number("rounds", 3, low=1, high=20, integer=True),
    )
    gc = _section(path, data, "gate")
    parsed["gate"] = GateSettings(
        alpha=gc.number("alpha", 0.05, low=1e-9, high=1.0),
        tolerance_abs=gc.number("tolerance_abs", 0.02, low=0.0, high=1e9),
        tolerance_rel=gc.number("tolerance_rel", 0.0, low=0.0, high=1.0),
        reference=gc.get("reference", bool, False),
        min_judge_agreement=_min_judge_agreement(gc, parsed["scoring"]),
        against=gc.choice("against", "series-best", GATE_AGAINST) if "against" in gc.table else None,
        tail=_tail_file(gc, path),
        threshold_mode=gc.choice("threshold_mode", "point", THRESHOLD_MODES),
    )
    raw_thresholds = top.get("thresholds", list, [])
    if not raw_thresholds:
        raise top.fail("thresholds", "a suite needs at least one [[thresholds]] table to gate on")
    thresholds = tuple(_parse_threshold(path, i, t, parsed) for i, t in enumerate(raw_thresholds))
    labels = [t.label for t in thresholds]
    for label in labels:
        if labels.count(label) > 1:
            raise top.fail("thresholds", f"{label} is listed twice")
    suite = Suite(name=name, task=task, path=path, description=top.get("description", str, ""), thresholds=thresholds,
                  **parsed)
    if suite.prompting.method == "denial" and "[" not in name:
        if "sweep" in data:
            raise top.fail("sweep", "a denial-prompting suite cannot also sweep; split it into two suites")
        rounds = tuple(
            replace(suite, name=f"{name}[round={r}]", denial_round=r, family_name=name)
            for r in range(1, suite.prompting.rounds + 1)
        )
        return replace(suite, variants=rounds)
    return _parse_sweep(path, data, suite) if "sweep" in data else suite


def load_suite(path: str | Path, *, tail: bool = True) -> Suite:
    """Read and validate one suite file; without ``tail``, its ``[gate] tail`` is set aside (the
    ``tail`` commands rank the prompts themselves, and the file a build writes may not exist yet)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError("suite file not found", path=path) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read it as TOML: {exc}", path=path) from None
    if not tail and isinstance(data.get("gate"), dict):
        data["gate"] = {k: v for k, v in data["gate"].items() if k != "tail"}
    return parse_suite(data, path)


def find_suite_files(folder: str | Path, *, field: str | None = None) -> list[Path]:
    """The suite files directly inside ``folder``, sorted by name; ``field`` is where the folder
    came from (the option or setting a front end read it from), for the error."""
    folder = Path(folder)
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "suite folder not found"
        raise ConfigError(f"{what}; give a folder of suite files (*.toml)", path=folder, field=field)
    return sorted(p for p in folder.glob("*.toml") if p.is_file())


def load_suites(folder: str | Path, *, field: str | None = None, tail: bool = True) -> list[Suite]:
    """Load every suite in ``folder``; suite names must be unique. ``field``: see :func:`find_suite_files`;
    ``tail``: see :func:`load_suite`."""
    suites = [load_suite(p, tail=tail) for p in find_suite_files(folder, field=field)]
    if not suites:
        raise ConfigError("no suite files (*.toml) in this folder", path=folder, field=field)
    seen: dict[str, Path] = {}
    for suite in suites:
        if suite.name in seen:
            raise ConfigError(f"suite name {suite.name!r} is also used by {seen[suite.name]}", path=suite.path)
        seen[suite.name] = suite.path
    return suites
