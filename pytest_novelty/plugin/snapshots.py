"""Snapshots under pytest: syrupy's extension for the case records, and the session's settings.

The files, their places and how a damaged one is told from a missing one are
:mod:`pytest_novelty.gate.snapshot`'s, shared with ``pytest-novelty run``; this module is the
syrupy side only, so that nothing below the front ends imports pytest or syrupy.

Use the extension through :class:`SyrupyStore` (what a case's decision reads and writes), through
:func:`check_snapshot`, or in a plain test as
``assert snapshot.use_extension(NoveltySnapshotExtension) == record``. (The shorter
``snapshot(extension_class=...)`` compares and writes the same way, but syrupy builds the failure
explanation after restoring the default extension, so it would show a raw text diff instead of the
numbers.)

Only syrupy's public extension points are used:

* ``serialize`` turns the record into its JSON text (:meth:`MetricRecord.to_json`);
  ``read_snapshot_data_from_location`` and ``write_snapshot_collection`` read and write that text
  (the write is atomic, so an interrupted update never leaves a torn snapshot).
* ``matches`` parses both texts and compares them once (:meth:`NoveltySnapshotExtension.compare_texts`);
  it is True unless the verdict is "regressed", so a run passes on drift within tolerance or not
  significant, and ``--snapshot-update`` (which rewrites only when ``matches`` is False) never moves
  an accepted record because of such drift. The comparison stays on the extension instance of that
  assertion (``assertion.extension.comparison``) for the caller to report; ``diff_lines`` explains
  the same comparison with numbers instead of a text diff.
* A snapshot file that exists but is not a readable record is *damaged*, never missing:
  ``read_snapshot_data_from_location`` records a :class:`~pytest_novelty.gate.snapshot.DamagedSnapshot`
  (a harness error naming the file), ``matches`` is False and the failure shows that error.
  :func:`check_snapshot` returns it as ``SnapshotOutcome.damaged``: without ``--snapshot-update``
  the case has no verdict (``harness_error``); with it the file is replaced and a
  :class:`~pytest_novelty.gate.snapshot.DamagedSnapshotWarning` names the file and the damage.
* :class:`RerecordingExtension` never matches, so ``--snapshot-update`` re-records every snapshot on
  purpose (``--novelty-rerecord``).
* ``dirname``, ``get_snapshot_name`` and ``matches_test_location`` place and recognise the files.

Per-session settings (:class:`SnapshotSettings`: on or off, root folder, re-record) live in the
pytest config's stash under :data:`SETTINGS`, set by the plugin in ``pytest_configure`` (which also
runs on every xdist worker). Without them (a plain test using the extension) the root folder may
come from ``$PYTEST_NOVELTY_SNAPSHOTS``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from syrupy.extensions.base import AbstractSyrupyExtension
from syrupy.extensions.single_file import SingleFileSnapshotExtension

from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.regression import MetricRecord, compare
from pytest_novelty.gate.snapshot import (
    FILE_EXTENSION,
    MAX_NAME,
    NO_SNAPSHOT,
    RERECORD,
    ROOT_ENV,
    SNAPSHOT_DIRNAME,
    UNREADABLE,
    DamagedSnapshot,
    SnapshotOutcome,
    file_stem,
    load_snapshot,
    snapshot_file,
    warn_replaced,
)
from pytest_novelty.infra.storage import atomic_write_text

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion
    from syrupy.data import SnapshotCollection
    from syrupy.location import PyTestLocation
    from syrupy.types import SerializableData, SerializedData, SnapshotIndex


@dataclass(frozen=True)
class SnapshotSettings:
    """One session's snapshot settings.

    ``enabled``: compare every case with its snapshot; ``root``: folder holding one sub-folder per
    suite file (None: ``__novelty_snapshots__`` beside each suite file); ``rerecord``: make every
    comparison fail so that ``--snapshot-update`` rewrites every snapshot.
    """

    enabled: bool = False
    root: Path | None = None
    rerecord: bool = False


#: Where the plugin keeps the session's :class:`SnapshotSettings`.
SETTINGS = pytest.StashKey[SnapshotSettings]()


def snapshot_settings(config: pytest.Config) -> SnapshotSettings:
    """The session's snapshot settings (defaults when the plugin set none)."""
    return config.stash.get(SETTINGS, SnapshotSettings())


class SyrupyStore:
    """The case's snapshot through syrupy's ``snapshot`` fixture, requested on first use."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request

    def _snapshot(self) -> Any:
        return self.request.getfixturevalue("snapshot")

    def stored(self) -> MetricRecord | None:
        return stored_record(self._snapshot())

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        outcome = check_snapshot(self._snapshot(), record, alpha=alpha, correction=correction)
        if outcome.harness_error is not None:  # a damaged snapshot: no verdict, never "no snapshot"
            raise outcome.harness_error
        return outcome


def stored_record(snapshot: SnapshotAssertion) -> MetricRecord | None:
    """The record accepted as this case's snapshot, or None when there is none or it is damaged
    (:func:`check_snapshot` then reports the damage).

    Read through syrupy's public ``read_snapshot`` (the same file the comparison will read), so a
    case can take its frozen q@Tail tail from the snapshot before it computes the gated value.
    """
    from syrupy.exceptions import SnapshotDoesNotExist

    assertion = snapshot.use_extension(NoveltySnapshotExtension)
    try:
        text = assertion.extension.read_snapshot(
            test_location=assertion.test_location, index=assertion.index, session_id=str(id(assertion.session))
        )
        return MetricRecord.from_json(str(text))
    except (SnapshotDoesNotExist, ValueError):
        return None


def check_snapshot(
    snapshot: SnapshotAssertion, record: MetricRecord, *, alpha: float | None = None, correction: str = ""
) -> SnapshotOutcome:
    """Compare ``record`` with its stored snapshot through syrupy, without raising.

    ``snapshot`` is the test's ``snapshot`` fixture. Writing on ``--snapshot-update`` and the
    unused-snapshot bookkeeping are syrupy's as with a plain ``assert``; the caller decides how to
    fail, so a threshold failure and a regression can be reported together. The session's
    :class:`SnapshotSettings` choose re-recording.
    """
    settings = snapshot_settings(snapshot.test_location.item.config)
    assertion = snapshot.use_extension(RerecordingExtension if settings.rerecord else NoveltySnapshotExtension)
    extension = assertion.extension
    assert isinstance(extension, NoveltySnapshotExtension)
    extension.alpha, extension.correction = alpha, correction  # the run's correction
    passed = bool(assertion == record)
    comparison = extension.comparison
    result = assertion.executions.get(assertion.num_executions - 1)
    written = bool(result and (result.created or result.updated))
    damaged = extension.damaged
    if damaged is not None and written:
        warn_replaced(damaged)
    if written or passed:
        lines: list[str] = []
    elif damaged is not None:
        lines = [str(damaged)]
    elif comparison is not None:
        lines = comparison.lines()
        if comparison.passed:
            lines.append(RERECORD)
    elif extension.error is not None:
        lines = [extension.error]
    else:
        lines = [NO_SNAPSHOT]
    return SnapshotOutcome(passed=passed, comparison=comparison, lines=lines, written=written, damaged=damaged)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"...{text[-(limit - 3) :]}"




class NoveltySnapshotExtension(SingleFileSnapshotExtension):
    """One JSON metric record per case, compared by tolerance and significance, not by text."""

    # Not ".json" (see gate.snapshot); set on this class, so that syrupy's --snapshot-dirname
    # (which sets the base class) leaves it alone.
    file_extension = FILE_EXTENSION
    snapshot_dirname = SNAPSHOT_DIRNAME

    #: When True, no comparison matches, so --snapshot-update rewrites every snapshot.
    rerecord: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        #: The comparison this assertion made (None: nothing compared, or the snapshot was unreadable).
        self.comparison: Comparison | None = None
        #: Why the stored snapshot could not be read, when it could not.
        self.error: str | None = None
        #: The stored snapshot file exists but is not a readable record.
        self.damaged: DamagedSnapshot | None = None
        self._compared: tuple[str, str] | None = None
        #: The α the comparison is held to after the run's correction (None: the record's), and its name.
        self.alpha: float | None = None
        self.correction = ""
        self._records: tuple[MetricRecord, MetricRecord] | None = None

    # -- where the files are ----------------------------------------------------------------------

    @classmethod
    def snapshot_root(cls, config: pytest.Config) -> Path | None:
        """The session's root folder (else ``$PYTEST_NOVELTY_SNAPSHOTS``), or None: beside each suite."""
        root = snapshot_settings(config).root or os.environ.get(ROOT_ENV)
        return Path(root).expanduser().absolute() if root else None

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        """``<root>/<suite file stem>`` when a root is set, else ``__novelty_snapshots__/<stem>`` beside it."""
        # syrupy's own dirname reads the base class's folder name, so build the path here.
        root = cls.snapshot_root(test_location.item.config)
        return str(snapshot_file(Path(test_location.filepath), "", root).parent)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        """The case id as a file name, comparison signs spelt out (see :func:`file_stem`)."""
        name = AbstractSyrupyExtension.get_snapshot_name(test_location=test_location, index=index)
        return file_stem(name)[: MAX_NAME - len(cls.file_extension) - 1]

    @classmethod
    def matches_test_location(cls, *, test_location: PyTestLocation, snapshot_location: str) -> bool:
        """Whether the file at ``snapshot_location`` is this case's snapshot (named by :meth:`get_snapshot_name`)."""
        location = Path(snapshot_location)
        suffix = f".{cls.file_extension}"
        if location.parent != Path(cls.dirname(test_location=test_location)) or not location.name.endswith(suffix):
            return False
        stem = location.name[: -len(suffix)]
        expected = cls.get_snapshot_name(test_location=test_location)
        return stem == expected or stem.startswith(f"{expected}.")

    # -- reading and writing ----------------------------------------------------------------------

    @classmethod
    def get_supported_dataclass(cls) -> type[str]:
        """Records are stored as text."""
        return str

    @classmethod
    def get_write_encoding(cls) -> str:
        """UTF-8, whatever the platform's default."""
        return "utf-8"

    def serialize(self, data: SerializableData, **filters: Any) -> SerializedData:
        """The record's JSON text; syrupy's property ``filters`` (exclude, include, matcher) do not
        apply: a record is stored whole."""
        if not isinstance(data, MetricRecord):
            raise TypeError(f"{type(self).__name__} stores MetricRecord objects, got {type(data).__name__}")
        return data.to_json()

    def read_snapshot_data_from_location(
        self, *, snapshot_location: str, snapshot_name: str, session_id: str
    ) -> SerializableData | None:
        """The stored text, or None when there is no file yet.

        A file that is there but is not a readable record (not UTF-8, empty, torn JSON, another
        format) is damaged, not missing: :attr:`damaged` says so, and its text (undecodable bytes
        replaced) goes to syrupy as an existing snapshot, so that ``--snapshot-update`` counts it
        as updated and nothing treats it as absent.
        """
        text, _, self.damaged = load_snapshot(Path(snapshot_location))
        return text

    @classmethod
    def write_snapshot_collection(
        cls, *, snapshot_collection: SnapshotCollection, name_order: dict[str, int] | None = None
    ) -> None:
        """Write the record atomically: an interrupted update never leaves a torn snapshot."""
        data: Any = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise TypeError(f"expected the record's JSON text, got {type(data).__name__}")
        atomic_write_text(Path(snapshot_collection.location), data)

    # -- comparing ----------------------------------------------------------------------------------

    def compare_texts(self, serialized_data: SerializableData, snapshot_data: SerializableData) -> Comparison | None:
        """The one comparison of this assertion: the stored record against the candidate.

        Computed once per pair of texts and kept in :attr:`comparison`; None (with :attr:`error`
        set) when the stored text is not a readable record.
        """
        key = (str(serialized_data), str(snapshot_data))
        if self._compared != key:
            self._compared = key
            self.comparison, self.error, self._records = None, None, None
            try:
                candidate = MetricRecord.from_json(key[0])
                accepted = MetricRecord.from_json(key[1])
            except ValueError as exc:
                self.error = str(self.damaged) if self.damaged is not None else f"{UNREADABLE} ({exc})"
            else:
                self._records = (accepted, candidate)
                self.comparison = compare(accepted, candidate, alpha=self.alpha, correction=self.correction)
        return self.comparison

    def matches(self, *, serialized_data: SerializableData, snapshot_data: SerializableData) -> bool:
        """True unless the candidate regressed, the snapshot is unreadable, or re-recording was asked for."""
        comparison = self.compare_texts(serialized_data, snapshot_data)
        return comparison is not None and comparison.passed and not self.rerecord

    def diff_lines(self, serialized_data: SerializedData, snapshot_data: SerializedData) -> Iterator[str]:
        """The comparison's numbers and verdict instead of a text diff."""
        if self.damaged is not None:
            yield str(self.damaged)
            return
        if not snapshot_data:
            yield NO_SNAPSHOT
            return
        comparison = self.compare_texts(serialized_data, snapshot_data)
        if comparison is None or self._records is None:
            yield self.error or UNREADABLE
            return
        accepted, candidate = self._records
        yield from comparison.lines()
        if accepted.model != candidate.model or accepted.identity_id != candidate.identity_id:
            yield f"  snapshot recorded from {_short(accepted.model)} ({_short(accepted.identity_id)})"
        if self.rerecord and comparison.passed:
            yield RERECORD


class RerecordingExtension(NoveltySnapshotExtension):
    """The same files, but no comparison matches: ``--snapshot-update`` then rewrites every snapshot."""

    rerecord: ClassVar[bool] = True
