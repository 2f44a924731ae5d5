"""A syrupy extension that stores one :class:`MetricRecord` per case and compares with :func:`compare`.

Use it as ``assert snapshot.use_extension(NoveltySnapshotExtension) == record``. (The shorter
``snapshot(extension_class=...)`` compares and writes the same way, but syrupy builds the failure
explanation after restoring the default extension, so it would show a raw text diff instead of the
numbers.) Each case gets a readable JSON file, by default in a ``__novelty_snapshots__`` folder next
to the suite file (the test item's path)::

    suites/__novelty_snapshots__/story/test_metric[story-novelty@5=0.3].novelty.jsonc

The folder is deliberately not syrupy's ``__snapshots__``: in a run that makes no assertion with this
extension (``pytest --model X`` without snapshot comparison), syrupy scans ``__snapshots__`` next to
every collected file with its default extension, takes files it does not own for unused snapshots,
exits with status 1 because of them and deletes them on ``--snapshot-update``.

How the syrupy pieces are used:

* ``serialize`` turns the record into its JSON text (:meth:`MetricRecord.to_json`).
* ``matches`` parses both texts and is True unless :func:`compare` says "regressed", so a run
  passes on drift within tolerance or not significant, and ``--snapshot-update`` (which rewrites
  only when ``matches`` is False) never moves a baseline because of such drift. Setting
  :attr:`NoveltySnapshotExtension.rerecord` makes ``matches`` False everywhere, so
  ``--snapshot-update`` then re-records every snapshot on purpose.
* ``diff_lines`` explains the verdict with numbers instead of a text diff.

Where the files go is controlled by :attr:`NoveltySnapshotExtension.root` or, when that is unset,
the ``PYTEST_NOVELTY_SNAPSHOTS`` environment variable: a folder that then holds one sub-folder per
suite file. Both are plain strings, set by the plugin in ``pytest_configure`` (which also runs on
every xdist worker), so nothing unpicklable has to cross to a worker.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.location import PyTestLocation

from pytest_novelty.gate.regression import Comparison, MetricRecord, compare
from pytest_novelty.storage import atomic_write_text

if TYPE_CHECKING:
    import pytest
    from syrupy.assertion import SnapshotAssertion
    from syrupy.data import SnapshotCollection
    from syrupy.types import PropertyFilter, PropertyMatcher, SerializableData, SerializedData

#: Environment variable naming the snapshot root folder when the class attribute is unset.
ROOT_ENV = "PYTEST_NOVELTY_SNAPSHOTS"

NO_SNAPSHOT = "no snapshot for this case: run with --snapshot-update to accept the current values as the baseline"

UNREADABLE = "the stored snapshot cannot be read"
RERECORD = "re-recording requested: run with --snapshot-update to store the current values"

# The last comparison per case, filled by `matches` in the process that ran the assertion.
_LAST: dict[tuple[str, str, bool], Comparison] = {}


def pop_comparison(record: MetricRecord) -> Comparison | None:
    """The comparison the last snapshot assertion made for ``record``'s case, removed once read.

    None when the assertion compared nothing (no snapshot yet). Call it right after the
    assertion to print a warning line for drift that passed ("within_tolerance",
    "not_significant"); removing the entry keeps a stale result from reaching a later run.
    """
    return _LAST.pop(record.key, None)


@dataclass(frozen=True)
class SnapshotOutcome:
    """What :func:`check_snapshot` found.

    ``passed``: the case passes the regression gate; ``comparison``: None when nothing was
    compared (no snapshot yet, or it was unreadable); ``lines``: why it failed (empty on a pass);
    ``written``: syrupy stored the record as the new snapshot (``--snapshot-update``), in which case
    ``comparison`` describes the baseline that was replaced.
    """

    passed: bool
    comparison: Comparison | None
    lines: list[str]
    written: bool = False

    @property
    def message(self) -> str:
        """One line for a failure or a warning: the comparison's message, else the first line."""
        if self.comparison is not None:
            return self.comparison.message
        return self.lines[0] if self.lines else ""


def check_snapshot(snapshot: SnapshotAssertion, record: MetricRecord) -> SnapshotOutcome:
    """Compare ``record`` with its stored snapshot through syrupy, without raising.

    ``snapshot`` is the test's ``snapshot`` fixture. Writing on ``--snapshot-update`` and the
    unused-snapshot bookkeeping are syrupy's as with a plain ``assert``; the caller decides how to
    fail, so a threshold failure and a regression can be reported together.
    """
    assertion = snapshot.use_extension(NoveltySnapshotExtension)
    _LAST.pop(record.key, None)  # no stale comparison when this assertion compares nothing
    passed = bool(assertion == record)
    comparison = pop_comparison(record)
    lines: list[str] = []
    if not passed and comparison is not None:
        lines = comparison.lines()
        if comparison.passed:
            lines.append(RERECORD)
    elif not passed:
        explained = assertion.get_assert_diff()
        ours = [line for line in explained if line == NO_SNAPSHOT or line.startswith(UNREADABLE)]
        lines = ours or explained
    result = assertion.executions.get(assertion.num_executions - 1)
    written = bool(result and (result.created or result.updated))
    if written:
        lines = []
    return SnapshotOutcome(passed=passed, comparison=comparison, lines=lines, written=written)


def stored_record(item: pytest.Item) -> MetricRecord | None:
    """The record stored for ``item``'s case, or None when there is none or it cannot be read.

    Lets the plugin read a snapshot before computing a suite, e.g. to compute q@Tail on the stored
    tail ids so that the threshold check and the comparison use the same prompts.
    """
    location = PyTestLocation(item)
    path = Path(NoveltySnapshotExtension.get_location(test_location=location, index=0))
    try:
        return MetricRecord.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"...{text[-(limit - 3) :]}"


class NoveltySnapshotExtension(SingleFileSnapshotExtension):
    """One JSON metric record per case, compared by tolerance and significance, not by text."""

    # Not ".json": syrupy's JSONSnapshotExtension claims every "*.json" file in a snapshot folder,
    # and a run that uses it with --snapshot-update would delete these files as its own unused
    # snapshots. ".jsonc" keeps editors' JSON highlighting; the content is plain JSON.
    file_extension = "novelty.jsonc"
    _write_mode = WriteMode.TEXT
    # Set on this class, so syrupy's --snapshot-dirname (which sets the base class) leaves it alone.
    snapshot_dirname = "__novelty_snapshots__"

    #: Folder that holds the snapshots (one sub-folder per suite file); None: next to the suite.
    root: ClassVar[str | None] = None
    #: When True, every comparison "fails" so that --snapshot-update rewrites every snapshot.
    rerecord: ClassVar[bool] = False

    @classmethod
    def snapshot_root(cls) -> Path | None:
        """The configured root folder (class attribute, else ``$PYTEST_NOVELTY_SNAPSHOTS``), or None."""
        root = cls.root or os.environ.get(ROOT_ENV)
        return Path(root).expanduser().absolute() if root else None

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        """``<root>/<suite file stem>`` when a root is set, else ``__novelty_snapshots__/<stem>`` beside it."""
        root = cls.snapshot_root()
        if root is None:
            # syrupy's own dirname reads the base class's folder name, so build the path here.
            root = Path(test_location.filepath).parent / cls.snapshot_dirname
        return str(root / test_location.basename)

    @classmethod
    def matches_test_location(cls, *, test_location: PyTestLocation, snapshot_location: str) -> bool:
        """Also claim files whose names lost characters to filename sanitising (``>=`` in test ids)."""
        if super().matches_test_location(test_location=test_location, snapshot_location=snapshot_location):
            return True
        location = Path(snapshot_location)
        if location.parent != Path(cls.dirname(test_location=test_location)):
            return False
        stem = cls._snapshot_stem(location.name)
        expected = cls._sanitize_filename(test_location.snapshot_name_parametrized)
        return stem is not None and (stem == expected or stem.startswith(f"{expected}."))

    def serialize(
        self,
        data: SerializableData,
        *,
        exclude: PropertyFilter | None = None,
        include: PropertyFilter | None = None,
        matcher: PropertyMatcher | None = None,
    ) -> SerializedData:
        """The record's JSON text."""
        if not isinstance(data, MetricRecord):
            raise TypeError(f"{type(self).__name__} stores MetricRecord objects, got {type(data).__name__}")
        return data.to_json()

    def matches(self, *, serialized_data: SerializableData, snapshot_data: SerializableData) -> bool:
        """True unless the candidate regressed (or re-recording was asked for)."""
        try:
            candidate = MetricRecord.from_json(str(serialized_data))
            accepted = MetricRecord.from_json(str(snapshot_data))
        except ValueError:
            return False  # an unreadable snapshot fails and is rewritten by --snapshot-update
        comparison = compare(accepted, candidate)
        _LAST[candidate.key] = comparison
        return comparison.passed and not type(self).rerecord

    def diff_lines(self, serialized_data: SerializedData, snapshot_data: SerializedData) -> Iterator[str]:
        """The comparison's numbers and verdict instead of a text diff."""
        if not snapshot_data:
            yield NO_SNAPSHOT
            return
        try:
            candidate = MetricRecord.from_json(str(serialized_data))
            accepted = MetricRecord.from_json(str(snapshot_data))
        except ValueError as exc:
            yield f"{UNREADABLE} ({exc}): run with --snapshot-update to rewrite it"
            return
        comparison = compare(accepted, candidate)
        yield from comparison.lines()
        if accepted.model != candidate.model or accepted.fingerprint != candidate.fingerprint:
            yield f"  snapshot recorded from {_short(accepted.model)} ({_short(accepted.fingerprint)})"
        if type(self).rerecord and comparison.passed:
            yield RERECORD

    def read_snapshot_data_from_location(
        self, *, snapshot_location: str, snapshot_name: str, session_id: str
    ) -> SerializableData | None:
        """The stored text, or None when there is no file yet."""
        data = super().read_snapshot_data_from_location(
            snapshot_location=snapshot_location, snapshot_name=snapshot_name, session_id=session_id
        )
        return data if data else None

    @classmethod
    def write_snapshot_collection(
        cls, *, snapshot_collection: SnapshotCollection, name_order: dict[str, int] | None = None
    ) -> None:
        """Write the record atomically: an interrupted update never leaves a torn snapshot."""
        data: Any = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"expected the record's JSON text, got {type(data).__name__}")
        atomic_write_text(Path(snapshot_collection.location), data)
