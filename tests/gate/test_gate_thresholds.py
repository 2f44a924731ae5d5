"""Threshold modes: point, lenient and strict decide on the value or its interval, and say which decided."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pytest_novelty.gate import check_threshold
from pytest_novelty.infra.errors import ConfigError
from pytest_novelty.metrics.bootstrap import Interval
from pytest_novelty.metrics.uncertainty import mean_interval
from pytest_novelty.suites.schema import THRESHOLD_MODES, Threshold
from pytest_novelty.suites.suite_file import load_suite
from tests.gate.test_gate_verdicts import SUITE as VERDICT_SUITE

MIN = Threshold("novelty@5", ">=", 0.30)
MAX = Threshold("unscored", "<=", 0.05)


def test_without_an_interval_the_check_is_as_before() -> None:
    passed = check_threshold("story", MIN, {"novelty@5": 0.3387})
    failed = check_threshold("story", MIN, {"novelty@5": 0.2987})
    assert passed.passed and passed.message == "story: novelty@5 = 0.3387 meets >= 0.3"
    assert not failed.passed and failed.message == "story: novelty@5 = 0.2987 is below the minimum 0.3"
    assert passed.ci is None and passed.within_noise is None and passed.outcome == "pass"
    missing = check_threshold("story", MIN, {})
    assert not missing.passed and "could not be computed" in missing.message


# (value, interval) → the verdict of each mode, for a minimum of 0.30
CASES = [
    (0.34, (0.32, 0.36), {"point": True, "lenient": True, "strict": True}, False),  # clearly above
    (0.31, (0.28, 0.34), {"point": True, "lenient": True, "strict": False}, True),  # above, within noise
    (0.29, (0.26, 0.32), {"point": False, "lenient": True, "strict": False}, True),  # below, within noise
    (0.25, (0.22, 0.28), {"point": False, "lenient": False, "strict": False}, False),  # clearly below
]


@pytest.mark.parametrize(("value", "ci", "verdicts", "within"), CASES)
@pytest.mark.parametrize("mode", THRESHOLD_MODES)
def test_each_mode_decides_on_the_value_or_the_interval(
    value: float, ci: tuple[float, float], verdicts: dict[str, bool], within: bool, mode: str
) -> None:
    verdict = check_threshold("story", MIN, {"novelty@5": value}, interval=Interval(*ci, 0.95, 100, "t"), mode=mode)
    assert verdict.passed is verdicts[mode]
    assert verdict.within_noise is within and verdict.ci == ci and verdict.mode == mode
    assert f"{mode} mode" in verdict.message and f"95% CI [{ci[0]:.4f}, {ci[1]:.4f}]" in verdict.message
    assert verdict.outcome == ("pass" if verdicts[mode] else "FAIL") + (" (within noise)" if within else "")


@pytest.mark.parametrize("mode", THRESHOLD_MODES)
def test_a_maximum_mirrors_a_minimum(mode: str) -> None:
    for value, ci, verdicts, within in CASES:
        mirrored = (0.35 - value, (0.35 - ci[1], 0.35 - ci[0]))  # x -> 0.35 - x maps the min 0.30 onto the max 0.05
        bound = Threshold("unscored", "<=", 0.05)
        verdict = check_threshold("s", bound, {"unscored": mirrored[0]}, interval=mirrored[1], mode=mode)
        assert verdict.passed is verdicts[mode] and verdict.within_noise is within


def test_the_messages_say_which_mode_decided_and_why() -> None:
    interval = Interval(0.26, 0.32, 0.95, 100, "studentized")
    lenient = check_threshold("story", MIN, {"novelty@5": 0.29}, interval=interval, mode="lenient")
    assert lenient.message == (
        "story: novelty@5 = 0.2900 passes >= 0.3 in lenient mode: its 95% CI [0.2600, 0.3200] reaches the bound "
        "(within noise)"
    )
    low = Interval(0.22, 0.28, 0.95, 100, "studentized")
    failed = check_threshold("story", MIN, {"novelty@5": 0.25}, interval=low, mode="lenient")
    assert failed.message.endswith("in lenient mode: its whole 95% CI [0.2200, 0.2800] lies below the bound")
    strict = check_threshold("story", MIN, {"novelty@5": 0.31}, interval=Interval(0.28, 0.34, 0.95, 100, "t"),
                             mode="strict")
    assert strict.message.endswith("fails >= 0.3 in strict mode: its 95% CI [0.2800, 0.3400] reaches below the bound "
                                   "(within noise)")
    passed = check_threshold("s", MAX, {"unscored": 0.01}, interval=(0.0, 0.03), mode="strict")
    assert passed.passed
    assert passed.message.endswith("in strict mode: its whole CI [0.0000, 0.0300] lies below the bound")


def test_a_bound_set_at_the_suites_own_value() -> None:
    # What issue 22 asks of the demo, here on a suite's own interval: point passes at the value itself
    # and fails just above it, lenient passes, strict fails; within noise every time.
    rng = np.random.default_rng(0)
    novelty = np.clip(0.34 + rng.normal(0.0, 0.08, size=(100, 1)) + rng.normal(0.0, 0.05, size=(100, 2)), 0, 1)
    interval = mean_interval(novelty)
    value = interval.estimate
    for bound, point in ((value, True), (round(value, 4) + 0.0001, False)):
        threshold = Threshold("novelty@5", ">=", bound)
        verdicts = {m: check_threshold("story", threshold, {"novelty@5": value}, interval=interval, mode=m)
                    for m in THRESHOLD_MODES}
        assert verdicts["point"].passed is point
        assert verdicts["lenient"].passed and not verdicts["strict"].passed
        assert all(v.within_noise for v in verdicts.values())


def test_an_undefined_interval_reaches_everything_and_a_missing_value_fails() -> None:
    undefined = Interval(math.nan, math.nan, 0.95, 1, "studentized", 0.31)
    lenient = check_threshold("s", MIN, {"novelty@5": 0.25}, interval=undefined, mode="lenient")
    strict = check_threshold("s", MIN, {"novelty@5": 0.35}, interval=undefined, mode="strict")
    assert lenient.passed and not strict.passed and lenient.within_noise and strict.within_noise
    assert "too few prompts" in strict.message and strict.ci is not None and not any(map(math.isfinite, strict.ci))
    for mode in THRESHOLD_MODES:
        verdict = check_threshold("s", MIN, {}, interval=Interval(0.2, 0.4, 0.95, 50, "t"), mode=mode)
        assert not verdict.passed and "could not be computed" in verdict.message


def test_modes_need_an_interval_and_a_known_name() -> None:
    with pytest.raises(ValueError, match="lenient threshold mode needs"):
        check_threshold("s", MIN, {"novelty@5": 0.3}, mode="lenient")
    with pytest.raises(ValueError, match="threshold mode must be one of"):
        check_threshold("s", MIN, {"novelty@5": 0.3}, interval=(0.2, 0.4), mode="loose")
    with pytest.raises(ValueError, match="above its high bound"):
        check_threshold("s", MIN, {"novelty@5": 0.3}, interval=(0.4, 0.2))


def _suite(gate: str) -> str:
    """The one-threshold suite of the verdict tests, with a ``[gate]`` table of ``gate``."""
    return VERDICT_SUITE.format(metric="novelty@5", bound="min = 0.3", gate=gate)


def test_the_suite_file_sets_the_threshold_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(_suite(""))
    assert load_suite(path).gate.threshold_mode == "point"
    for mode in THRESHOLD_MODES:
        path.write_text(_suite(f'threshold_mode = "{mode}"'))
        assert load_suite(path).gate.threshold_mode == mode


@pytest.mark.parametrize(("value", "words"), [('"strictt"', "did you mean 'strict'"), ("1", "expected str")])
def test_a_bad_threshold_mode_names_the_key_and_the_choices(tmp_path: Path, value: str, words: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(_suite(f"threshold_mode = {value}"))
    with pytest.raises(ConfigError, match=words) as info:
        load_suite(path)
    assert "gate.threshold_mode" in str(info.value) and str(path) in str(info.value)
