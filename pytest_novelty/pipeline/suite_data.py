"""A suite's exported data, typed: what the report, the terminal and the trackers read of a suite run
beside its case records.

:func:`pytest_novelty.pipeline.export.suite_data` builds a :class:`SuiteData` from a suite's result;
it crosses from an xdist worker to the controller as :meth:`SuiteData.to_json` and is read back with
:meth:`SuiteData.from_json`, and ``report.json`` keeps its parts (the arrays under ``candidate`` and
``baseline``, ``info``, ``metrics``, ``shares``, ``detectable``, ``series``). Readers take its fields,
never string keys. NaN is None in every array (JSON has no NaN).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

__all__ = ["GenerationArrays", "RoundWork", "SuiteData", "SuiteInfo", "grid"]

Grid = list[list[float | None]]
"""Per-generation values, prompts × samples; None: no value (unscored, or no n-gram of the order)."""


def grid(values: Any) -> Grid:
    """Per-generation values (an array, or JSON's lists) as JSON holds them: NaN becomes None."""
    return [[None if v is None or math.isnan(float(v)) else float(v) for v in row]
            for row in ([] if values is None else values)]  # fmt: skip


def _number(value: Any) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else float(value)


@dataclass(frozen=True)
class GenerationArrays:
    """One checkpoint's per-generation values on one suite at the order the suite gates on:
    quality, originality as measured (None: too short for an n-gram), novelty as the gate counts it
    (a too-short generation at 0), the shares the gate reports (``coverage@n``, ``unscored``) and
    which model it was (for a baseline)."""

    quality: Grid
    originality: Grid
    novelty: Grid
    shares: dict[str, float | None] = field(default_factory=dict)
    model: str = ""

    @property
    def answers(self) -> int:
        """How many answers the arrays hold."""
        return sum(len(row) for row in self.quality)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"quality": self.quality, "originality": self.originality, "novelty": self.novelty,
                               "shares": dict(self.shares)}  # fmt: skip
        if self.model:
            out["model"] = self.model
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GenerationArrays:
        shares = {str(k): _number(v) for k, v in dict(data.get("shares") or {}).items()}
        return cls(grid(data.get("quality")), grid(data.get("originality")), grid(data.get("novelty")), shares,
                   str(data.get("model") or ""))  # fmt: skip


@dataclass(frozen=True)
class RoundWork:
    """What one more set of samples of a suite generated: a ``--novelty-repeat`` repeat or a
    ``--novelty-adaptive`` round (``index`` 1 for the first after the run itself)."""

    index: int
    generated_rows: int
    cached_rows: int

    def to_json(self) -> dict[str, int]:
        return {"repeat": self.index, "generated_rows": self.generated_rows, "cached_rows": self.cached_rows}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundWork:
        return cls(int(data["repeat"]), int(data["generated_rows"]), int(data["cached_rows"]))


@dataclass(frozen=True)
class SuiteInfo:
    """What a suite run was measured with and what it did: ``report.json``'s ``info`` of the suite.

    The model and its content identity, the generation work (rows generated, from the cache, read
    from answer files; batches, tokens, where), the judge, the originality index and units, the
    seconds each step took, the longest spans copied from the corpus (and the passages copied by the
    answers with the lowest Creativity Index, when it is gated), the unscored answers' reasons,
    the judge's agreement with people and its consistency with itself, and a denial round's
    forbidden concepts.
    """

    model: str = ""
    model_path: str = ""
    identity_id: str = ""
    identity: str = ""
    samples: int = 0
    generated_batches: int = 0
    generated_rows: int = 0
    cached_rows: int = 0
    read_rows: int = 0
    read_from: str = ""
    tokens: int = 0
    tokens_per_second: float = 0.0
    worker: str = ""
    device: str = ""
    sweep: dict[str, Any] | None = None
    judge: str = ""
    originality: str = ""
    units: str = ""
    prompts: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    longest_copied: list[dict[str, Any]] = field(default_factory=list)
    creativity_copied: list[dict[str, Any]] = field(default_factory=list)
    originality_lookups: int = 0
    judge_requests: int = 0
    unscored_reasons: list[list[Any]] = field(default_factory=list)
    cache_repaired: int = 0
    answers_note: str = ""
    judge_agreement: dict[str, Any] | None = None
    judge_consistency: dict[str, Any] | None = None
    round: int | None = None
    forbidden: dict[str, int] | None = None
    forbidden_concepts: dict[str, list[str]] | None = None

    def to_json(self) -> dict[str, Any]:
        """Every field, the optional ones only when set (``report.json`` keeps the layout it had)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("answers_note", "judge_agreement", "judge_consistency", "round", "forbidden",
                     "forbidden_concepts", "creativity_copied"):  # fmt: skip
            if out[name] in (None, "", []):
                del out[name]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SuiteInfo:
        """The info :meth:`to_json` wrote; keys it does not know are left out."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class SuiteData:
    """One suite run's exported data: the n-gram order ``n`` of the arrays, the candidate's arrays,
    its :class:`SuiteInfo`, every value the metrics step computed (gated or not), what a comparison
    can detect per gated metric, the baseline's arrays when one was compared, what repeats and
    adaptive rounds generated, and the series (one entry per checkpoint, in step order, as
    :func:`pytest_novelty.gate.series.series_entries` makes them) once it is put together."""

    n: int
    candidate: GenerationArrays
    info: SuiteInfo
    metrics: dict[str, float | None] = field(default_factory=dict)
    detectable: dict[str, dict[str, Any]] = field(default_factory=dict)
    baseline: GenerationArrays | None = None
    repeats: tuple[RoundWork, ...] = ()
    adaptive: tuple[RoundWork, ...] = ()
    series: tuple[dict[str, Any], ...] = ()

    @property
    def shares(self) -> dict[str, float | None]:
        return self.candidate.shares

    def with_(self, **changes: Any) -> SuiteData:
        """A copy with ``changes`` (the repeats', the rounds' or the series' parts, once known)."""
        return replace(self, **changes)

    def redacted(self) -> SuiteData:
        """The data with every credential redacted from its text (model paths, messages)."""
        from pytest_novelty.infra.redact import redact_data

        return SuiteData.from_json(redact_data(self.to_json()))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"n": self.n, **self.candidate.to_json(), "info": self.info.to_json(),
                               "metrics": dict(self.metrics), "detectable": dict(self.detectable)}  # fmt: skip
        if self.baseline is not None:
            out["baseline"] = self.baseline.to_json()
        if self.repeats:
            out["repeats"] = [r.to_json() for r in self.repeats]
        if self.adaptive:
            out["adaptive"] = [r.to_json() for r in self.adaptive]
        if self.series:
            out["series"] = list(self.series)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SuiteData:
        """The data :meth:`to_json` wrote (what an xdist worker sent)."""
        baseline = data.get("baseline")
        return cls(
            n=int(data["n"]),
            candidate=GenerationArrays.from_json(data),
            info=SuiteInfo.from_json(dict(data.get("info") or {})),
            metrics={str(k): _number(v) for k, v in dict(data.get("metrics") or {}).items()},
            detectable={str(k): dict(v) for k, v in dict(data.get("detectable") or {}).items()},
            baseline=None if baseline is None else GenerationArrays.from_json(baseline),
            repeats=tuple(RoundWork.from_json(r) for r in data.get("repeats") or ()),
            adaptive=tuple(RoundWork.from_json(r) for r in data.get("adaptive") or ()),
            series=tuple(dict(e) for e in data.get("series") or ()),
        )


def sweep_points(data: Sequence[SuiteData]) -> dict[tuple[str, str], list[SuiteData]]:
    """The swept suite runs among ``data``, grouped by their suite file and swept parameter."""
    groups: dict[tuple[str, str], list[SuiteData]] = {}
    for one in data:
        sweep = one.info.sweep
        if sweep:
            groups.setdefault((str(sweep["suite"]), str(sweep["parameter"])), []).append(one)
    return groups
