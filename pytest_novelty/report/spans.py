"""What was copied: each suite's longest spans found verbatim in the training corpus.

The scoring step keeps, per suite, the answers with the longest run of units that occurs in the
originality index (``info["longest_copied"]`` of a suite's report data, see
:func:`pytest_novelty.pipeline.scores.score_answers`): the span's text, its length in the suite's
originality units (words or tokens), the number of one corpus document that contains it, and the
answer it came from (its prompt id and sample index). This module reads those entries into
:class:`CopiedSpan` values and renders them for ``report.md``; the HTML report and the trackers
read the same values. A span of length 0 (nothing copied) is left out.

Where a suite gates on the Creativity Index, the scoring step also keeps the answers with the
lowest index that copied anything (``info["creativity_copied"]``), each with its *copied
passages*: the runs of the answer that corpus spans of at least the range's shortest L cover, the
units those spans take from ``uniqueness@L`` (:mod:`pytest_novelty.metrics.creativity`).
:func:`creativity_passages` reads them, one :class:`CopiedSpan` per passage, with the longest
corpus match inside it and the answer's index; the trackers show them beside the longest spans.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_novelty.pipeline.suite_data import SuiteInfo

#: Characters of an answer shown beside its span in tables (the whole answer is in report.json).
ANSWER_CHARS = 160


@dataclass(frozen=True)
class CopiedSpan:
    """One copied span: where it came from and how long it is."""

    suite: str
    text: str
    length: int
    """Length in ``units``: the n-gram units of the suite's originality backend."""
    units: str
    document: int | None
    """The number of one corpus document that contains the span (None when the backend cannot tell)."""
    answer: str
    prompt: str | None = None
    """The id of the prompt the answer replied to (None in reports written before it was kept)."""
    sample: int | None = None
    longest: int | None = None
    """For a copied passage behind the Creativity Index: the longest corpus match inside it, capped
    at the range's largest L (None for a longest copied span)."""
    creativity_index: float | None = None
    """For a copied passage: the Creativity Index of its answer."""

    @property
    def size(self) -> str:
        """The length with its units: ``32 words``, ``1 word``."""
        units = self.units[:-1] if self.length == 1 and self.units.endswith("s") else self.units
        return f"{self.length} {units}"

    @property
    def source(self) -> str:
        """Which answer, in words: ``prompt p3, sample 1``."""
        where = "answer" if self.prompt is None else f"prompt {self.prompt}" + (
            "" if self.sample is None else f", sample {self.sample}")
        return where if self.creativity_index is None else f"{where}, creativity index {self.creativity_index:.2f}"

    def answer_excerpt(self, limit: int = ANSWER_CHARS) -> str:
        """The answer on one line, cut at ``limit`` characters."""
        flat = " ".join(self.answer.split())
        return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (what the trackers store)."""
        return {
            "suite": self.suite, "text": self.text, "length": self.length, "units": self.units,
            "document": self.document, "prompt": self.prompt, "sample": self.sample, "answer": self.answer,
            **({} if self.creativity_index is None else {"longest": self.longest,
                                                         "creativity_index": self.creativity_index}),
        }  # fmt: skip


def _span(suite: str, units: str, entry: Mapping[str, Any]) -> CopiedSpan | None:
    length = int(entry.get("longest_span") or 0)
    if length <= 0:
        return None
    return CopiedSpan(
        suite=suite,
        text=str(entry.get("longest_span_text") or ""),
        length=length,
        units=units,
        document=_whole(entry.get("longest_span_doc")),
        answer=str(entry.get("generation") or ""),
        prompt=_text(entry.get("prompt")),
        sample=_whole(entry.get("sample")),
    )


def copied_spans(infos: Mapping[str, SuiteInfo] | None) -> dict[str, list[CopiedSpan]]:
    """Per suite (sorted by name), its copied spans, longest first; suites without any are left out.

    ``infos`` maps a suite to its :class:`~pytest_novelty.pipeline.suite_data.SuiteInfo` (the
    suite data's, or read back from ``report.json``): its ``longest_copied`` and ``units``.
    """
    out: dict[str, list[CopiedSpan]] = {}
    for name, info in sorted((infos or {}).items()):
        units = info.units or "units"
        spans = [s for s in (_span(name, units, e) for e in info.longest_copied) if s is not None]
        if spans:
            out[name] = sorted(spans, key=lambda s: -s.length)
    return out


def creativity_passages(infos: Mapping[str, SuiteInfo] | None) -> dict[str, list[CopiedSpan]]:
    """Per suite (sorted by name), the copied passages of its answers with the lowest Creativity
    Index, lowest first, each passage in the order it comes in its answer; suites without any are
    left out."""
    out: dict[str, list[CopiedSpan]] = {}
    for name, info in sorted((infos or {}).items()):
        spans = [
            CopiedSpan(suite=name, text=str(text), length=int(length), units=info.units or "units", document=None,
                       answer=str(entry.get("generation") or ""), prompt=_text(entry.get("prompt")),
                       sample=_whole(entry.get("sample")), longest=int(longest),
                       creativity_index=float(entry["creativity_index"]))
            for entry in info.creativity_copied for text, length, longest in entry.get("copied") or ()
        ]  # fmt: skip
        if spans:
            out[name] = spans
    return out


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _whole(value: Any) -> int | None:
    return None if value is None else int(value)


def table_cell(text: str) -> str:
    """``text`` as one Markdown table cell: on one line, its pipes escaped."""
    return " ".join(str(text).replace("|", "\\|").split())


SPAN_HEAD = ("length", "copied text", "corpus document", "answer")
"""The columns of a table of longest copied spans (``report.md``, the HTML report, the trackers)."""


def span_cells(span: CopiedSpan) -> tuple[str, str, str, str]:
    """A copied span's row of such a table: its size, its text, its corpus document, its answer."""
    document = "n/a" if span.document is None else str(span.document)
    return span.size, span.text, document, f"{span.source}: {span.answer_excerpt()}"


def span_table(spans: Iterable[CopiedSpan]) -> list[str]:
    """The lines of a Markdown table of ``spans`` (:data:`SPAN_HEAD`)."""
    rows = ["| " + " | ".join(table_cell(c) for c in span_cells(span)) + " |" for span in spans]
    return ["| " + " | ".join(SPAN_HEAD) + " |", "|---|---|---|---|", *rows]


def spans_markdown(infos: Mapping[str, SuiteInfo] | None) -> list[str]:
    """``report.md``'s sections on what was copied: per suite, a table of its longest copied spans,
    and one of the passages behind its Creativity Index where it gates on it."""
    return _longest_markdown(infos) + _passages_markdown(infos)


def _longest_markdown(infos: Mapping[str, SuiteInfo] | None) -> list[str]:
    spans = copied_spans(infos)
    if not spans:
        return []
    lines = ["", "### Longest copied spans", "",
             "Runs of the answers found verbatim in the training corpus, longest first.", ""]
    for suite, found in spans.items():
        lines += [f"Suite {suite}:", "", *span_table(found), ""]
    return lines[:-1]


def _passages_markdown(infos: Mapping[str, SuiteInfo] | None) -> list[str]:
    """``report.md``'s section on the passages behind the Creativity Index, per suite."""
    found = creativity_passages(infos)
    if not found:
        return []
    lines = ["", "### Copied passages behind the Creativity Index", "",
             "The answers with the lowest index, and the runs of them that corpus spans of at least the range's "
             "shortest L cover (each unit of such a run counts against uniqueness@L for every L up to the longest "
             "match covering it).", ""]  # fmt: skip
    for suite, spans in found.items():
        lines += [f"Suite {suite}:", "", "| answer | copied passage | length | longest match (up to the largest L) |",
                  "|---|---|---|---|"]
        for span in spans:
            lines.append(f"| {table_cell(span.source)} | {table_cell(span.text)} | {span.size} | {span.longest} |")
        lines.append("")
    return lines[:-1]
