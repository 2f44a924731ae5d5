"""How sure a suite's numbers are: confidence intervals clustered by prompt.

Model and source: Miller, "Adding Error Bars to Evals: A Statistical Approach to Language Model
Evaluations" (2024, arXiv 2411.00640). A suite's prompts are a sample from a larger population of
prompts like them, and each prompt's answers are a sample of what the checkpoint could have written.
A gated value estimates the population's statistic; its noise comes from both draws. The answers to
one prompt share that prompt's difficulty, so they are correlated: an interval that treats the
generations of a suite as independent is too narrow by the square root of the design effect
1 + (m − 1)·ρ (m samples per prompt, ρ the correlation of two answers to the same prompt). Every
interval here therefore resamples *prompts* and keeps each prompt's samples together (the cluster
bootstrap of :mod:`.bootstrap`, which the statistics below feed as functions of how often each
prompt was drawn), or, for shares, uses the clustered variance directly. What a comparison of two
runs can detect is in :mod:`.power`; the paired comparison itself in :mod:`.paired`.

Shares (``coverage@n``, ``unscored``: :func:`share_interval`) are often close to 0 or 1, where a
bootstrap sees too few events (0 unscored answers of 200 resample to [0, 0]). They get Wilson's
score interval on the effective number of generations n_eff = N / deff, where N is the number of
generations and deff = max(1, SE² · N / (p̂(1 − p̂))) the design effect, SE the clustered standard
error of the share p̂ (deff = 1 when p̂ is 0 or 1), with the t(G − 1) quantile in place of z:

    centre = (p̂ + z²/(2n)) / (1 + z²/n),   half = z / (1 + z²/n) · √(p̂(1 − p̂)/n + z²/(4n²)),

n = n_eff. Wilson (1927) for the score interval; Kish for the design effect; the effective-size
Wilson interval for clustered samples is the survey statisticians' standard choice for rare
proportions. It stays in [0, 1], contains p̂ and is not of zero width at 0 or 1.

The gated statistics (:func:`suite_intervals` maps each metric name to one; the definitions are
those of :mod:`pytest_novelty.metrics.suite`, and the tests check that every interval's estimate is
the suite's value to the last digit):

* means over generations, NaN (unscored) left out: ``quality``, ``originality@n`` (too short
  counted as 0), ``novelty@n``, ``uniqueness@L`` (too short counted as 0) and ``creativity_index``
  (their per-generation sum over the range, in [0, its number of lengths]) (:func:`mean_interval`).
  Per resample Σ w_i·sum_i / Σ w_i·count_i, a ratio estimator, so prompts with more scored samples
  weigh more, as in the point value;
* shares over generations: ``coverage@n``, ``unscored`` (:func:`share_interval`);
* the top-10 % mean over all generations of the drawn prompts, each generation counted as often as
  its prompt was drawn: ``top10_novelty@n`` (:func:`top_fraction_interval`);
* means over prompts of per-prompt values, NaN left out: ``distinct_k``, ``utility_k``,
  ``novelty_overall`` (per-prompt output originality at n = 4), and ``q_at_tail@α`` and
  ``novelty_at_peak@α`` over the tail's or the peak's prompts only, which are then the clusters
  (:func:`tail_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Unpack

import numpy as np
from numpy.typing import ArrayLike

from pytest_novelty.metrics._validate import as_float_array, check_confidence, check_fraction
from pytest_novelty.metrics.bootstrap import (
    BLOCK_ELEMENTS,
    DEFAULT_RESAMPLES,
    Array,
    Interval,
    Linearised,
    Options,
    bootstrap_interval,
    linearised_se,
    rows_of,
    t_quantile,
)
from pytest_novelty.metrics.table import FAMILIES, family, values_of

#: The interval method of shares (:func:`share_interval`).
WILSON = "wilson"


class RatioStatistic:
    """Σ w_i·numerator_i / Σ w_i·denominator_i: a mean whose prompts weigh by their counts.

    With per-prompt sums of present values as numerators and their counts as denominators it is the
    mean over generations with NaN left out; with one value per prompt it is the mean over prompts.
    NaN where the drawn prompts have no present value. Linearisation: e_i = (n_i − T·d_i) / Σ w·d.
    """

    def __init__(self, numerators: Array, denominators: Array) -> None:
        self.numerators, self.denominators = numerators, denominators

    @classmethod
    def mean_of(cls, values: Array) -> RatioStatistic:
        """The mean over all present (non-NaN) entries of a (prompts × samples) array."""
        present = ~np.isnan(values)
        return cls(np.where(present, values, 0.0).sum(axis=1), present.sum(axis=1).astype(np.float64))

    def __call__(self, weights: Array) -> Array:
        """The ratio on every row of ``weights``."""
        top, bottom = weights @ self.numerators, weights @ self.denominators
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan)

    def values_and_ses(self, weights: Array) -> tuple[Array, Array]:
        """The ratio and its linearised standard error on every row, from weighted sums alone.

        Σ w·e² = (Σ w·n² − 2T·Σ w·n·d + T²·Σ w·d²) / (Σ w·d)², so no (rows × G) array is built.
        """
        bottom = weights @ self.denominators
        value = self(weights)
        t = np.nan_to_num(value)
        squares = (
            weights @ (self.numerators**2)
            - 2.0 * t * (weights @ (self.numerators * self.denominators))
            + t * t * (weights @ (self.denominators**2))
        )
        clusters = weights.shape[1]
        factor = clusters / (clusters - 1) if clusters > 1 else math.nan
        scale = np.where(bottom > 0, bottom, 1.0)
        return value, np.sqrt(factor * np.maximum(squares, 0.0)) / scale

    def linearised(self, weights: Array) -> tuple[Array, Array]:
        """The ratio and the per-prompt contributions (n_i − T·d_i) / Σ w·d of every row."""
        bottom = weights @ self.denominators
        value = self(weights)
        scale = np.where(bottom > 0, bottom, 1.0)[:, None]
        centred = self.numerators[None, :] - np.nan_to_num(value)[:, None] * self.denominators[None, :]
        return value, centred / scale


class TopFractionStatistic:
    """The mean of the highest ceil(f × m) generations of a resample, m its number of present values.

    Each generation counts as often as its prompt was drawn. The generations are sorted once
    (highest first); on a resample the k = ceil(f·m) highest are taken by walking the cumulative
    multiplicities, the last one partly when its copies straddle the cut. ceil is taken exactly on
    the decimal value of f, as :func:`pytest_novelty.metrics.top_fraction_mean` does, so on the
    data itself (all weights 1) the two agree to the last digit.

    Linearisation (the influence function of an upper-tail mean): with q the resample's cut-off,
    ψ(x) = q + (x − q)₊ / f, s_i = Σ_j ψ(x_ij) over prompt i's present generations, c_i their
    number and M = Σ w·s / Σ w·c, e_i = (s_i − M·c_i) / Σ w·c.
    """

    def __init__(self, values: Array, fraction: float) -> None:
        self.fraction = check_fraction(fraction, "fraction")
        share = Fraction(repr(self.fraction))
        self.numerator, self.denominator = share.numerator, share.denominator
        prompts = np.repeat(np.arange(values.shape[0]), values.shape[1])
        flat = values.ravel()
        keep = ~np.isnan(flat)
        order = np.argsort(-flat[keep], kind="stable")
        self.values = flat[keep][order]
        self.prompts = prompts[keep][order]
        self.counts = (~np.isnan(values)).sum(axis=1).astype(np.float64)

    def _walk(self, weights: Array) -> tuple[Array, Array, Array, int]:
        """(k, copies, cumulative copies) over the shortest prefix of the ranking that every row needs."""
        total = np.rint(weights @ self.counts).astype(np.int64)
        take = -(-total * self.numerator // self.denominator)  # exact ceil(f × m)
        size = self.values.size
        prefix = min(size, 2 * int(take.max(initial=0)) + 64)
        while True:
            copies = weights[:, self.prompts[:prefix]]
            cumulative = np.cumsum(copies, axis=1)
            if prefix == size or bool(np.all(cumulative[:, -1] >= take)):
                return take, copies, cumulative, prefix
            prefix = min(size, 2 * prefix)

    def _by_prompt(self, ranked: Array, prefix: int) -> Array:
        """Sum each row of a (rows × prefix) array of ranked generations per prompt: (rows × G)."""
        owners = self.prompts[:prefix]
        order = np.argsort(owners, kind="stable")
        grouped = owners[order]
        starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        out = np.zeros((ranked.shape[0], self.counts.size))
        out[:, grouped[starts]] = np.add.reduceat(ranked[:, order], starts, axis=1)
        return out

    def __call__(self, weights: Array) -> Array:
        """The top-fraction mean on every row of ``weights``."""
        return self.linearised(weights, contributions=False)[0]

    def linearised(self, weights: Array, *, contributions: bool = True) -> tuple[Array, Array]:
        """The top-fraction mean and the per-prompt contributions of ψ (class docstring) of every row."""
        rows, clusters = weights.shape[0], self.counts.size
        values, out = np.full(rows, np.nan), np.zeros((rows, clusters) if contributions else (0, 0))
        if self.values.size == 0:
            return values, out
        step = max(1, BLOCK_ELEMENTS // self.values.size)
        for start in range(0, rows, step):
            w = weights[start : start + step]
            take, copies, cumulative, prefix = self._walk(w)
            used = np.clip(take[:, None] - (cumulative - copies), 0.0, copies)
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = used @ self.values[:prefix] / np.maximum(take, 1)
                values[start : start + step] = np.where(take > 0, mean, np.nan)
            if not contributions:
                continue
            reached = cumulative >= np.maximum(take, 1)[:, None]
            cut = self.values[:prefix][np.argmax(reached, axis=1)]
            excess = np.maximum(self.values[None, :prefix] - cut[:, None], 0.0) / self.fraction
            s = self.counts[None, :] * cut[:, None] + self._by_prompt(excess, prefix)
            total = w @ self.counts
            scale = np.where(total > 0, total, 1.0)
            mean = np.sum(w * s, axis=1) / scale
            out[start : start + step] = (s - mean[:, None] * self.counts[None, :]) / scale[:, None]
        return values, out


class DifferenceStatistic:
    """``after(w) − before(w)``: the paired change of a statistic, both sides on the same resample."""

    def __init__(self, before: Linearised, after: Linearised) -> None:
        self.before, self.after = before, after

    def __call__(self, weights: Array) -> Array:
        """The change on every row of ``weights``."""
        return self.after(weights) - self.before(weights)

    def linearised(self, weights: Array) -> tuple[Array, Array]:
        """The change and the difference of the two sides' contributions (both need a linearisation)."""
        after, after_parts = self.after.linearised(weights)
        before, before_parts = self.before.linearised(weights)
        return after - before, after_parts - before_parts


# --- the gated statistics --------------------------------------------------------------------------


def mean_interval(values: ArrayLike, **options: Unpack[Options]) -> Interval:
    """Interval of the mean over generations of a (prompts × samples) array, NaN left out, by
    :func:`.bootstrap.bootstrap_interval` with its ``options`` (and their defaults).

    A one-dimensional input is one value per prompt (``distinct_k``, ``utility_k``): the mean over
    prompts. Rows are the clusters; passing ``values.reshape(-1, 1)`` instead gives the unclustered
    interval that treats every generation as independent (too narrow when samples of a prompt are
    correlated; the simulation test shows by how much).
    """
    rows = rows_of(values, "values")
    return bootstrap_interval(RatioStatistic.mean_of(rows), rows.shape[0], **options)


def share_interval(
    mask: ArrayLike,
    *,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    method: str = WILSON,
) -> Interval:
    """Interval of the share of true entries of a (prompts × samples) boolean array (coverage, unscored).

    ``method="wilson"`` (the default): Wilson's score interval on the effective number of
    generations (module docstring); ``n_boot`` and ``seed`` are then unused. A bootstrap method
    (:data:`METHODS`) resamples prompts instead, clipped to [0, 1].
    """
    rows = rows_of(np.asarray(mask, dtype=bool).astype(np.float64), "mask")
    if method != WILSON:
        return mean_interval(rows, confidence=confidence, n_boot=n_boot, seed=seed, method=method, bounds=(0.0, 1.0))
    level = check_confidence(confidence)
    clusters, total = rows.shape[0], rows.size
    share = float(rows.mean())
    if clusters < 2:
        return Interval(math.nan, math.nan, level, clusters, WILSON, share)
    ones = np.ones((1, clusters))
    _, contributions = RatioStatistic.mean_of(rows).linearised(ones)
    se = float(linearised_se(contributions, ones)[0])
    spread = share * (1.0 - share)
    design = max(1.0, se * se * total / spread) if spread > 0 else 1.0
    n = total / design
    z = t_quantile(clusters - 1, (1.0 + level) / 2.0)
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(spread / n + z * z / (4 * n * n))
    low, high = max(0.0, min(centre - half, share)), min(1.0, max(centre + half, share))
    return Interval(low, high, level, clusters, WILSON, share)


def top_fraction_interval(values: ArrayLike, fraction: float = 0.1, **options: Unpack[Options]) -> Interval:
    """Interval of the top-fraction mean (``top10_novelty@n`` for 0.1) of a (prompts × samples) array, by
    :func:`.bootstrap.bootstrap_interval` with ``options``, clipped to [0, 1] unless ``bounds`` says otherwise."""
    rows = rows_of(values, "values")
    options.setdefault("bounds", (0.0, 1.0))
    return bootstrap_interval(TopFractionStatistic(rows, fraction), rows.shape[0], **options)


def tail_interval(
    per_prompt: ArrayLike, prompt_ids: Sequence[str], tail_ids: Sequence[str], **options: Unpack[Options]
) -> Interval:
    """Interval of q@Tail on a frozen tail: the mean per-prompt quality over the tail ids (``options`` as
    :func:`mean_interval`'s, clipped to [0, 1]).

    ``per_prompt`` is aligned with ``prompt_ids``; tail ids the suite lacks are left out and NaN
    values (unscored prompts) too, the rule :func:`pytest_novelty.gate.tail.tail_value`
    applies, so the estimate is the gated value. The clusters are the tail's prompts: the tail is a
    sample of the prompts that rank like it, and each prompt's quality carries its samples' noise.
    """
    values = as_float_array(per_prompt, "per_prompt", allow_empty=True)
    if values.ndim != 1 or values.size != len(prompt_ids):
        raise ValueError(f"per_prompt has shape {values.shape} but prompt_ids has {len(prompt_ids)} entries")
    index = {str(i): k for k, i in enumerate(prompt_ids)}
    known = [index[str(i)] for i in dict.fromkeys(tail_ids) if str(i) in index]
    if not known:
        raise ValueError("none of the tail ids is among the suite's prompts")
    options["bounds"] = (0.0, 1.0)
    return mean_interval(values[known], **options)


@dataclass(frozen=True)
class _Suite:
    """What :func:`suite_intervals` reads, and the interval of each kind of statistic on it."""

    quality: Array
    originality: Mapping[int, ArrayLike]
    per_prompt: Mapping[str, Sequence[float]] | None
    prompt_ids: Sequence[str] | None
    tails: Mapping[str, Sequence[str]] | None
    uniqueness: Mapping[int, ArrayLike] | None
    options: Options
    """The confidence, resamples and seed of every interval."""

    def mean(self, values: ArrayLike, bounds: tuple[float, float] = (0.0, 1.0)) -> Interval:
        return mean_interval(values, **self.options | Options(bounds=bounds))

    def share(self, mask: ArrayLike) -> Interval:
        return share_interval(mask, confidence=self.options["confidence"])

    def generations(self, name: str) -> Array:
        """The per-generation values ``name`` averages (:func:`.table.values_of`), of quality's shape."""
        arg = name.partition("@")[2]
        if family(name).argument == "n" and (not arg.isdigit() or int(arg) not in self.originality):
            raise ValueError(f"{name}: no originality at that n-gram order")
        values = rows_of(np.asarray(values_of(name, self.quality, self.originality, self.uniqueness)), name)
        if values.shape != self.quality.shape:
            raise ValueError(f"{name} has shape {values.shape}, quality {self.quality.shape}")
        return values

    def series(self, name: str, key: str) -> Array:
        """The per-prompt series ``key`` that ``name`` averages."""
        if self.per_prompt is None or key not in self.per_prompt:
            raise ValueError(f"{name} needs the per-prompt {key}")
        return np.asarray(self.per_prompt[key], dtype=float)

    def on_tail(self, name: str, key: str) -> Interval:
        """The interval of the per-prompt series ``key`` over the frozen tail (or peak) of ``name``,
        undefined for an empty one; ``ValueError`` without the series or the ids."""
        self.series(name, key)
        if self.per_prompt is None or self.prompt_ids is None or self.tails is None or name not in self.tails:
            raise ValueError(f"{name} needs the prompt ids and its {family(name).subset} ids")
        if not self.tails[name]:
            return Interval(math.nan, math.nan, self.options["confidence"], 0, "studentized")
        return tail_interval(self.per_prompt[key], self.prompt_ids, self.tails[name], **self.options)


def _interval(suite: _Suite, name: str) -> Interval:
    """The interval of ``name``'s statistic, read off its family (:mod:`.table`): a mean of the per-prompt
    series it pairs on, over a frozen tail or peak or over every prompt (NoveltyBench's values and Novelty
    Overall); else a statistic of every generation, Wilson's interval of a share, the bootstrap's of a top
    fraction or a mean, clipped to the family's range (distinct_k's top: the samples; a Creativity Index's:
    its number of lengths)."""
    fam = family(name)
    if fam.subset is not None:
        return suite.on_tail(name, fam.paired_on(name))
    if fam.per_prompt_only or fam.name == "novelty_overall":
        high = float(suite.quality.shape[1]) if fam.high is None else fam.high
        return suite.mean(suite.series(name, fam.paired_on(name)), (fam.low, high))
    values = suite.generations(name)
    if fam.share:
        return share_interval(values, confidence=suite.options["confidence"])
    if fam.top_fraction is not None:
        return top_fraction_interval(values, fam.top_fraction, **suite.options)
    return suite.mean(values, (fam.low, float(len(suite.uniqueness or ())) if fam.high is None else fam.high))


def suite_intervals(
    *,
    quality: ArrayLike,
    originality: Mapping[int, ArrayLike],
    metrics: Sequence[str],
    per_prompt: Mapping[str, Sequence[float]] | None = None,
    prompt_ids: Sequence[str] | None = None,
    tails: Mapping[str, Sequence[str]] | None = None,
    confidence: float = 0.95,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    uniqueness: Mapping[int, ArrayLike] | None = None,
) -> dict[str, Interval]:
    """The interval of every metric in ``metrics``, for the statistic :mod:`.suite` gates.

    Inputs are those of :func:`pytest_novelty.metrics.suite.suite_metrics` (quality and originality
    by n as prompts × samples arrays) and, for ``distinct_k``, ``utility_k``, ``q_at_tail@α``,
    ``novelty_overall`` and ``novelty_at_peak@α``, its per-prompt values, the prompt ids and each
    q@Tail metric's tail ids and Novelty at Peak metric's peak ids (the frozen tail, when the gate
    has chosen one; an empty tail gives an undefined interval), and for ``uniqueness@L`` and
    ``creativity_index`` the per-generation ``uniqueness`` at every L of the suite's range. Shares
    use Wilson's interval, everything else the studentized bootstrap, all with the same ``seed``, so
    a rerun gives the same intervals. Raises ``ValueError`` for a metric it has no statistic for or inputs it lacks.
    """
    options = Options(confidence=check_confidence(confidence), n_boot=n_boot, seed=seed)
    suite = _Suite(rows_of(quality, "quality"), originality, per_prompt, prompt_ids, tails, uniqueness, options)
    out: dict[str, Interval] = {}
    for name in metrics:
        if name.partition("@")[0] not in FAMILIES:
            raise ValueError(f"no interval is defined for metric {name!r}")
        out[name] = _interval(suite, name)
    return out
