"""Suite keys of judge calibration: ``[scoring] calibration`` and ``[gate] min_judge_agreement``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_novelty.gate.agreement import agreement_failure
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.suites.suite_file import load_suite

BASE = """
task = "story"
[prompts]
source = "builtin:story"
[scoring]
{scoring}
[gate]
{gate}
[[thresholds]]
metric = "novelty@5"
min = 0.3
[[thresholds]]
metric = "originality@5"
min = 0.3
"""


def load(tmp_path: Path, scoring: str = "", gate: str = "") -> object:
    path = tmp_path / "s.toml"
    path.write_text(BASE.format(scoring=scoring, gate=gate))
    for name in ("graded.jsonl", "g.jsonl"):
        (tmp_path / name).write_text('{"id": 1, "prompt": "p", "response": "r", "human": 1}\n')
    return load_suite(path)


def test_defaults_are_off(tmp_path: Path) -> None:
    suite = load(tmp_path)
    assert suite.scoring.calibration is None and suite.gate.min_judge_agreement is None  # type: ignore[attr-defined]


def test_keys_are_read(tmp_path: Path) -> None:
    suite = load(tmp_path, 'calibration = "graded.jsonl"', "min_judge_agreement = 0.4")
    assert suite.scoring.calibration == "graded.jsonl"  # type: ignore[attr-defined]
    assert suite.gate.min_judge_agreement == 0.4  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("scoring", "gate", "message"),
    [
        ("", "min_judge_agreement = 0.3", "gate.min_judge_agreement: needs a calibration file"),
        ('calibration = "g.jsonl"', "min_judge_agreement = 1.5", "gate.min_judge_agreement: must be between -1 and 1"),
        ('calibration = "g.jsonl"', 'min_judge_agreement = "high"', "gate.min_judge_agreement: expected float"),
        ("calibration = 3", "", "scoring.calibration: expected str"),
        ('calibraton = "g.jsonl"', "", "did you mean 'calibration'"),
        ('calibration = "absent.jsonl"', "", "scoring.calibration: file not found: 'absent.jsonl'.*calibration-file"),
    ],
)
def test_bad_keys_name_the_file_and_key(tmp_path: Path, scoring: str, gate: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load(tmp_path, scoring, gate)
    assert str(tmp_path / "s.toml") in str(caught.value)


def test_only_quality_based_cases_need_agreement(tmp_path: Path) -> None:
    suite = load(tmp_path, 'calibration = "g.jsonl"', "min_judge_agreement = 0.3")
    novelty, originality = suite.thresholds  # type: ignore[attr-defined]
    low = {"spearman": 0.1, "n": 40, "file": "g.jsonl"}
    high = {"spearman": 0.5, "n": 40, "file": "g.jsonl"}
    message = agreement_failure(suite, novelty, low)  # type: ignore[arg-type]
    assert message is not None and "Spearman rho 0.100 (n = 40, g.jsonl)" in message
    assert agreement_failure(suite, originality, low) is None  # type: ignore[arg-type]
    assert agreement_failure(suite, novelty, high) is None  # type: ignore[arg-type]
    undefined = {"spearman": None, "n": 3, "file": "g.jsonl"}
    assert "rho undefined" in str(agreement_failure(suite, novelty, undefined))  # type: ignore[arg-type]
