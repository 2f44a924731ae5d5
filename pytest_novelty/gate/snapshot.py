"""A syrupy extension that stores one :class:`MetricRecord` per case and compares it with :func:`compare`.

Use it through :func:`check_snapshot`, or in a plain test as
``assert snapshot.use_extension(NoveltySnapshotExtension) == record``. (The shorter
``snapshot(extension_class=...)`` compares and writes the same way, but syrupy builds the failure
explanation after restoring the default extension, so it would show a raw text diff instead of the
numbers.) Each case gets a readable JSON file, by default in a ``__novelty_snapshots__`` folder next
to the suite file (the test item's path)::

    suites/__novelty_snapshots__/story/test_metric[story-novelty@5_ge_0.3].novelty.jsonc

The comparison sign of the case id is spelt out in the file name (``_ge_``, ``_le_``): syrupy's own
file names drop ``<`` and ``>``, which would make ``>=`` read as ``=``.

The folder is deliberately not syrupy's ``__snapshots__``: in a run that makes no assertion with this
extension (``pytest --model X`` without snapshot comparison), syrupy scans ``__snapshots__`` next to
every collected file with its default extension, takes files it does not own for unused snapshots,
exits with status 1 because of them and deletes them on ``--snapshot-update``.

Only syrupy's public extension points are used:

* ``serialize`` turns the record into its JSON text (:meth:`MetricRecord.to_json`);
  ``read_snapshot_data_from_location`` and ``write_snapshot_collection`` read and write that text
  (the write is atomic, so an interrupted update never leaves a torn snapshot).
* ``matches`` parses both texts and compares them once (:meth:`NoveltySnapshotExtension.compare_texts`);
  it is True unless the verdict is "regressed", so a run passes on drift within tolerance or not
  significant, and ``--snapshot-update`` (which rewrites only when ``matches`` is False) never moves
  a baseline because of such drift. The comparison stays on the extension instance of that
  assertion (``assertion.extension.comparison``) for the caller to report; ``diff_lines`` explains
  the same comparison with numbers instead of a text diff.
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
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from syrupy.extensions.base import AbstractSyrupyExtension
from syrupy.extensions.single_file import SingleFileSnapshotExtension

from pytest_novelty.gate.regression import Comparison, MetricRecord, compare
from pytest_novelty.infra.storage import atomic_write_text

if TYPE_CHECKING:
    from syrupy.assertion import SnapshotAssertion
    from syrupy.data import SnapshotCollection
    from syrupy.location import PyTestLocation
    from syrupy.types import SerializableData, SerializedData, SnapshotIndex

#: Environment variable naming the snapshot root folder when the session sets none.
ROOT_ENV = "PYTEST_NOVELTY_SNAPSHOTS"

NO_SNAPSHOT = "no snapshot for this case: run with --snapshot-update to accept the current values as the baseline"

UNREADABLE = "the stored snapshot cannot be read"
RERECORD = "re-recording requested: run with --snapshot-update to store the current values"

#: Comparison signs spelt out in file names, longest first (syrupy drops "<" and ">").
SIGN_WORDS = ((">=", "_ge_"), ("<=", "_le_"), (">", "_gt_"), ("<", "_lt_"))
#: Characters no file name may hold on common file systems; each becomes "_".
UNSAFE_CHARACTERS = frozenset('\\/?*:|"<>')
#: Longest file name most file systems accept.
MAX_NAME = 255


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


def file_stem(name: str) -> str:
    """``name`` (a case's snapshot name) as a file name: signs spelt out, unsafe characters replaced."""
    for sign, word in SIGN_WORDS:
        name = name.replace(sign, word)
    return "".join(
        "_" if c in UNSAFE_CHARACTERS or unicodedata.category(c).startswith("C") else c for c in name
    )


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


def stored_record(snapshot: SnapshotAssertion) -> MetricRecord | None:
    """The record accepted as this case's snapshot, or None when there is none or it is unreadable.

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
    assert isinstance(assertion.extension, NoveltySnapshotExtension)
    assertion.extension.alpha, assertion.extension.correction = alpha, correction  # the run's correction
    passed = bool(assertion == record)
    extension = assertion.extension
    assert isinstance(extension, NoveltySnapshotExtension)
    comparison = extension.comparison
    result = assertion.executions.get(assertion.num_executions - 1)
    written = bool(result and (result.created or result.updated))
    lines: list[str] = []
    if written or passed:
        lines = []
    elif comparison is not None:
        lines = comparison.lines()
        if comparison.passed:
            lines.append(RERECORD)
    elif extension.error is not None:
        lines = [extension.error]
    else:
        lines = [NO_SNAPSHOT]
    return SnapshotOutcome(passed=passed, comparison=comparison, lines=lines, written=written)


def snapshot_file(suite_file: Path, case: str, root: Path | None = None) -> Path:
    """Where the snapshot of case ``case`` (its id, ``story-novelty@5>=0.3``) of ``suite_file`` lives:
    ``<root>/<suite file stem>/`` or ``__novelty_snapshots__/<stem>/`` beside the suite file, then
    the test's name with its signs spelt out. The syrupy extension places its files with this same
    function, so ``pytest-novelty run`` reads and writes exactly the files pytest does."""
    ext = NoveltySnapshotExtension.file_extension
    folder = (root if root is not None else Path(suite_file).parent / NoveltySnapshotExtension.snapshot_dirname)
    name = file_stem(f"test_metric[{case}]")[: MAX_NAME - len(ext) - 1]
    return Path(folder) / Path(suite_file).stem / f"{name}.{ext}"


class SnapshotFile:
    """One case's snapshot read and written directly, as syrupy would (for ``pytest-novelty run``).

    ``update`` accepts the candidate where the comparison does not pass (syrupy's
    ``--snapshot-update``), ``rerecord`` makes every comparison fail first, so that ``update``
    rewrites every snapshot (``--novelty-rerecord``). A file that exists but holds no readable
    record is never taken for a missing one (see :func:`read_record`).
    """

    def __init__(self, path: Path, *, update: bool = False, rerecord: bool = False) -> None:
        self.path = Path(path)
        self.update = update
        self.rerecord = rerecord

    def stored(self) -> MetricRecord | None:
        """The accepted record, or None when there is no file yet."""
        return read_record(self.path)

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        """Compare ``record`` with the accepted one (at ``alpha``, after the run's ``correction``);
        with ``update`` write it where that fails."""
        accepted = self.stored()
        comparison = None if accepted is None else compare(accepted, record, alpha=alpha, correction=correction)
        matches = comparison is not None and comparison.passed and not self.rerecord
        if matches:
            return SnapshotOutcome(passed=True, comparison=comparison, lines=[])
        if self.update:
            atomic_write_text(self.path, record.to_json())
            return SnapshotOutcome(passed=True, comparison=comparison, lines=[], written=True)
        if comparison is None:
            return SnapshotOutcome(passed=False, comparison=None, lines=[NO_SNAPSHOT])
        lines = comparison.lines() + ([RERECORD] if comparison.passed else [])
        return SnapshotOutcome(passed=False, comparison=comparison, lines=lines)


def read_record(path: Path) -> MetricRecord | None:
    """The record stored at ``path``: None when there is no file (or it is empty), a
    :class:`~pytest_novelty.infra.errors.HarnessError` naming the file when it cannot be read."""
    from pytest_novelty.infra.errors import HarnessError

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"{path}: the snapshot cannot be read ({exc}); restore it from version control") from None
    if not text:
        return None
    try:
        return MetricRecord.from_json(text)
    except ValueError as exc:
        raise HarnessError(
            f"{path}: the snapshot is damaged ({exc}); restore it from version control, or delete it and "
            "run with --snapshot-update to accept the current values"
        ) from None


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"...{text[-(limit - 3) :]}"


class NoveltySnapshotExtension(SingleFileSnapshotExtension):
    """One JSON metric record per case, compared by tolerance and significance, not by text."""

    # Not ".json": syrupy's JSONSnapshotExtension claims every "*.json" file in a snapshot folder,
    # and a run that uses it with --snapshot-update would delete these files as its own unused
    # snapshots. ".jsonc" keeps editors' JSON highlighting; the content is plain JSON.
    file_extension = "novelty.jsonc"
    # Set on this class, so syrupy's --snapshot-dirname (which sets the base class) leaves it alone.
    snapshot_dirname = "__novelty_snapshots__"

    #: When True, no comparison matches, so --snapshot-update rewrites every snapshot.
    rerecord: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        #: The comparison this assertion made (None: nothing compared, or the snapshot was unreadable).
        self.comparison: Comparison | None = None
        #: Why the stored snapshot could not be read, when it could not.
        self.error: str | None = None
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
        """The stored text, or None when there is no file yet (or it is empty)."""
        try:
            data = Path(snapshot_location).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return data or None

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
                self.error = f"{UNREADABLE} ({exc}): run with --snapshot-update to rewrite it"
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
        if not snapshot_data:
            yield NO_SNAPSHOT
            return
        comparison = self.compare_texts(serialized_data, snapshot_data)
        if comparison is None or self._records is None:
            yield self.error or UNREADABLE
            return
        accepted, candidate = self._records
        yield from comparison.lines()
        if accepted.model != candidate.model or accepted.fingerprint != candidate.fingerprint:
            yield f"  snapshot recorded from {_short(accepted.model)} ({_short(accepted.fingerprint)})"
        if self.rerecord and comparison.passed:
            yield RERECORD


class RerecordingExtension(NoveltySnapshotExtension):
    """The same files, but no comparison matches: ``--snapshot-update`` then rewrites every snapshot."""

    rerecord: ClassVar[bool] = True
