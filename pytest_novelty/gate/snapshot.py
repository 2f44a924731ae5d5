"""Snapshots as files: one accepted :class:`MetricRecord` per case, where it lives, and how it is read.

This module knows nothing of pytest or syrupy (the command line loads neither). It holds what both
front ends share: where a case's snapshot file lives (:func:`snapshot_file`), how a file is read
(:func:`load_snapshot`: a file that exists but holds no readable record is *damaged*, never
missing), what a check found (:class:`SnapshotOutcome`), and :class:`SnapshotFile`, the store
``pytest-novelty run`` reads and writes directly. Under pytest the same files are syrupy's, through
the extension in :mod:`pytest_novelty.plugin.snapshots`, which places them with
:func:`snapshot_file` and reads them with :func:`load_snapshot`. Each case gets a readable JSON
file, by default in a ``__novelty_snapshots__`` folder next to the suite file::

    suites/__novelty_snapshots__/story/test_metric[story-novelty@5_ge_0.3].novelty.jsonc

The comparison sign of the case id is spelt out in the file name (``_ge_``, ``_le_``): syrupy's own
file names drop ``<`` and ``>``, which would make ``>=`` read as ``=``.

The folder is deliberately not syrupy's ``__snapshots__``: in a run that makes no assertion with the
extension (``pytest --model X`` without snapshot comparison), syrupy scans ``__snapshots__`` next to
every collected file with its default extension, takes files it does not own for unused snapshots,
exits with status 1 because of them and deletes them on ``--snapshot-update``. The suffix is not
``.json`` either: syrupy's JSON extension claims every ``*.json`` file of a snapshot folder, and a
run that uses it with ``--snapshot-update`` would delete these files as its own unused snapshots
(``.jsonc`` keeps editors' JSON highlighting; the content is plain JSON).
"""

from __future__ import annotations

import unicodedata
import warnings
from dataclasses import dataclass
from pathlib import Path

from pytest_novelty.gate.comparison import Comparison
from pytest_novelty.gate.regression import MetricRecord, compare
from pytest_novelty.infra.errors import HarnessError
from pytest_novelty.infra.storage import atomic_write_text

#: The snapshot files' suffix and the folder beside each suite file that holds them.
FILE_EXTENSION = "novelty.jsonc"
SNAPSHOT_DIRNAME = "__novelty_snapshots__"

#: Environment variable naming the snapshot root folder when the session sets none.
ROOT_ENV = "PYTEST_NOVELTY_SNAPSHOTS"

NO_SNAPSHOT = "no snapshot for this case: run with --snapshot-update to accept the current values as the baseline"

UNREADABLE = "the stored snapshot cannot be read"
RERECORD = "re-recording requested: run with --snapshot-update to store the current values"


class DamagedSnapshot(HarnessError):
    """A snapshot file that exists but cannot be read as a metric record (random bytes, torn or
    truncated JSON, another format): a harness error naming the file, never "no snapshot".

    A missing snapshot invites ``--snapshot-update``; a damaged one must not, since following that
    advice would accept the candidate as the new baseline without anyone deciding so.
    """

    def __init__(self, path: str | Path, why: str) -> None:
        self.path = str(path)
        self.why = why
        super().__init__(
            f"{self.path}: damaged snapshot ({why}); it is neither used as the baseline nor replaced: restore "
            "it from version control, or delete it to record a new baseline"
        )


class DamagedSnapshotWarning(UserWarning):
    """``--snapshot-update`` replaced a damaged snapshot; the warning names the file and the damage."""

#: Comparison signs spelt out in file names, longest first (syrupy drops "<" and ">").
SIGN_WORDS = ((">=", "_ge_"), ("<=", "_le_"), (">", "_gt_"), ("<", "_lt_"))
#: Characters no file name may hold on common file systems; each becomes "_".
UNSAFE_CHARACTERS = frozenset('\\/?*:|"<>')
#: Longest file name most file systems accept.
MAX_NAME = 255


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
    compared (no snapshot yet, or it was damaged); ``lines``: why it failed (empty on a pass);
    ``written``: syrupy stored the record as the new snapshot (``--snapshot-update``), in which case
    ``comparison`` describes the baseline that was replaced; ``damaged``: the stored snapshot
    exists but cannot be read. Then either ``written`` is True (``--snapshot-update`` replaced
    it, and a :class:`DamagedSnapshotWarning` said so) or the case has no verdict:
    :attr:`harness_error` is the error to raise.
    """

    passed: bool
    comparison: Comparison | None
    lines: list[str]
    written: bool = False
    damaged: DamagedSnapshot | None = None

    @property
    def harness_error(self) -> DamagedSnapshot | None:
        """The damaged snapshot, unless ``--snapshot-update`` replaced it: the case is a harness error."""
        return None if self.written else self.damaged


def snapshot_file(suite_file: Path, case: str, root: Path | None = None) -> Path:
    """Where the snapshot of case ``case`` (its id, ``story-novelty@5>=0.3``) of ``suite_file`` lives:
    ``<root>/<suite file stem>/`` or ``__novelty_snapshots__/<stem>/`` beside the suite file, then
    the test's name with its signs spelt out. The syrupy extension (``plugin/snapshots.py``) places
    its files with this same function, so ``pytest-novelty run`` reads and writes exactly the files
    pytest does."""
    ext = FILE_EXTENSION
    folder = root if root is not None else Path(suite_file).parent / SNAPSHOT_DIRNAME
    name = file_stem(f"test_metric[{case}]")[: MAX_NAME - len(ext) - 1]
    return Path(folder) / Path(suite_file).stem / f"{name}.{ext}"


class SnapshotFile:
    """One case's snapshot read and written directly, as syrupy would (for ``pytest-novelty run``).

    ``update`` accepts the candidate where the comparison does not pass (syrupy's
    ``--snapshot-update``), ``rerecord`` makes every comparison fail first, so that ``update``
    rewrites every snapshot (``--novelty-rerecord``). A file that exists but holds no readable
    record is never taken for a missing one: :meth:`check` raises :class:`DamagedSnapshot`, or with
    ``update`` replaces it and says so (:class:`DamagedSnapshotWarning`), as the syrupy extension does.
    """

    def __init__(self, path: Path, *, update: bool = False, rerecord: bool = False) -> None:
        self.path = Path(path)
        self.update = update
        self.rerecord = rerecord

    def stored(self) -> MetricRecord | None:
        """The accepted record, or None when there is no file yet or it is damaged (:meth:`check`
        then reports the damage)."""
        return load_snapshot(self.path)[1]

    def check(self, record: MetricRecord, *, alpha: float | None = None, correction: str = "") -> SnapshotOutcome:
        """Compare ``record`` with the accepted one (at ``alpha``, after the run's ``correction``);
        with ``update`` write it where that fails (a damaged file included, with a warning)."""
        _, accepted, damaged = load_snapshot(self.path)
        if damaged is not None and not self.update:
            raise damaged
        outcome = compared_outcome(accepted, record, alpha=alpha, correction=correction, rerecord=self.rerecord)
        if outcome.passed or not self.update:
            return outcome
        atomic_write_text(self.path, record.to_json())
        if damaged is not None:
            warn_replaced(damaged)
        return SnapshotOutcome(passed=True, comparison=outcome.comparison, lines=[], written=True, damaged=damaged)


def compared_outcome(
    accepted: MetricRecord | None, record: MetricRecord, *, alpha: float | None = None, correction: str = "",
    rerecord: bool = False,
) -> SnapshotOutcome:
    """``record`` checked against the ``accepted`` snapshot (None: there is none yet), writing nothing:
    a pass, or the lines of its failure; ``rerecord`` fails a passing comparison too (``--novelty-rerecord``)."""
    if accepted is None:
        return SnapshotOutcome(passed=False, comparison=None, lines=[NO_SNAPSHOT])
    comparison = compare(accepted, record, alpha=alpha, correction=correction)
    if comparison.passed and not rerecord:
        return SnapshotOutcome(passed=True, comparison=comparison, lines=[])
    return SnapshotOutcome(passed=False, comparison=comparison,
                           lines=comparison.lines() + ([RERECORD] if comparison.passed else []))


def load_snapshot(path: Path) -> tuple[str | None, MetricRecord | None, DamagedSnapshot | None]:
    """``(text, record, damage)`` of the snapshot file at ``path``.

    No file: ``(None, None, None)``. A readable record: its text and the record. A file that is
    there but is not a readable record (cannot be read, not UTF-8, empty, torn JSON, another
    format): its text (undecodable bytes replaced, ``""`` when unreadable), no record, and the
    :class:`DamagedSnapshot` naming the file and the damage.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None, None
    except OSError as exc:
        return "", None, DamagedSnapshot(path, f"cannot be read: {exc.strerror or exc}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return raw.decode("utf-8", errors="replace"), None, DamagedSnapshot(
            path, f"not UTF-8 text: byte {exc.start} of {len(raw)}"
        )
    try:
        if not text.strip():
            raise ValueError("the file is empty")
        return text, MetricRecord.from_json(text), None
    except ValueError as exc:
        return text, None, DamagedSnapshot(path, str(exc))


def warn_replaced(damaged: DamagedSnapshot) -> None:
    warnings.warn(
        DamagedSnapshotWarning(f"{damaged.path}: replaced a damaged snapshot ({damaged.why}) with the current values"),
        stacklevel=3,
    )
