"""The syrupy extension end to end: a plain test file asserts a MetricRecord against its snapshot."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

# The comparison imports scipy (a hard dependency) lazily; an in-process pytester run that imported
# it first would drop it from sys.modules afterwards, and scipy's extension modules cannot be loaded
# twice: import it here, before any pytester run, instead.
import scipy.stats  # noqa: F401

from pytest_novelty.gate.regression import MetricRecord
from pytest_novelty.gate.snapshot import (
    NO_SNAPSHOT,
    ROOT_ENV,
    DamagedSnapshot,
    DamagedSnapshotWarning,
    SnapshotFile,
    load_snapshot,
)

IDS = [f"p{i:02d}" for i in range(24)]

# The case reads its record from record.txt, so each run can hand it different numbers; the id
# holds ">=" like the plugin's cases, which the file name spells out as "_ge_".
TEST_FILE = """
import os
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from pytest_novelty.gate.regression import MetricRecord
from pytest_novelty.plugin.snapshots import NoveltySnapshotExtension, RerecordingExtension

EXTENSION = RerecordingExtension if os.environ.get("RERECORD") else NoveltySnapshotExtension


@pytest.mark.parametrize("case", ["quality>=0.3"])
def test_metric(snapshot, case):
    record = MetricRecord.from_json(Path(__file__).with_name("record.txt").read_text())
    assertion = snapshot.use_extension(EXTENSION)
    assert assertion == record
    comparison = assertion.extension.comparison
    if comparison is not None and comparison.warning:
        print("NOVELTY-WARNING", comparison.message)


def test_other_extension(snapshot):
    assert snapshot(extension_class=JSONSnapshotExtension) == {"unrelated": 1}
"""


def make_record(shift: float = 0.0, noise: float = 0.0, seed: int = 1) -> MetricRecord:
    base = np.random.default_rng(0).uniform(0.4, 0.8, size=len(IDS))
    values = base + shift + np.random.default_rng(seed).normal(0.0, noise, size=len(IDS))
    return MetricRecord(
        suite="poetry",
        metric="quality",
        value=float(values.mean()),
        higher_is_better=True,
        per_prompt=dict(zip(IDS, values.tolist(), strict=True)),
        model="ckpt",
        judge="rules",
    )


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    monkeypatch.delenv(ROOT_ENV, raising=False)
    # In-process runs inside an xdist worker would otherwise believe they are workers too, and
    # syrupy prints no report summary there.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("RERECORD", raising=False)
    pytester.makepyfile(test_cases=TEST_FILE)
    yield pytester


def use(pytester: pytest.Pytester, record: MetricRecord) -> None:
    (pytester.path / "record.txt").write_text(record.to_json())


def snapshot_file(pytester: pytest.Pytester) -> Path:
    files = list((pytester.path / "__novelty_snapshots__" / "test_cases").glob("test_metric*"))
    assert len(files) == 1, files
    return files[0]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-rP", *args)


def fail_then_update(project: pytest.Pytester, cases: int) -> pytest.RunResult:
    """A first run fails every case for want of a snapshot; ``--snapshot-update`` then passes them
    (that run is returned)."""
    first = run(project)
    first.assert_outcomes(failed=cases)
    first.stdout.fnmatch_lines([f"*{NO_SNAPSHOT}*"])
    update = run(project, "--snapshot-update")
    update.assert_outcomes(passed=cases)
    return update


def test_first_run_fails_then_update_writes_then_rerun_passes(project: pytest.Pytester) -> None:
    use(project, make_record())
    update = fail_then_update(project, 2)
    assert "Can not relate snapshot" not in update.stdout.str()
    stored = snapshot_file(project)
    assert stored.name == "test_metric[quality_ge_0.3].novelty.jsonc"
    assert not stored.name.endswith(".json")
    assert json.loads(stored.read_text())["metric"] == "quality"
    assert MetricRecord.from_json(stored.read_text()) == MetricRecord.from_json(make_record().to_json())

    run(project).assert_outcomes(passed=2)
    # syrupy's JSON extension, used in the same file, leaves our files alone on update.
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    assert stored.exists()


def test_a_regression_fails_with_its_numbers(project: pytest.Pytester) -> None:
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    worse = make_record(shift=-0.08, noise=0.01)
    use(project, worse)
    result = run(project)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*poetry quality: regression*",
            f"*snapshot value {make_record().value:.4f}, new value {worse.value:.4f}, delta -0.0*, tolerance 0.0200*",
            f"*95% CI [[]-0.0*, -0.0*[]] over {len(IDS)} paired prompts, p-value 0.0002 (alpha 0.05; paired*",
        ]
    )


def test_drift_within_tolerance_passes_and_update_keeps_the_baseline(project: pytest.Pytester) -> None:
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    stored = snapshot_file(project)
    before, mtime = stored.read_text(), stored.stat().st_mtime_ns

    use(project, make_record(shift=-0.01, noise=0.002))
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*NOVELTY-WARNING poetry quality:*within tolerance*"])

    run(project, "--snapshot-update").assert_outcomes(passed=2)
    assert stored.read_text() == before
    assert stored.stat().st_mtime_ns == mtime


def test_noise_beyond_tolerance_passes_with_a_warning(project: pytest.Pytester) -> None:
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    base = make_record()
    noise = np.random.default_rng(4).normal(0.0, 0.3, size=len(IDS))
    values = np.array(list(base.per_prompt.values())) - 0.03 + (noise - noise.mean())
    use(project, replace(base, value=float(values.mean()), per_prompt=dict(zip(IDS, values.tolist(), strict=True))))
    result = run(project)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*NOVELTY-WARNING poetry quality:*drop not significant*"])


def test_rerecord_rewrites_on_purpose(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    drifted = make_record(shift=-0.01, noise=0.002)
    use(project, drifted)
    monkeypatch.setenv("RERECORD", "1")
    result = run(project, "--snapshot-update")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*1 snapshot updated*"])
    assert snapshot_file(project).read_text() == drifted.to_json()


def test_root_folder_from_the_environment(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    root = project.path / "baselines"
    monkeypatch.setenv(ROOT_ENV, str(root))
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    files = list(root.glob("test_cases/*.novelty.jsonc"))
    assert len(files) == 1
    assert not list((project.path / "__novelty_snapshots__").glob("**/*.novelty.jsonc"))
    run(project).assert_outcomes(passed=2)
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    assert files[0].exists()  # not taken for an unused snapshot


def test_runs_without_the_extension_leave_the_snapshots_alone(project: pytest.Pytester) -> None:
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    stored = snapshot_file(project)
    before = stored.read_text()
    # Same test names, no novelty assertion (a run that does not compare snapshots).
    project.makepyfile(test_cases="def test_metric():\n    pass\n\ndef test_other_extension():\n    pass\n")
    (project.path / "__snapshots__" / "test_cases" / "test_other_extension.json").unlink()  # unused now
    result = run(project)
    assert result.ret == 0
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    assert stored.read_text() == before


def test_update_under_xdist(project: pytest.Pytester) -> None:
    use(project, make_record())
    run(project, "-n", "2", "--snapshot-update").assert_outcomes(passed=2)
    assert snapshot_file(project).name.endswith(".novelty.jsonc")
    use(project, make_record(shift=-0.08, noise=0.01))
    result = run(project)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*poetry quality: regression*", "*p-value 0.0002*"])


CHECKING_FILE = """
from pathlib import Path

import pytest

from pytest_novelty.gate.regression import MetricRecord
from pytest_novelty.plugin.snapshots import check_snapshot


def test_metric(snapshot, request):
    record = MetricRecord.from_json(Path(__file__).with_name("record.txt").read_text())
    outcome = check_snapshot(snapshot, record)
    print("WRITTEN", outcome.written)
    error = outcome.harness_error
    print("HARNESS", None if error is None else f"{type(error).__name__} at {error.path}")
    if not outcome.passed:
        pytest.fail(" / ".join(outcome.lines), pytrace=False)
"""


def test_check_snapshot_reports_without_raising(project: pytest.Pytester) -> None:
    project.makepyfile(test_cases=CHECKING_FILE)
    use(project, make_record())
    update = fail_then_update(project, 1)
    update.stdout.fnmatch_lines(["*WRITTEN True*"])
    rerun = run(project)
    rerun.assert_outcomes(passed=1)
    rerun.stdout.fnmatch_lines(["*WRITTEN False*"])
    use(project, make_record(shift=-0.08, noise=0.01))
    worse = run(project)
    worse.assert_outcomes(failed=1)
    worse.stdout.fnmatch_lines(["*poetry quality: regression /   snapshot value*new value*delta*tolerance*"])


def _damages() -> dict[str, bytes]:
    good = make_record().to_json().encode()
    return {
        "random-bytes": random.Random(7).randbytes(700),
        "truncated-json": good[: len(good) // 2],
        "other-json": json.dumps({"format": 1, "suite": "poetry"}).encode(),
        "another-format": good.replace(b'"format": 1', b'"format": 9', 1),
        "empty": b"",
    }


@pytest.mark.parametrize("damage", list(_damages()))
def test_a_damaged_snapshot_is_an_error_naming_the_file_never_a_missing_one(
    project: pytest.Pytester, damage: str
) -> None:
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=2)
    stored = snapshot_file(project)
    bad = _damages()[damage]
    assert bad != stored.read_bytes()
    stored.write_bytes(bad)
    result = run(project)
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    assert f"{stored}: damaged snapshot (" in out and "neither used as the baseline nor replaced" in out
    # Only a missing snapshot suggests accepting the current values.
    assert NO_SNAPSHOT not in out and "--snapshot-update" not in out
    assert stored.read_bytes() == bad


def test_check_snapshot_gives_a_damaged_snapshot_its_own_outcome(project: pytest.Pytester) -> None:
    project.makepyfile(test_cases=CHECKING_FILE)
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=1)
    stored = snapshot_file(project)
    stored.write_text(stored.read_text()[:-40])
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*damaged snapshot (not valid JSON*", f"HARNESS {DamagedSnapshot.__name__} at {stored}"]
    )
    stored.unlink()  # and a missing one stays a missing one
    missing = run(project)
    missing.stdout.fnmatch_lines([f"{NO_SNAPSHOT}", "HARNESS None"])


def test_snapshot_update_replaces_a_damaged_snapshot_and_says_what_it_replaced(project: pytest.Pytester) -> None:
    project.makepyfile(test_cases=CHECKING_FILE)
    use(project, make_record())
    run(project, "--snapshot-update").assert_outcomes(passed=1)
    stored = snapshot_file(project)
    stored.write_bytes(random.Random(3).randbytes(300))
    current = make_record(shift=-0.2)
    use(project, current)
    update = run(project, "--snapshot-update")
    update.assert_outcomes(passed=1, warnings=1)
    update.stdout.fnmatch_lines(
        [
            f"*DamagedSnapshotWarning: {stored}: replaced a damaged snapshot (not UTF-8 text: byte *) with the "
            "current values",
            "WRITTEN True",
            "HARNESS None",
            "1 snapshot updated.",
        ]
    )
    assert MetricRecord.from_json(stored.read_text()) == MetricRecord.from_json(current.to_json())
    run(project).assert_outcomes(passed=1)


@pytest.mark.parametrize("damage", list(_damages()))
def test_the_command_lines_snapshot_files_treat_damage_as_the_plugin_does(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "story" / "test_metric[story-quality_ge_0.3].novelty.jsonc"
    record = make_record()
    assert SnapshotFile(path).check(record).lines == [NO_SNAPSHOT]  # missing: the one case that suggests it
    path.parent.mkdir(parents=True)
    bad = _damages()[damage]
    path.write_bytes(bad)
    store = SnapshotFile(path)
    assert store.stored() is None  # a q@Tail case takes no tail from it; check() reports the damage
    with pytest.raises(DamagedSnapshot, match=r"damaged snapshot \(") as raised:
        store.check(record)
    assert raised.value.path == str(path) and "--snapshot-update" not in str(raised.value)
    assert path.read_bytes() == bad
    assert load_snapshot(path)[2] is not None  # read as damaged, never as no snapshot

    with pytest.warns(DamagedSnapshotWarning, match=r"replaced a damaged snapshot \(.+\) with the current values"):
        outcome = SnapshotFile(path, update=True).check(record)
    assert outcome.written and outcome.damaged is not None and outcome.harness_error is None
    assert load_snapshot(path)[1] == MetricRecord.from_json(record.to_json())
