"""`--model`: the plugin gates a real tiny checkpoint; pass, fail and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_passing_gate_prints_table(pytester: pytest.Pytester, novelty_args: list[str]) -> None:
    result = pytester.runpytest_subprocess(*novelty_args, "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_metric?story-originality@4>=0? PASSED*",
            "*test_metric?story-quality>=0? PASSED*",
            "*novelty gate*",
            "suite story*",
            "*originality@4*>= 0*pass*",
        ]
    )


def test_failing_threshold_names_metric_value_and_bound(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    text = (suite_dir / "story.toml").read_text()
    (suite_dir / "story.toml").write_text(text[: text.rindex("min = 0.0")] + "min = 0.99\n")
    result = pytester.runpytest_subprocess(*novelty_args)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*story: quality = 0.* is below the minimum 0.99*", "*quality*>= 0.99*FAIL*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_without_model_the_plugin_does_nothing(pytester: pytest.Pytester, suite_dir: Path) -> None:
    pytester.makepyfile("def test_plain(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "novelty gate" not in result.stdout.str()


def test_missing_checkpoint_folder_is_one_clear_line(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    args = list(novelty_args)
    args[1] = str(tmp_path / "no-such-checkpoint")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *no-such-checkpoint: --model: checkpoint folder not found*"])
    assert "Traceback" not in result.stderr.str()


def test_folder_without_tokenizer_is_one_clear_line(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path, tiny_checkpoint: Path
) -> None:
    bare = tmp_path / "weights-only"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((tiny_checkpoint / name).read_bytes())
    args = list(novelty_args)
    args[1] = str(bare)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *weights-only: --model: no tokenizer files*save_pretrained*"])


def test_broken_suite_file_is_one_clear_line(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    (suite_dir / "story.toml").write_text((suite_dir / "story.toml").read_text().replace("samples", "smaples"))
    result = pytester.runpytest(*novelty_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *story.toml: generation.smaples: unknown key (did you mean 'samples'?)*"])
