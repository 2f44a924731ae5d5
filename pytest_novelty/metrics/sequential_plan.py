"""The plan of a group-sequential test: the error each look may spend, and the boundaries that spend it.

:mod:`.sequential` holds the rule that reads a case's Z against these boundaries, and why it is valid.

**The design.** A group-sequential test with α-spending (Lan and DeMets, "Discrete sequential
boundaries for clinical trials", Biometrika 70(3), 1983), two-sided and symmetric, with the
Pocock-type spending function α(t) = α·ln(1 + (e − 1)·t) (same paper); the O'Brien-Fleming-type is
offered too (``spending="obrien-fleming"``). Each side spends α/2 by the one-sided function, as
gsDesign and ldbounds do for symmetric designs: for the O'Brien-Fleming-type each side spends
2 − 2Φ(z₁₋α/₄ / √t); for the Pocock-type, linear in α, this is the same as spending α(t) on both
sides together. The information time of look k is t_k = k / K, K the looks the budget allows (the
first pass included): every round adds the same number of samples per prompt.

**Why not a confidence sequence.** An anytime-valid confidence sequence (Howard, Ramdas,
McAuliffe and Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", Annals of
Statistics 49(2), 2021) allows unlimited looks and an open horizon; ours are few (the budget caps
them) and known beforehand, and a sequence pays for the horizon it does not use with a wider final
boundary. Its guarantees also assume independent increments, which rounds on shared prompts are not.

**Why Pocock-type.** The first look is the first pass itself. O'Brien-Fleming-type spends almost
nothing there (c_1 ≈ 4.9 for 5 looks at α = 0.05), so nearly every case, clear or not, would draw a
second round; the Pocock-type boundary is nearly flat (≈ 2.44 … 2.39 for 5 looks) and decides a clear
case at once, spending samples only on the unsure ones. The price is a last boundary above 1.96.

**The boundaries** are computed by the recursive numerical integration of Armitage, McPherson and
Rowe ("Repeated significance tests on accumulating data", JRSS A 132(2), 1969), as Jennison and
Turnbull (*Group Sequential Methods with Applications to Clinical Trials*, 2000, ch. 19) set it out:
the sub-density of the score S_k = Z_k·√t_k on the continuation region is carried from look to look
by the Gaussian increment N(0, t_k − t_{k−1}) on a grid, and c_k is the root of P(first crossing at
look k) = α(t_k) − α(t_{k−1}) (bisection). The tests check them against published values.

**On Student's t.** SE_k is estimated from G prompts, so the boundary is read on Student's t with
G − 1 degrees of freedom: c_k' = t⁻¹_{G−1}(Φ(c_k)) (a q@Tail case has 10 prompts, where z would be
too narrow).

**A plan of any size.** Lan-DeMets boundaries of looks 1 … k need only t_1 … t_k, so the rule
computes those of the looks it has taken and never the whole plan's: a budget of 10²⁰ samples plans
as fast as one of 600 (:meth:`SequentialPlan.critical` takes the number of looks). A huge budget is
still not free: each early look spends almost nothing (c_1 ≈ 9.03 for 5·10¹⁷ looks at α = 0.05), so
only a very clear case is decided by its first pass. The tail probabilities of the integration are
computed as such (Φ(−x), not 1 − Φ(x)), so a look that spends 10⁻¹⁹ gets its finite boundary.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pytest_novelty.metrics._validate import check_confidence, check_count

Array = NDArray[np.float64]

SPENDING = ("pocock", "obrien-fleming")

# Grid points per look for the numerical integration, and the standard deviations of the score the
# grid spans beyond a boundary (probability beyond it below 1e-15).
_GRID = 801
_TAIL_SDS = 8.0


def _normal_cdf(x: Array | float) -> Array:
    from scipy import special

    return np.asarray(special.ndtr(x), dtype=float)


def _normal_quantile(p: float) -> float:
    from scipy import special

    return float(special.ndtri(p))


def spent(alpha: float, t: float, spending: str = "pocock") -> float:
    """α(t): the two-sided error spent by information time t ∈ [0, 1], both sides together (module doc)."""
    if t <= 0.0:
        return 0.0
    t = min(t, 1.0)
    if spending == "pocock":
        return alpha * math.log1p((math.e - 1.0) * t)  # log1p: exact for the tiny t of a huge plan
    if spending == "obrien-fleming":  # each side α/2 by the one-sided function (module doc)
        return float(4.0 * _normal_cdf(-_normal_quantile(1.0 - alpha / 4.0) / math.sqrt(t)))
    raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {spending!r}")


def _exit_probability(grid: Array, density: Array, step: float, bound: float, sd: float) -> float:
    """P(|S_k| ≥ bound) from the sub-density on ``grid`` carried by an increment of sd ``sd``."""
    beyond = _normal_cdf((-bound - grid) / sd) + _normal_cdf((grid - bound) / sd)  # both tails as tails
    return float(np.trapezoid(density * beyond, dx=step))


@functools.lru_cache(maxsize=64)
def _boundaries(fractions: tuple[float, ...], alpha: float, spending: str) -> tuple[float, ...]:
    out: list[float] = []
    grid: Array | None = None
    density: Array | None = None
    step = 0.0
    previous_t, previous_spent = 0.0, 0.0
    for t in fractions:
        target = spent(alpha, t, spending) - previous_spent
        if target <= 0.0:
            out.append(math.inf)
            continue
        if grid is None or density is None:  # the first look that spends: S ~ N(0, t)
            c = -_normal_quantile(target / 2.0)
            bound = c * math.sqrt(t)
            grid = np.linspace(-bound, bound, _GRID)
            step = float(grid[1] - grid[0])
            density = np.exp(-(grid**2) / (2.0 * t)) / math.sqrt(2.0 * math.pi * t)
        else:
            sd = math.sqrt(t - previous_t)
            # Above this the exit probability is far below the target: the increment alone would
            # have to travel beyond its own target quantile and _TAIL_SDS more standard deviations.
            low, high = 0.0, float(abs(grid[-1])) + sd * (_TAIL_SDS - _normal_quantile(target / 4.0))
            for _ in range(100):  # bisection on the boundary of S_k: the exit probability falls as it rises
                middle = (low + high) / 2.0
                if _exit_probability(grid, density, step, middle, sd) > target:
                    low = middle
                else:
                    high = middle
            bound = (low + high) / 2.0
            c = bound / math.sqrt(t)
            new_grid = np.linspace(-bound, bound, _GRID)
            gap = new_grid[:, None] - grid[None, :]
            kernel = np.exp(-(gap**2) / (2.0 * sd * sd)) / (sd * math.sqrt(2.0 * math.pi))
            density = np.asarray(np.trapezoid(kernel * density[None, :], dx=step, axis=1), dtype=float)
            grid, step = new_grid, float(new_grid[1] - new_grid[0])
        out.append(c)
        previous_t, previous_spent = t, previous_spent + target
    return tuple(out)


def boundaries(fractions: Sequence[float], alpha: float, spending: str = "pocock") -> Array:
    """The two-sided boundaries c_1 … c_k (on the z scale) of looks at information times ``fractions``
    (increasing, in (0, 1]) for a total two-sided ``alpha`` (module doc); inf where a look spends
    nothing. Lan-DeMets needs only the looks so far, so a plan's later looks do not change them."""
    times = tuple(float(t) for t in fractions)
    if not times or any(not 0.0 < t <= 1.0 for t in times) or any(b <= a for a, b in itertools.pairwise(times)):
        raise ValueError(f"fractions must increase within (0, 1], got {list(times)}")
    level = check_confidence(alpha, "alpha")
    return np.array(_boundaries(times, level, spending))  # an unknown spending function: spent() says so


@dataclass(frozen=True)
class SequentialPlan:
    """A case's sequential plan: the suite's two-sided ``alpha``, the ``looks`` its budget allows (the
    first pass and every extra round of the same size: K = 1 + extra rounds), the spending function,
    and whether a case may stop for futility (:mod:`.sequential`). Nothing here grows with ``looks``:
    the boundaries are computed for the looks asked for only."""

    alpha: float
    looks: int
    spending: str = "pocock"
    futility: bool = False

    def __post_init__(self) -> None:
        check_count(self.looks, "looks")
        boundaries([1.0], self.alpha, self.spending)  # checks alpha and the spending function

    def boundaries(self, looks: int | None = None) -> Array:
        """c_1 … c_k on the z scale for the first ``looks`` looks (all of them by default: a cost that
        grows with the plan, which the rule itself never asks for)."""
        count = self.looks if looks is None else looks
        if not 1 <= count <= self.looks:
            raise ValueError(f"{count} looks for a plan of {self.looks}")
        return boundaries([(k + 1) / self.looks for k in range(count)], self.alpha, self.spending)

    def critical(self, clusters: int, looks: int | None = None) -> Array:
        """The first ``looks`` boundaries (all by default) on Student's t scale with ``clusters`` − 1
        degrees of freedom (module doc)."""
        c = self.boundaries(looks)
        if clusters < 2:
            return np.full(c.shape, math.inf)
        return -self.quantile(clusters, _normal_cdf(-c))  # by the lower tail: Φ(9) rounds to 1

    @staticmethod
    def quantile(clusters: int, p: ArrayLike) -> Array:
        """Student's t quantile t⁻¹_{G−1}(p), G = ``clusters`` (inf below two clusters: no SE to read)."""
        from scipy import special

        probability = np.asarray(p, dtype=float)
        if clusters < 2:
            return np.full(probability.shape, math.inf)
        return np.asarray(special.stdtrit(clusters - 1, probability), dtype=float)

    def floor(self, clusters: int) -> float:
        """q = t⁻¹_{G−1}(1 − α/2): no boundary of the plan on the t scale lies below it (:mod:`.sequential`)."""
        return float(self.quantile(clusters, 1.0 - self.alpha / 2.0))
