"""A comparison's verdict (:class:`Comparison`): its status, the numbers behind it and its words, as
:func:`pytest_novelty.gate.regression.compare` decides them and every reader takes them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

STATUSES = ("same", "improved", "within_tolerance", "not_significant", "regressed")

_VERDICT_WORDS = {
    "same": "unchanged",
    "improved": "improvement",
    "within_tolerance": "within tolerance",
    "not_significant": "drop not significant (passes with a warning)",
    "regressed": "regression",
}


class NoveltyDriftWarning(UserWarning):
    """A metric moved the bad way but passed: within tolerance, or not significant."""


@dataclass(frozen=True)
class Comparison:
    """The verdict of :func:`~pytest_novelty.gate.regression.compare`: a :data:`STATUSES` and its numbers.

    ``accepted_value`` is the value the candidate is compared with (the snapshot's, the baseline
    checkpoint's, the references', an earlier checkpoint's; ``against`` says which, in the words the
    terminal and the report use) and ``candidate_value`` the candidate's on the same prompts (for
    q@Tail: on the accepted tail). ``delta`` is candidate − accepted (NaN when either is missing);
    ``delta_ci`` bounds the change of the gated statistic at level 1 − α and ``p_value`` is the paired
    test's, both None when no test ran; ``n_pairs`` counts the prompts the test used; ``test`` names
    the test and the statistic it compared ("" when none ran).
    """

    status: str
    accepted_value: float | None
    candidate_value: float | None
    tolerance: float
    delta_ci: tuple[float, float] | None
    p_value: float | None
    n_pairs: int
    message: str
    suite: str = ""
    metric: str = ""
    alpha: float = 0.05
    test: str = ""
    against: str = "snapshot"

    @property
    def delta(self) -> float:
        """Candidate − accepted; NaN when either value is missing."""
        if self.accepted_value is None or self.candidate_value is None:
            return math.nan
        return self.candidate_value - self.accepted_value

    @property
    def passed(self) -> bool:
        """Everything but a regression passes."""
        return self.status != "regressed"

    @property
    def warning(self) -> bool:
        """A drop that passed: within tolerance or not significant; worth a line in the output."""
        return self.status in ("within_tolerance", "not_significant")

    @property
    def verdict(self) -> str:
        """The status in words, as the message ends."""
        return _VERDICT_WORDS[self.status]

    def with_message(self, note: str = "", extra: str = "") -> Comparison:
        """The comparison with its one-line message written from its numbers: ``suite metric: accepted
        -> candidate (delta, tolerance, CI, p-value, test)``, then ``note``, the verdict and ``extra``."""
        parts = [_format_delta(self.delta), f"tolerance {self.tolerance:.4f}"]
        if self.delta_ci is not None:
            parts.append(f"{100 * (1 - self.alpha):g}% CI [{self.delta_ci[0]:.4f}, {self.delta_ci[1]:.4f}]")
        if self.p_value is not None:
            parts.append(_p_phrase(self.p_value))
        if self.test:
            parts.append(self.test)
        values = f"{_format_value(self.accepted_value)} -> {_format_value(self.candidate_value)}"
        return replace(self, message=f"{self.suite} {self.metric}: {values} ({', '.join(parts)}){note}: "
                                     f"{self.verdict}{extra}")  # fmt: skip

    def lines(self) -> list[str]:
        """The comparison as three short lines, for a failure's explanation.

        Kept short on purpose: pytest truncates assertion explanations beyond 8 lines outside CI.
        """
        confidence = f"{100 * (1 - self.alpha):g}%"
        ci = f"[{self.delta_ci[0]:+.4f}, {self.delta_ci[1]:+.4f}]" if self.delta_ci else "n/a"
        p = _format_p(self.p_value) if self.p_value is not None else "n/a"
        return [
            f"{self.suite} {self.metric}: {self.verdict}",
            f"  {self.against} value {_format_value(self.accepted_value)}, new value "
            f"{_format_value(self.candidate_value)}, delta {_format_delta(self.delta)}, "
            f"tolerance {self.tolerance:.4f}",
            f"  {confidence} CI {ci} over {self.n_pairs} paired prompts, p-value {p} (alpha {self.alpha:g}"
            + (f"; {self.test})" if self.test else ")"),
        ]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None); :meth:`from_json` reads it back. ``delta`` and
        ``verdict`` are derived and written for readers of the file; they are not read back."""
        return {
            "against": self.against, "status": self.status, "verdict": self.verdict,
            "accepted_value": finite(self.accepted_value), "candidate_value": finite(self.candidate_value),
            "delta": finite(self.delta), "tolerance": finite(self.tolerance),
            "delta_ci": None if self.delta_ci is None else [finite(b) for b in self.delta_ci],
            "p_value": finite(self.p_value), "n_pairs": self.n_pairs, "alpha": self.alpha, "test": self.test,
            "message": self.message, "suite": self.suite, "metric": self.metric,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Comparison:
        """The comparison :meth:`to_json` wrote; ``ValueError`` naming the field on anything else."""
        try:
            status = str(data["status"])
            if status not in STATUSES:
                raise ValueError(f"status {status!r} is none of {', '.join(STATUSES)}")
            ci = data.get("delta_ci")
            return cls(
                status=status, accepted_value=_optional_float(data.get("accepted_value")),
                candidate_value=_optional_float(data.get("candidate_value")),
                tolerance=float(data.get("tolerance") or 0.0),
                delta_ci=None if ci is None else (  # a bound JSON cannot hold is no bound (too few prompts)
                    -math.inf if ci[0] is None else float(ci[0]), math.inf if ci[1] is None else float(ci[1])),
                p_value=_optional_float(data.get("p_value")), n_pairs=int(data.get("n_pairs") or 0),
                message=str(data.get("message") or ""), suite=str(data.get("suite") or ""),
                metric=str(data.get("metric") or ""), alpha=float(data.get("alpha", 0.05)),
                test=str(data.get("test") or ""), against=str(data.get("against") or "snapshot"),
            )  # fmt: skip
        except (KeyError, TypeError, IndexError) as exc:
            raise ValueError(f"malformed comparison: {exc!r}") from None


def finite(value: float | None) -> float | None:
    """None for a missing or non-finite number, else the float (JSON has no NaN)."""
    return None if value is None or not math.isfinite(float(value)) else float(value)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _format_value(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def _format_delta(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.4f}"


def _format_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return "< 0.0001" if p < 0.0001 else f"{p:.4f}"


def _p_phrase(p: float) -> str:
    """``p = 0.0123`` or ``p < 0.0001``, as a sentence would say it."""
    text = _format_p(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"
