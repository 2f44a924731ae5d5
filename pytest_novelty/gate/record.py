"""The case record: one case as it was decided, typed from the decision to every reader.

:func:`pytest_novelty.gate.case.decide` returns a :class:`CaseRecord`; the front ends stamp it with
the outcome pytest (or the command line) gave the case (:meth:`CaseRecord.with_outcome`), and every
reader takes it as it is: the terminal table and ``report.md`` (:mod:`pytest_novelty.report`),
``report.json`` (written from :meth:`CaseRecord.to_json`, read back with :meth:`CaseRecord.from_json`),
JUnit properties and pytest-html, the trackers, the Trainer callback and the series. What a record
knows about itself (whether its threshold was met, the words of its verdict, its cells) is a method
here, so no renderer decides anything.

Outcomes (:data:`OUTCOMES`): ``passed`` and ``failed`` are verdicts; ``error`` is a case that reached
no verdict (a harness error, a crashed worker); ``skipped`` a case pytest skipped; ``deferred`` a
case of a shard run (``--novelty-shard``), which does its part of the work and leaves the verdict to
the merge run: neither a pass nor a failure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pytest_novelty.gate.adaptive import Adaptive
from pytest_novelty.gate.comparison import Comparison

__all__ = ["OUTCOMES", "CaseRecord", "Repeats", "TailUsed"]

#: What a case can end as; the first two are verdicts.
OUTCOMES = ("passed", "failed", "error", "skipped", "deferred")


def _number(value: Any) -> float | None:
    """A finite float, else None (JSON has no NaN)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def _pair(value: Any) -> tuple[float, float] | None:
    """``[low, high]`` as a tuple of floats (a bound JSON could not hold, null, is NaN: an interval
    too few prompts left undefined), None when there is no interval."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    low, high = (math.nan if b is None else float(b) for b in value)
    return (low, high)


@dataclass(frozen=True)
class TailUsed:
    """The frozen tail a q@Tail case was judged on: its words (``snapshot's tail, 10 prompts``),
    where it came from (``baseline``, ``snapshot``, ``suite file``, ``candidate``) and its prompt ids
    (a series measures every checkpoint on them)."""

    description: str
    source: str
    ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"description": self.description, "source": self.source, "ids": list(self.ids)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TailUsed:
        return cls(str(data["description"]), str(data["source"]), tuple(str(i) for i in data.get("ids") or ()))


@dataclass(frozen=True)
class Repeats:
    """How a case fared on ``--novelty-repeat`` N independent sets of samples, repeat 0 (the one
    that decides) first: each repeat's value (None where none was computed) and whether it passed."""

    values: tuple[float | None, ...]
    passed: tuple[bool, ...]

    @property
    def pass_rate(self) -> float:
        return sum(self.passed) / len(self.passed) if self.passed else math.nan

    @property
    def spread(self) -> tuple[float, float, float] | None:
        """(lowest, median, highest) of the values computed, None when none was."""
        found = [v for v in self.values if v is not None]
        return (min(found), statistics.median(found), max(found)) if found else None

    def note(self) -> str:
        """``; 2 of 3 repeats pass (0.3301 .. 0.3452)``."""
        spread = self.spread
        span = f" ({spread[0]:.4f} .. {spread[2]:.4f})" if spread else ""
        return f"; {sum(self.passed)} of {len(self.passed)} repeats pass{span}"

    def to_json(self) -> dict[str, Any]:
        spread = self.spread
        return {"values": list(self.values), "passed": list(self.passed), "pass_rate": self.pass_rate,
                "spread": None if spread is None else list(spread)}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Repeats:
        values, passed = data.get("values") or (), data.get("passed") or ()
        return cls(tuple(_number(v) for v in values), tuple(bool(p) for p in passed))


@dataclass(frozen=True)
class CaseRecord:
    """One (suite, metric, threshold) case of a run, decided once.

    ``value`` is the value decided on (for q@Tail on the frozen tail; after a comparison the compared
    value, so value − accepted value = delta); None where it could not be computed. ``ci`` is its
    interval at ``confidence`` (None where none was computed), ``within_noise`` whether that interval
    contains the bound, ``mode`` the threshold mode that decided and ``threshold_passed`` whether the
    threshold alone passed as that mode read it (None: the case never got that far). ``failures`` are
    the reasons it failed, a line each; ``message`` the threshold's verdict in words (or the reason
    that replaced it, or the harness error). ``comparison`` is the regression check, when one ran
    (``comparison.against`` says against what); ``snapshot_written`` says the run accepted the
    candidate as the new snapshot instead (then nothing was compared). ``outcome`` is one of
    :data:`OUTCOMES`.
    """

    suite: str
    metric: str
    op: str | None
    threshold: float | None
    value: float | None
    outcome: str
    message: str = ""
    failures: tuple[str, ...] = ()
    header: str = ""
    ci: tuple[float, float] | None = None
    confidence: float | None = None
    within_noise: bool | None = None
    mode: str = "point"
    threshold_passed: bool | None = None
    tail: TailUsed | None = None
    comparison: Comparison | None = None
    snapshot_written: bool = False
    judge_agreement: str | None = None
    warnings: tuple[str, ...] = ()
    repeats: Repeats | None = None
    adaptive: Adaptive | None = None
    """With ``--novelty-adaptive``: how the sequential rule ended the threshold (its rounds and looks)."""
    regression_adaptive: Adaptive | None = None
    """With ``--novelty-adaptive``: how the paired sequential rule ended the comparison with a baseline
    checkpoint or the snapshot (None where no such comparison was made)."""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"a case's outcome is one of {', '.join(OUTCOMES)}, not {self.outcome!r}")

    # -- what the case is ------------------------------------------------------------------------

    @classmethod
    def error(cls, suite: str, metric: str, op: str | None, threshold: float | None, message: str) -> CaseRecord:
        """A case that reached no verdict: the harness failed (or its worker crashed) before it was decided."""
        return cls(suite, metric, op, threshold, None, "error", message)

    def with_outcome(self, outcome: str, message: str | None = None) -> CaseRecord:
        """The record as the front end ended the case (pytest's outcome, a crash's message)."""
        return replace(self, outcome=outcome, message=self.message if message is None else message)

    @property
    def label(self) -> str:
        """``novelty@5>=0.3``: the threshold's label, as in the case's id."""
        return self.metric if self.op is None or self.threshold is None else f"{self.metric}{self.op}{self.threshold:g}"

    @property
    def bound(self) -> str:
        """The threshold as written, ``>= 0.3``; ``""`` for a case without one."""
        return "" if self.op is None or self.threshold is None else f"{self.op} {self.threshold:g}"

    @property
    def passed(self) -> bool:
        """Whether the case passed (a skipped case counts as passed: it failed nothing)."""
        return self.outcome in ("passed", "skipped")

    @property
    def is_error(self) -> bool:
        """Whether the case reached no verdict (harness error, crashed worker)."""
        return self.outcome == "error"

    @property
    def failed(self) -> bool:
        """Whether the case failed its gate (a verdict, not a harness error)."""
        return self.outcome == "failed"

    @property
    def met(self) -> bool:
        """Whether the threshold passed, as the case decided it (its mode may read the interval);
        for a record without that decision, whether the value meets the bound (NaN never does)."""
        if self.threshold_passed is not None:
            return self.threshold_passed
        if self.op is None or self.threshold is None:
            return True
        if self.value is None:
            return False
        return self.value >= self.threshold if self.op == ">=" else self.value <= self.threshold

    @property
    def compared(self) -> Comparison | None:
        """The comparison the case was decided with (None when none ran or a snapshot was written)."""
        return None if self.snapshot_written else self.comparison

    @property
    def status(self) -> str | None:
        """The comparison's status (one of :data:`~pytest_novelty.gate.comparison.STATUSES`), if any."""
        compared = self.compared
        return None if compared is None else compared.status

    @property
    def regressed(self) -> bool:
        return self.status == "regressed"

    @property
    def drifted(self) -> bool:
        """Whether the case passed its comparison while moving the bad way (worth a line under the table)."""
        return self.compared is not None and self.compared.warning

    # -- its words ------------------------------------------------------------------------------

    def metric_cell(self) -> str:
        """The metric's name, with the tail it was judged on for q@Tail cases."""
        return f"{self.metric} ({self.tail.description})" if self.tail else self.metric

    def value_text(self) -> str:
        return "n/a" if self.value is None else f"{self.value:.4f}"

    def ci_text(self) -> str:
        """The value's interval, ``[0.290, 0.388]``; empty where none was computed, ``n/a`` where it
        is undefined (too few prompts)."""
        if self.ci is None:
            return ""
        if not all(math.isfinite(b) for b in self.ci):
            return "n/a"
        return f"[{self.ci[0]:.3f}, {self.ci[1]:.3f}]"

    def repeats_note(self) -> str:
        """What repeats and adaptive rounds add to the verdict's words (``; 2 of 3 repeats pass``,
        ``; regression decided after 2 extra rounds``)."""
        return "".join([
            "" if self.repeats is None else self.repeats.note(), "" if self.adaptive is None else self.adaptive.note(),
            "" if self.regression_adaptive is None else self.regression_adaptive.note("regression"),
        ])  # fmt: skip

    def verdict_text(self) -> str:
        """What the verdict cell says: the threshold's outcome and the comparison's, FAIL first."""
        if self.is_error:
            return "ERROR (harness, no verdict)"
        notes = []
        noise = " (within noise)" if self.within_noise else ""
        if not self.met:
            notes.append(f"FAIL {self.bound}{noise}")
        elif noise:
            notes.append(f"pass{noise}")
        if self.regressed:
            notes.append("FAIL regression")
        elif self.compared is not None:
            notes.append(self.compared.verdict)
        elif self.snapshot_written:
            notes.append("snapshot written")
        if not self.passed and not any(note.startswith("FAIL") for note in notes):
            notes.insert(0, "FAIL")
        return ("; ".join(notes) or "pass") + self.repeats_note()

    def result_text(self) -> str:
        """The short result of a table without comparisons: ``pass``, ``FAIL``, ``ERROR`` (within noise)."""
        if self.is_error:
            return "ERROR"
        text = "pass" if self.passed else "FAIL"
        return text + (" (within noise)" if self.within_noise else "") + self.repeats_note()

    def comparison_text(self) -> str:
        """The comparison in words (``snapshot 0.4412, delta -0.1292, CI [-0.1586, -0.1010], p 0.0001,
        regression``), ``""`` when the case was compared with nothing."""
        compared = self.compared
        if compared is None:
            return "snapshot written" if self.snapshot_written else ""
        parts = []
        if compared.accepted_value is not None:
            parts.append(f"{compared.against} {compared.accepted_value:.4f}")
        if not math.isnan(compared.delta):
            parts.append(f"delta {compared.delta:+.4f}")
        if compared.delta_ci is not None:
            parts.append(f"CI [{compared.delta_ci[0]:+.4f}, {compared.delta_ci[1]:+.4f}]")
        if compared.p_value is not None:
            parts.append("p < 0.0001" if compared.p_value < 0.0001 else f"p {compared.p_value:.4f}")
        parts.append(compared.verdict)
        return ", ".join(parts)

    def reasons(self) -> list[str]:
        """Why the case failed or warned, a line each: the harness error, the threshold's message,
        the comparison's (empty for a clean pass)."""
        if self.is_error:
            return [self.message or "harness error"]
        found = []
        if not self.met and self.message:
            found.append(self.message)
        if self.compared is not None and (self.regressed or self.drifted):
            found.append(self.compared.message)
        if not found and not self.passed and self.message:
            found.append(self.message)
        return found

    def brief(self) -> dict[str, Any]:
        """The case in a few words, a tracker table's row: suite, metric, value, bound, outcome, the
        comparison in words and the message."""
        return {"suite": self.suite, "metric": self.metric, "value": _number(self.value), "bound": self.bound,
                "outcome": self.outcome, "comparison": self.comparison_text(), "message": self.message}  # fmt: skip

    def redacted(self) -> CaseRecord:
        """The record with every credential redacted from its text (messages, header, model paths),
        before it is shown, stored or sent (:func:`pytest_novelty.infra.redact.redact`)."""
        from pytest_novelty.infra.redact import redact_data

        return CaseRecord.from_json(redact_data(self.to_json()))

    # -- JSON -------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The record as JSON-ready data (NaN becomes None): a row of ``report.json`` and what crosses
        from an xdist worker. ``passed``, ``label`` and ``verdict`` are derived, written for readers
        of the file, and not read back."""
        return {
            "suite": self.suite, "metric": self.metric, "op": self.op, "threshold": self.threshold,
            "label": self.label, "value": _number(self.value),
            "outcome": self.outcome, "passed": self.passed, "verdict": self.verdict_text(),
            "message": self.message, "failures": list(self.failures), "header": self.header,
            "ci": None if self.ci is None else [_number(b) for b in self.ci], "confidence": self.confidence,
            "within_noise": self.within_noise, "mode": self.mode, "threshold_passed": self.threshold_passed,
            "tail": None if self.tail is None else self.tail.to_json(),
            "comparison": None if self.comparison is None else self.comparison.to_json(),
            "snapshot_written": self.snapshot_written, "judge_agreement": self.judge_agreement,
            "warnings": list(self.warnings),
            "repeats": None if self.repeats is None else self.repeats.to_json(),
            "adaptive": None if self.adaptive is None else self.adaptive.to_json(),
            "regression_adaptive": None if self.regression_adaptive is None else self.regression_adaptive.to_json(),
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseRecord:
        """The record :meth:`to_json` wrote; ``ValueError`` naming what is wrong on anything else."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a case record is a JSON object, not {type(data).__name__}")
        try:
            tail, comparison, repeats = data.get("tail"), data.get("comparison"), data.get("repeats")
            adaptive, paired = data.get("adaptive"), data.get("regression_adaptive")
            passed = data.get("threshold_passed")
            return cls(
                suite=str(data["suite"]), metric=str(data["metric"]),
                op=None if data.get("op") is None else str(data["op"]), threshold=_number(data.get("threshold")),
                value=_number(data.get("value")), outcome=str(data["outcome"]),
                message=str(data.get("message") or ""), failures=tuple(str(f) for f in data.get("failures") or ()),
                header=str(data.get("header") or ""), ci=_pair(data.get("ci")),
                confidence=_number(data.get("confidence")),
                within_noise=None if data.get("within_noise") is None else bool(data["within_noise"]),
                mode=str(data.get("mode") or "point"), threshold_passed=None if passed is None else bool(passed),
                tail=None if tail is None else TailUsed.from_json(tail),
                comparison=None if comparison is None else Comparison.from_json(comparison),
                snapshot_written=bool(data.get("snapshot_written", False)),
                judge_agreement=None if data.get("judge_agreement") is None else str(data["judge_agreement"]),
                warnings=tuple(str(w) for w in data.get("warnings") or ()),
                repeats=None if repeats is None else Repeats.from_json(repeats),
                adaptive=None if adaptive is None else Adaptive.from_json(adaptive),
                regression_adaptive=None if paired is None else Adaptive.from_json(paired),
            )  # fmt: skip
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed case record: {exc!r}") from None


def sort_key(record: CaseRecord) -> tuple[str, str, str]:
    """The order every table lists cases in: suite, metric, comparison sign."""
    return (record.suite, record.metric, record.op or "")


def by_suite(records: Sequence[CaseRecord]) -> dict[str, list[CaseRecord]]:
    """The records grouped by suite, suites sorted, each in :func:`sort_key` order."""
    out: dict[str, list[CaseRecord]] = {}
    for record in sorted(records, key=sort_key):
        out.setdefault(record.suite, []).append(record)
    return out
