"""The end-of-session table: one block per suite, one row per gated metric."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def render_table(rows: Iterable[Mapping[str, Any]], headers: Mapping[str, str] | None = None) -> list[str]:
    """Lines of a plain-text table grouped by suite.

    Each row carries ``suite``, ``metric``, ``value``, ``op``, ``threshold`` and ``passed``;
    ``headers`` maps a suite name to a line shown above its block (model, judge, index).
    """
    by_suite: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_suite.setdefault(str(row["suite"]), []).append(row)
    lines: list[str] = []
    for suite in sorted(by_suite):
        cells = [("metric", "value", "threshold", "result")]
        for row in sorted(by_suite[suite], key=lambda r: str(r["metric"])):
            verdict = "pass" if row["passed"] else "FAIL"
            cells.append((str(row["metric"]), _fmt(row["value"]), f"{row['op']} {row['threshold']:g}", verdict))
        widths = [max(len(c[i]) for c in cells) for i in range(4)]
        lines.append(f"suite {suite}" + (f"  ({headers[suite]})" if headers and suite in headers else ""))
        for i, cell in enumerate(cells):
            lines.append("  " + "  ".join(text.ljust(w) for text, w in zip(cell, widths, strict=True)).rstrip())
            if i == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        lines.append("")
    return lines
