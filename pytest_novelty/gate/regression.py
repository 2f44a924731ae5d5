"""Regression against an accepted snapshot: did the candidate lose more than noise and tolerance allow?

A :class:`MetricRecord` holds one gated metric of one suite together with the per-prompt values
behind it; one record is stored per case as the accepted baseline, and :func:`compare` judges a
candidate's record against it. The rules, in order:

1. Direction. Only movement in the bad direction counts: down for a ``min`` threshold
   (``higher_is_better``), up for a ``max`` one. Movement in the good direction is an
   improvement and never fails. The direction, like the settings below, is the candidate's.
2. Tolerance. tolerance = max(tolerance_abs, tolerance_rel × |snapshot value|), taken from the
   *candidate* record, i.e. from the suite file as it is now, so loosening a tolerance in the suite
   file takes effect without re-recording. A drop within tolerance passes.
3. Significance. A drop beyond tolerance is a regression only when one test, the paired sign-flip
   test over the prompts both records share (:func:`pytest_novelty.metrics.sign_flip.paired_sign_flip`),
   finds it significant: its (1 − α) interval of the change in the *gated statistic* (the shifts the
   test does not reject) lies entirely on the bad side of 0 (so in effect a one-sided test at α/2,
   on the cautious side). The test swaps each prompt's two sides at random: under "no change" (the
   same checkpoint, other seeds) that gives data just as likely, so its level is exact at any
   number of prompts and for discrete, skewed and heavy-tailed per-prompt values, where the
   bootstrap it replaced raised false alarms (``docs/verdicts.md``). Over the many cases of a run,
   each is held to a corrected α, passed as ``alpha`` (:func:`pytest_novelty.gate.case.corrected_alpha`).
   The statistic is the metric's own: the mean per-prompt difference for means, and for
   ``top10_novelty@n`` the difference of the top-10 % means, recomputed on every swap from the
   per-generation values both records store. The CI shown is that interval and the p-value comes
   from the same swaps, so the verdict always agrees with the CI. Otherwise the drop is "not
   significant" and passes with a warning. When no test is possible (fewer than two shared prompts
   with values, or no per-prompt values stored), a drop beyond tolerance is a regression: the gate
   errs towards telling a human.

q@Tail metrics carry the snapshot's tail prompt ids (``tail_ids``). The candidate's value is then
recomputed as the mean of the candidate's per-prompt values over the *snapshot's* tail ids, and the
paired test runs on those ids only, so both checkpoints are judged on the same prompts even when the
candidate's own outputs would pick a different tail. Tail ids the candidate lacks are left out, and
the snapshot's value is then recomputed on the same remaining ids.

Values are stored to 6 decimals, so differences below 1e-6 count as "same".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.tail import FrozenTail, gated_metrics, tail_value
from pytest_novelty.infra.redact import redact
from pytest_novelty.metrics.sign_flip import DEFAULT_FLIPS, SIGN_FLIP_TEST, paired_sign_flip, smallest_p
from pytest_novelty.metrics.table import family
from pytest_novelty.suites.schema import Suite, Threshold

if TYPE_CHECKING:
    from pytest_novelty.pipeline.results import SuiteResult

#: Version of the stored record layout; bumped when a field changes meaning.
FORMAT_VERSION = 1

#: Decimal places kept for stored floats (diff-friendly, well below any sensible tolerance).
DIGITS = 6

#: Differences smaller than this are below the stored precision and count as no change.
SAME_EPS = 10.0**-DIGITS

#: Swaps the sign-flip test of a comparison draws.
N_BOOT = DEFAULT_FLIPS


def _round(value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return None
    rounded = round(float(value), DIGITS)
    return 0.0 if rounded == 0 else rounded  # no "-0.0" churn in diffs


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


@dataclass(frozen=True)
class MetricRecord:
    """One gated metric of one suite, with what a later run needs to compare against it.

    ``value`` is the suite-level metric (None or NaN when it could not be computed);
    ``higher_is_better`` is True for ``min`` thresholds and False for ``max`` ones. ``per_prompt``
    maps prompt id to the per-prompt value (NaN when unscored) and feeds the paired test; for q@Tail
    metrics it holds every prompt's quality and ``tail_ids`` the frozen tail. ``per_generation``
    (``top10_novelty`` only) maps prompt id to its generations' novelty, so the test can resample
    the top-10 % statistic itself. ``model``, ``identity_id`` and ``judge`` say what produced the
    numbers; the tolerances and ``alpha`` are the suite file's gate settings for this metric.
    """

    suite: str
    metric: str
    value: float | None
    higher_is_better: bool
    per_prompt: Mapping[str, float] = field(default_factory=dict)
    tail_ids: list[str] | None = None
    model: str = ""
    identity_id: str = ""
    judge: str = ""
    tolerance_abs: float = 0.02
    tolerance_rel: float = 0.0
    alpha: float = 0.05
    per_generation: Mapping[str, Sequence[float]] | None = None

    @property
    def key(self) -> tuple[str, str, bool]:
        """(suite, metric, direction): identifies the case this record belongs to."""
        return (self.suite, self.metric, self.higher_is_better)

    def to_json(self) -> str:
        """Deterministic, diff-friendly JSON text.

        Keys are sorted, floats rounded to 6 decimals, NaN written as null, one prompt per line;
        model, identity_id and judge pass through :func:`redact` so no credential is ever stored.
        """
        data = {
            "format": FORMAT_VERSION, "suite": self.suite, "metric": self.metric, "value": _round(self.value),
            "higher_is_better": bool(self.higher_is_better),
            "per_prompt": {str(k): _round(v) for k, v in self.per_prompt.items()},
            "tail_ids": None if self.tail_ids is None else sorted(str(i) for i in self.tail_ids),
            "model": redact(self.model), "identity_id": redact(self.identity_id), "judge": redact(self.judge),
            "tolerance_abs": _round(self.tolerance_abs), "tolerance_rel": _round(self.tolerance_rel),
            "alpha": _round(self.alpha),
        }  # fmt: skip
        if self.per_generation is not None:
            data["per_generation"] = {str(k): [_round(v) for v in values] for k, values in self.per_generation.items()}
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> MetricRecord:
        """Parse :meth:`to_json` output; raises ``ValueError`` on anything else."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("expected a JSON object")
        if data.get("format") != FORMAT_VERSION:
            raise ValueError(f"unsupported record format {data.get('format')!r} (expected {FORMAT_VERSION})")
        try:
            per_prompt = {str(k): _float(v) for k, v in dict(data.get("per_prompt") or {}).items()}
            tail, generations = data.get("tail_ids"), data.get("per_generation")
            return cls(
                per_generation=None if generations is None else {
                    str(k): [_float(v) for v in values] for k, values in dict(generations).items()},
                suite=str(data["suite"]), metric=str(data["metric"]),
                value=None if data.get("value") is None else float(data["value"]),
                higher_is_better=bool(data["higher_is_better"]),
                per_prompt=per_prompt, tail_ids=None if tail is None else [str(i) for i in tail],
                model=str(data.get("model", "")),
                # ``fingerprint``: the name the records of earlier versions gave the identity's id.
                identity_id=str(data.get("identity_id", data.get("fingerprint", ""))), judge=str(data.get("judge", "")),
                tolerance_abs=float(data.get("tolerance_abs", 0.0)),
                tolerance_rel=float(data.get("tolerance_rel", 0.0)), alpha=float(data.get("alpha", 0.05)),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed record: {exc!r}") from None


def compared_values(snapshot: MetricRecord, candidate: MetricRecord) -> tuple[float, float, list[str], str]:
    """The two values to compare, the prompt ids to pair on (the snapshot's tail ids for q@Tail and
    Novelty at Peak), and a note for the message: what :func:`compare` and the paired sequential
    rule of ``--novelty-adaptive`` (:mod:`pytest_novelty.gate.adaptive`) compare."""
    if snapshot.tail_ids is None:
        shared = sorted(set(snapshot.per_prompt) & set(candidate.per_prompt))
        return _float(snapshot.value), _float(candidate.value), shared, ""
    tail = sorted(set(snapshot.tail_ids))
    known = [i for i in tail if i in candidate.per_prompt]
    if not known:
        return _float(snapshot.value), math.nan, [], " (candidate has none of the snapshot's tail prompts)"
    candidate_value = tail_value(candidate.per_prompt, known)[0]
    accepted_value = _float(snapshot.value)
    note = ""
    if len(known) < len(tail):
        note = f" (on {len(known)} of {len(tail)} tail prompts)"
        if all(i in snapshot.per_prompt for i in known):
            accepted_value = tail_value(snapshot.per_prompt, known)[0]
    shared = [i for i in known if i in snapshot.per_prompt]
    return accepted_value, candidate_value, shared, note


def compare(
    snapshot: MetricRecord,
    candidate: MetricRecord,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    alpha: float | None = None,
    correction: str = "",
    against: str = "snapshot",
) -> Comparison:
    """Judge ``candidate`` against the accepted ``snapshot`` (see the module docstring for the rules).

    Direction, tolerances and α come from the candidate (the suite file's current settings), or
    ``alpha`` when given: the α each of a run's comparisons is held to after a correction for the
    run's number of comparisons, which ``correction`` names in the comparison's ``test``; ``against``
    says in words what the accepted record is (``snapshot``, ``baseline``, ``references``, an
    earlier checkpoint), for the comparison's explanation. A missing candidate value (nothing could
    be scored) against a present snapshot value is a regression; a snapshot without a value is
    beaten by any candidate value.
    """
    snap_value, cand_value, shared, note = compared_values(snapshot, candidate)
    alpha = candidate.alpha if alpha is None else alpha
    scale = 0.0 if math.isnan(snap_value) else abs(snap_value)
    tolerance = max(candidate.tolerance_abs, candidate.tolerance_rel * scale)

    def done(status: str, found: _Tested | None = None, extra: str = "") -> Comparison:
        found = found or _Tested()
        test = f"{found.name}; {correction}" if found.name and correction else found.name
        return Comparison(
            status=status, accepted_value=None if math.isnan(snap_value) else snap_value,
            candidate_value=None if math.isnan(cand_value) else cand_value, tolerance=tolerance,
            delta_ci=found.ci, p_value=found.p, n_pairs=found.n, message="",
            suite=candidate.suite, metric=candidate.metric, alpha=alpha, test=test, against=against,
        ).with_message(note, extra)  # fmt: skip

    if math.isnan(snap_value) and math.isnan(cand_value):
        return done("same", extra=" (neither value could be computed)")
    if math.isnan(cand_value):
        return done("regressed", extra=" (the candidate's value could not be computed)")
    if math.isnan(snap_value):
        return done("improved", extra=" (the snapshot has no value)")
    tested = _paired_test(snapshot, candidate, shared, alpha, n_boot=n_boot, seed=seed)
    # The interval is shown on every verdict (a series shows every change with it); only a drop
    # beyond tolerance is decided by it.
    shown = tested if tested is not None and tested.ci is not None else None
    delta = cand_value - snap_value
    if abs(delta) < SAME_EPS:
        return done("same", shown)
    drop = -delta if candidate.higher_is_better else delta
    if drop < 0:
        return done("improved", shown)
    if drop <= tolerance + SAME_EPS / 2:
        return done("within_tolerance", shown)
    if tested is None:
        return done("regressed", extra=" (no significance test possible)")
    if tested.ci is None:
        return done("regressed", tested, extra=" (too few paired prompts to test significance)")
    bad_side = tested.ci[1] < 0 if candidate.higher_is_better else tested.ci[0] > 0
    if bad_side:
        return done("regressed", tested)
    floor = smallest_p(tested.n)
    few = (f" ({tested.n} paired prompts can give no p-value below {floor:.3g}: more prompts are needed to show "
           f"any change at alpha {alpha:g})") if floor > alpha else ""
    return done("not_significant", tested, extra=few)


@dataclass(frozen=True)
class _Tested:
    """What the paired test of two records found: the interval of the change at 1 − α and its
    p-value (None below two pairs), the prompts it used and the test's name."""

    ci: tuple[float, float] | None = None
    p: float | None = None
    n: int = 0
    name: str = ""


def _paired_test(
    snapshot: MetricRecord, candidate: MetricRecord, shared: list[str], alpha: float, *, n_boot: int, seed: int
) -> _Tested | None:
    """The paired sign-flip test of the gated statistic over the prompts both records share (the mean of
    the per-prompt values; for a top-fraction metric, that statistic of the per-generation values
    when both records keep them); None when the test cannot run at all."""
    top = family(candidate.metric).top_fraction
    if top is not None and snapshot.per_generation and candidate.per_generation:
        paired = [i for i in shared if i in snapshot.per_generation and i in candidate.per_generation]
        a = generation_rows([snapshot.per_generation[i] for i in paired])
        b = generation_rows([candidate.per_generation[i] for i in paired])
        usable = len(paired)
        statistic: float | None = top
    else:
        a = np.array([snapshot.per_prompt[i] for i in shared], dtype=float)
        b = np.array([candidate.per_prompt[i] for i in shared], dtype=float)
        usable = int(np.sum(~(np.isnan(a) | np.isnan(b))))
        statistic = None
    if usable < 2:
        return _Tested(n=usable)
    try:
        test = paired_sign_flip(a, b, top_fraction=statistic, n_flips=n_boot, seed=seed, confidence=1.0 - alpha)
    except ValueError:
        return None
    name = f"{SIGN_FLIP_TEST}, {test.statistic}" + (
        "" if statistic is not None or top is None else " of per-prompt novelty (no per-generation values stored)"
    )
    return _Tested((test.ci_low, test.ci_high), test.p_value, test.n, name)


def generation_rows(values: Sequence[Sequence[float]]) -> np.ndarray:
    """Per-prompt lists of per-generation values as a (prompts × samples) array, NaN-padded."""
    width = max((len(v) for v in values), default=0)
    out = np.full((len(values), max(width, 1)), np.nan)
    for row, generations in enumerate(values):
        out[row, : len(generations)] = np.asarray(generations, dtype=float)
    return out


def per_prompt_key(metric: str) -> str:
    """Which per-prompt series backs ``metric`` in the paired test (the metric table's
    :meth:`~pytest_novelty.metrics.table.MetricFamily.paired_on`): for ``top10_novelty@n``,
    per-prompt ``novelty@n``, which pairs the prompts and is the test's fallback for records stored
    without per-generation values."""
    return family(metric).paired_on(metric)


def result_record(
    result: SuiteResult,
    threshold: Threshold,
    *,
    suite: Suite | None = None,
    tail: FrozenTail | None = None,
    metrics: Mapping[str, float] | None = None,
) -> MetricRecord:
    """The record of one case from one pipeline result (:func:`make_record`): what every comparison
    (snapshot, baseline, series) compares, so all of them test one statistic the same way.

    ``tail``, for a q@Tail metric, is the frozen tail the case is judged on: the value is the mean
    per-prompt quality over those prompts and the record keeps their ids (without it, the result's
    own tail). A Novelty at Peak record keeps the peak the metrics step measured it on, so a
    comparison recomputes the candidate on the accepted record's peak. ``metrics`` (default: the
    result's) may carry values already computed for this case; ``suite`` defaults to the result's.
    """
    values = result.metrics if metrics is None else metrics
    tail_ids: Sequence[str] | None = None
    if threshold.base == "q_at_tail":
        if tail is not None:
            values, _ = gated_metrics(result, threshold.metric, tail, values)
            tail_ids = tail.ids
        else:
            tail_ids = result.measured.tail_ids.get(threshold.metric)
    elif family(threshold.metric).subset is not None:  # Novelty at Peak: compared on the stored peak
        tail_ids = result.measured.tail_ids.get(threshold.metric)
    per_generation = None
    if threshold.base == "top10_novelty" and threshold.arg is not None:
        novelty = result.measured.novelty.get(int(threshold.arg))
        per_generation = None if novelty is None else novelty.tolist()
    return make_record(
        result.suite if suite is None else suite, threshold, metrics=values, per_prompt=result.per_prompt,
        prompt_ids=[p.id for p in result.prompts], tail_ids=tail_ids, model=result.model,
        identity_id=result.generated.identity_id, judge=result.scores.judge, per_generation=per_generation,
    )  # fmt: skip


def make_record(
    suite: Suite,
    threshold: Threshold,
    *,
    metrics: Mapping[str, float],
    per_prompt: Mapping[str, Sequence[float]],
    prompt_ids: Sequence[str],
    tail_ids: Sequence[str] | None = None,
    model: str = "",
    identity_id: str = "",
    judge: str = "",
    per_generation: Sequence[Sequence[float]] | None = None,
) -> MetricRecord:
    """The record of one case from a suite's results.

    ``metrics`` and ``per_prompt`` are what :func:`pytest_novelty.metrics.suite.suite_metrics`
    returns (per-prompt lists aligned with ``prompt_ids``). Tolerances come from the threshold when
    it sets them, else from the suite's ``[gate]`` table; α from ``[gate]``. ``tail_ids`` is the
    tail the case was judged on (stored so later runs reuse it). ``per_generation`` (prompts ×
    samples novelty at the metric's n, kept for ``top10_novelty`` only) lets the comparison
    resample the top-10 % statistic itself.
    """
    series = per_prompt.get(per_prompt_key(threshold.metric), [])
    if series and len(series) != len(prompt_ids):
        raise ValueError(f"{threshold.metric}: {len(series)} per-prompt values for {len(prompt_ids)} prompts")
    gate = suite.gate
    value = metrics.get(threshold.metric)
    generations = None if per_generation is None or not threshold.metric.startswith("top10_novelty@") else {
        str(i): [float(v) for v in row] for i, row in zip(prompt_ids, per_generation, strict=True)}
    return MetricRecord(
        suite=suite.name, metric=threshold.metric, value=None if value is None or math.isnan(value) else float(value),
        higher_is_better=threshold.op == ">=",
        per_prompt={str(i): float(v) for i, v in zip(prompt_ids, series, strict=False)},
        tail_ids=None if tail_ids is None else [str(i) for i in tail_ids],
        model=model, identity_id=identity_id, judge=judge,
        tolerance_abs=gate.tolerance_abs if threshold.tolerance_abs is None else threshold.tolerance_abs,
        tolerance_rel=gate.tolerance_rel if threshold.tolerance_rel is None else threshold.tolerance_rel,
        alpha=gate.alpha, per_generation=generations,
    )  # fmt: skip
