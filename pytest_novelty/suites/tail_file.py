"""The file a suite's ``[gate] tail`` names: the prompts q@Tail (and Novelty at Peak) are judged on.

* A JSON list of prompt ids: the tail of every ``q_at_tail@α`` metric of the suite. Never a peak: a
  peak taken for a tail would judge a checkpoint on the wrong end of the ranking.
* A JSON object mapping a metric to its ids: ``"q_at_tail@0.1"`` to the tail, ``"novelty_at_peak@0.1"``
  to the peak. ``pytest-novelty tail build`` adds ``"format"`` (:data:`TAIL_FORMAT`) and
  ``"provenance"`` (how the ranking was made: suite, pool and identities, index, n, every prompt's
  score, unranked prompts, ties at each cut, the pool's agreement, the date). Readers take their
  metric's entry and ignore the rest; a ``format`` newer than this code is refused with one line.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.infra.storage import atomic_write_text

__all__ = [
    "PEAK_PREFIX", "TAIL_FORMAT", "TAIL_PREFIX", "has_entry", "read_provenance", "read_tail_ids", "write_tail_file",
]

#: The version of the object shape ``pytest-novelty tail build`` writes (files without one are version 0).
TAIL_FORMAT = 1

TAIL_PREFIX = "q_at_tail@"
PEAK_PREFIX = "novelty_at_peak@"


def _load(path: Path) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the tail file ({exc}); give a JSON list of prompt ids", path=path) from None
    if isinstance(data, dict):
        version = data.get("format", 0)
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise ConfigError(f"its 'format' must be a whole number, got {version!r}", path=path)
        if version > TAIL_FORMAT:
            raise ConfigError(
                f"was written in tail-file format {version}, newer than this pytest-novelty reads "
                f"({TAIL_FORMAT}); upgrade pytest-novelty or rebuild the file with `pytest-novelty tail build`",
                path=path,
            )
    return data


def read_tail_ids(path: Path, metric: str) -> list[str]:
    """The prompt ids of ``metric`` (``q_at_tail@α`` or ``novelty_at_peak@α``) in a tail file;
    ``ConfigError`` naming the file and the fix for anything else (module doc)."""
    data = _load(path)
    if isinstance(data, list) and metric.startswith(PEAK_PREFIX):
        raise ConfigError(f'holds a bare list (a tail), not a peak; {metric} needs a "{metric}" entry: build one with '
                          "`pytest-novelty tail build`", path=path)
    if isinstance(data, dict):
        data = data.get(metric)
        if data is None:
            raise ConfigError(f'has no "{metric}" entry; map each q_at_tail metric to a list of prompt ids', path=path)
    if not isinstance(data, list) or not data or not all(isinstance(i, (str, int)) for i in data):
        raise ConfigError("must hold a non-empty JSON list of prompt ids (strings)", path=path)
    return [str(i) for i in data]


def has_entry(path: Path, metric: str) -> bool:
    """Whether the tail file holds ids for ``metric`` (a bare list holds tails only)."""
    data = _load(path)
    if isinstance(data, list):
        return metric.startswith(TAIL_PREFIX)
    return isinstance(data, dict) and metric in data


def read_provenance(path: Path) -> dict[str, Any] | None:
    """The ``provenance`` a built tail file records, or None for a hand-written one."""
    data = _load(path)
    found = data.get("provenance") if isinstance(data, dict) else None
    return found if isinstance(found, dict) else None


def write_tail_file(path: Path, entries: Mapping[str, Sequence[str]], provenance: Mapping[str, Any]) -> None:
    """Write a tail file of the current format, atomically: ``entries`` maps each metric
    (``q_at_tail@α``, ``novelty_at_peak@α``) to its ids in ranking order, ``provenance`` says how
    they were made. Keys are sorted and the text ends in a newline, so a rebuild diffs cleanly."""
    for metric, ids in entries.items():
        if not metric.startswith((TAIL_PREFIX, PEAK_PREFIX)) or not ids:
            raise ValueError(f"a tail file maps q_at_tail@α or novelty_at_peak@α to ids, got {metric!r}: {ids!r}")
    data: dict[str, Any] = {"format": TAIL_FORMAT, **{m: list(ids) for m, ids in entries.items()},
                            "provenance": dict(provenance)}  # fmt: skip
    atomic_write_text(Path(path), json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
