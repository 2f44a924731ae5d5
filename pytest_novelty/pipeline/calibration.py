"""Judge calibration: how well a judge's scores agree with human grades of the same responses.

A calibration file is JSON Lines, one graded response per line::

    {"id": "q1-a", "prompt": "...", "response": "...", "human": 4, "group": "q1", "meta": {...}}

``human`` is a number on any scale (only its order matters); the optional ``group`` names the prompt
a response answers, so responses to one prompt are ranked against each other; ``meta`` optionally
carries the task hints a judge reads. Other fields are ignored. :func:`calibrate` scores the items
(the judge's cache and budget apply) and measures the scored ones with
:func:`pytest_novelty.metrics.agreement.agreement`; unscored items are counted, never read as 0.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.infra.abilities import description_of
from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.jsonlines import json_lines
from pytest_novelty.infra.storage import json_float
from pytest_novelty.metrics.agreement import DEFAULT_RESAMPLES, DEFAULT_SEED, Agreement, agreement
from pytest_novelty.scoring.judges.base import Judge, JudgeItem

if TYPE_CHECKING:
    from pytest_novelty.suites.schema import Suite

FIELDS = ("id", "prompt", "response", "human")


@dataclass(frozen=True)
class GradedItem:
    """One line of a calibration file."""

    id: Any
    prompt: str
    response: str
    human: float
    group: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def judge_item(self, task: str) -> JudgeItem:
        """The (prompt, response) pair as a judge reads it."""
        return JudgeItem(task=task, prompt=self.prompt, response=self.response, meta=self.meta)


@dataclass(frozen=True)
class Calibration:
    """The agreement of one judge on one calibration file; ``unscored`` maps reasons to counts."""

    judge: str
    path: str
    total: int
    agreement: Agreement
    unscored: Mapping[str, int]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, each statistic with its ``*_ci`` pair (low, high); undefined values ``null``."""
        a = self.agreement
        out: dict[str, Any] = {"n": a.n}
        for name, estimate in (("spearman", a.spearman), ("kendall", a.kendall),
                               ("pairwise_accuracy", a.pairwise_accuracy)):
            out[name] = json_float(estimate.value)
            out[f"{name}_ci"] = [json_float(estimate.ci_low), json_float(estimate.ci_high)]
        return out | {
            "pairs": a.pairs, "groups": a.groups, "items": self.total, "unscored": sum(self.unscored.values()),
            "unscored_reasons": dict(self.unscored), "judge": self.judge, "file": self.path,
            "bootstrap": {"resamples": a.resamples, "seed": a.seed, "confidence": a.confidence},
            "calibration": [{"human": json_float(r.human), "count": r.count, "judge_mean": json_float(r.judge_mean)}
                            for r in a.calibration],
        }  # fmt: skip

    def lines(self) -> list[str]:
        """The result as text: the headline statistics, then the calibration table."""
        a = self.agreement
        skipped = sum(self.unscored.values())
        head = f"judge {self.judge} on {self.path}: n = {a.n} scored items"
        if skipped:
            head += f" ({skipped} of {self.total} unscored and left out)"
        out = [head]
        for label, est in (("Spearman rho", a.spearman), ("Kendall tau-b", a.kendall),
                           ("pairwise accuracy", a.pairwise_accuracy)):
            out.append(f"  {label:18s} {_fmt(est.value)}  95% CI [{_fmt(est.ci_low)}, {_fmt(est.ci_high)}]")
        out.append(
            f"  ({a.pairs} same-group pairs with different human grades over {a.groups} group(s); judge ties "
            f"count 1/2; percentile bootstrap, {a.resamples} resamples, seed {a.seed})"
        )
        out.append("  human grade   items   mean judge score")
        out.extend(f"  {r.human:11g}   {r.count:5d}   {_fmt(r.judge_mean)}" for r in a.calibration)
        for reason, count in sorted(self.unscored.items(), key=lambda kv: -kv[1])[:3]:
            out.append(f"  unscored ({count}): {reason}")
        return out


def _fmt(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "n/a"


def read_calibration_file(path: str | Path) -> list[GradedItem]:
    """Read a calibration file; a bad line raises ``ConfigError`` naming the file, line and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            "calibration file not found; build one with `pytest-novelty judge calibration-file`", path=path
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the calibration file ({exc})", path=path) from None
    items: list[GradedItem] = []
    for number, row in json_lines(text.splitlines(), path, hint="; one object per line"):
        where = f"line {number}"
        missing = [name for name in FIELDS if name not in row]
        if missing:
            raise ConfigError(
                f"missing {', '.join(map(repr, missing))}; each line needs {', '.join(FIELDS)}", path=path, field=where
            )
        if not isinstance(row["prompt"], str) or not isinstance(row["response"], str):
            raise ConfigError("'prompt' and 'response' must be strings", path=path, field=where)
        human = row["human"]
        if isinstance(human, bool) or not isinstance(human, (int, float)) or not math.isfinite(human):
            raise ConfigError(
                f"'human' must be a finite number (the human grade), got {human!r}", path=path, field=where
            )
        group = row.get("group")
        if group is not None and not isinstance(group, (str, int)):
            raise ConfigError(f"'group' must be a string or an integer, got {group!r}", path=path, field=where)
        meta = row.get("meta") or {}
        if not isinstance(meta, dict):
            raise ConfigError("'meta' must be an object", path=path, field=where)
        group = None if group is None else str(group)
        items.append(GradedItem(row["id"], row["prompt"], row["response"], float(human), group, meta))
    if not items:
        raise ConfigError("the calibration file has no items; one JSON object per line", path=path)
    return items


def calibrate(
    judge: Judge,
    items: Sequence[GradedItem],
    task: str,
    *,
    path: str | Path = "",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    progress: bool = False,
) -> Calibration:
    """Score ``items`` with ``judge`` and measure the agreement of the scored ones with the human
    grades; ``HarnessError`` when the judge scored none (nothing to measure)."""
    results = judge.score([item.judge_item(task) for item in items], progress=progress)
    scored = [(item, r.quality) for item, r in zip(items, results, strict=True) if r.quality is not None]
    unscored = Counter(str(r.error or "no score") for r in results if r.quality is None)
    if not scored:
        reason = next(iter(unscored), "no score")
        raise HarnessError(f"judge {judge.spec} scored none of the {len(items)} items of {path} ({reason})")
    measured = agreement([float(quality) for _, quality in scored], [item.human for item, _ in scored],
                         [item.group for item, _ in scored], resamples=resamples, seed=seed)
    spec = description_of(judge, judge.spec)
    return Calibration(judge=spec, path=str(path), total=len(items), agreement=measured, unscored=dict(unscored))


def suite_agreement(judge: Judge, suite: Suite) -> dict[str, Any]:
    """The agreement of ``judge`` on the suite's ``[scoring] calibration`` file (relative to the suite
    file's folder), as :meth:`Calibration.as_dict`; a missing or bad file is a ``ConfigError``."""
    if suite.scoring.calibration is None:
        raise ConfigError("no calibration file", path=suite.path, field="scoring.calibration")
    path = (suite.base_dir / suite.scoring.calibration).expanduser()
    try:
        items = read_calibration_file(path)
    except ConfigError as exc:
        raise ConfigError(f"{exc}", path=suite.path, field="scoring.calibration") from None
    return calibrate(judge, items, suite.task, path=path).as_dict()
