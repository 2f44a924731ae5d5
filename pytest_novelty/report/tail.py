"""What ``pytest-novelty tail build`` and ``tail agreement`` print, and the plot of τ against bin.

The agreement plot shows, for every bin from the peak (left) to the tail (right), Kendall's τ-b of
the models' mean quality with the reference and its interval, q@Tail(α)'s τ as a separate point at
the right, and a line at τ = 0 (no agreement).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pytest_novelty.infra.storage import atomic_write_json, json_float
from pytest_novelty.metrics.tail_agreement import BinAgreement, TailAgreement
from pytest_novelty.report.plots import CANDIDATE_COLOR, finish, new_figure
from pytest_novelty.report.terminal import aligned

__all__ = ["agreement_json", "agreement_lines", "agreement_plot", "build_lines", "write_agreement_json"]

_SHOWN_IDS = 5


def _ids(ids: list[str]) -> str:
    head = ", ".join(ids[:_SHOWN_IDS])
    return head + (f", ... ({len(ids)} prompts)" if len(ids) > _SHOWN_IDS else f" ({len(ids)} prompts)")


def build_lines(provenance: dict[str, Any], entries: dict[str, list[str]], out: Path) -> list[str]:
    """The lines ``tail build`` prints: the pool, each cut's first ids, how far the pool agrees, the file."""
    pool, prompts, index = provenance["pool"], provenance["prompts"], provenance["index"]
    lines = [
        f"tail of suite {provenance['suite']}: {prompts['ranked']} of {prompts['count']} prompts ranked by a pool "
        f"of {len(pool)} ({', '.join(m['source'] for m in pool)}) at n = {provenance['n']}, index "
        f"{index['setting']} ({index['identity'][:12]})",
    ]
    for member in pool:
        lines.append(f"  {member['source']}: {member['identity']}, mean output novelty "
                     f"{member['mean_output_novelty']:.4f}")  # fmt: skip
    for metric, ids in entries.items():
        lines.append(f"  {metric}: {_ids(ids)}")
    taus = [t for t in provenance["agreement"]["kendall_tau_b"] if t[2] is not None]
    if len(taus) == 1:
        (i, j, tau), = taus
        lines.append(f"  pool agreement: Kendall tau-b of per-prompt output novelty {tau:.2f} between "
                     f"{pool[i]['source']} and {pool[j]['source']}")  # fmt: skip
    elif taus:
        weakest = min(taus, key=lambda t: t[2])
        lines.append(f"  pool agreement: Kendall tau-b of per-prompt output novelty {min(t[2] for t in taus):.2f} to "
                     f"{max(t[2] for t in taus):.2f} over {len(taus)} pairs (weakest: {pool[weakest[0]]['source']} / "
                     f"{pool[weakest[1]]['source']})")  # fmt: skip
    for metric, shares in provenance["agreement"]["tail_overlap"].items():
        if len(pool) > 1:
            held = ", ".join(f"{m['source']} {s:.0%}" for m, s in zip(pool, shares, strict=True) if s is not None)
            lines.append(f"  {metric}: each member's own tail holds of the pool's: {held}")
    lines += [f"warning: {w}" for w in provenance["warnings"]]
    lines.append(f"wrote {out} (tail-file format 1); point the suite's [gate] tail at it")
    return lines


def _interval(found: BinAgreement) -> str:
    if math.isnan(found.low):
        return "n/a"
    return f"[{found.low:+.2f}, {found.high:+.2f}]"


def _tau(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.2f}"


def agreement_lines(result: TailAgreement, suite: str) -> list[str]:
    """The table ``tail agreement`` prints: one row per bin from the peak to the tail, then q@Tail's."""
    level = f"{100 * result.confidence:g}% CI"
    header = ("bin", "prompts", "score range", "tau-b", level, "best model (mean quality)")
    cells = [header]
    for found in (*result.bins, result.tail):
        means = [-math.inf if math.isnan(m) else m for m in found.means]
        best = means.index(max(means))
        cells.append((found.label, str(found.prompts), f"{found.score_low:.3f}-{found.score_high:.3f}",
                      _tau(found.tau), _interval(found), f"{result.models[best]} ({found.means[best]:.3f})"))
    return [
        f"agreement of suite {suite} with the reference: {len(result.models)} models, {len(result.bins)} bins from "
        f"peak (bin 1) to tail (bin {len(result.bins)}), Kendall tau-b of mean quality, bootstrap over prompts "
        f"({result.resamples} resamples)",
        *aligned(cells, "  "),
    ]


def _reach(upper: float, lower: float) -> float:
    """An error bar's length from ``lower`` to ``upper`` (0 where either is undefined)."""
    return 0.0 if math.isnan(upper) or math.isnan(lower) else max(0.0, upper - lower)


def agreement_plot(result: TailAgreement, path: str | Path, suite: str) -> Path:
    """τ against bin with its interval, and q@Tail(α)'s τ at the right (module doc)."""
    figure = new_figure()
    ax = figure.add_subplot()
    xs = list(range(1, len(result.bins) + 1))
    taus = [b.tau for b in result.bins]
    below = [_reach(b.tau, b.low) for b in result.bins]
    above = [_reach(b.high, b.tau) for b in result.bins]
    ax.errorbar(xs, taus, yerr=[below, above], fmt="o-", color=CANDIDATE_COLOR, capsize=4,
                label=f"per bin ({100 * result.confidence:g}% CI)")  # fmt: skip
    tail = result.tail
    spot = len(xs) + 1
    ax.errorbar([spot], [tail.tau], yerr=[[_reach(tail.tau, tail.low)], [_reach(tail.high, tail.tau)]], fmt="s",
                color="#d62728", capsize=4, label=tail.label)  # fmt: skip
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xticks([*xs, spot], [*(str(x) for x in xs), tail.label])
    return finish(figure, path, title=f"{suite}: agreement with the reference, peak (1) to tail ({len(xs)})",
                  xlabel="bin of prompts by their shared novelty score", ylabel="Kendall tau-b with the reference",
                  legend="lower right")  # fmt: skip


def agreement_json(result: TailAgreement) -> dict[str, Any]:
    """The result as JSON (NaN as null, numbers to 6 decimals)."""

    def part(found: BinAgreement) -> dict[str, Any]:
        return {"label": found.label, "prompts": found.prompts,
                "score_range": [json_float(found.score_low), json_float(found.score_high)],
                "tau_b": json_float(found.tau), "ci": [json_float(found.low), json_float(found.high)],
                "means": dict(zip(result.models, (json_float(m) for m in found.means), strict=True))}  # fmt: skip

    return {"models": list(result.models), "reference": list(result.reference), "alpha": result.alpha,
            "confidence": result.confidence, "resamples": result.resamples, "bins": [part(b) for b in result.bins],
            "q_at_tail": part(result.tail)}  # fmt: skip


def write_agreement_json(result: TailAgreement, path: Path) -> None:
    """Write :func:`agreement_json` to ``path`` atomically."""
    atomic_write_json(path, agreement_json(result))
