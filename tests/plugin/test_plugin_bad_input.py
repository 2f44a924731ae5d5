"""Bad input is exit 4 with one clean line naming what the user typed, found before any model loads.

Each case here was reproduced on the code before this round: a typo in ``--device`` trained a
traceback out of torch, a prompt too long for the context was found after the model had loaded and
ended the run as a harness error, a report path naming a file crashed pytest (INTERNALERROR), and
messages blamed ``--model`` or a suite file for what another option held.
"""

from __future__ import annotations

import importlib.util
import json
import socket
from pathlib import Path

import pytest

from tests.suite_text import story_prompts

pytestmark = pytest.mark.slow

USAGE = pytest.ExitCode.USAGE_ERROR


def output(result: pytest.RunResult) -> str:
    return "\n".join(result.outlines + result.errlines)


def clean_usage_error(result: pytest.RunResult, *expected: str) -> str:
    """The run ended with exit 4 and one ``ERROR:`` line holding every expected part, no traceback."""
    text = output(result)
    assert result.ret == USAGE, text
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, text
    for part in expected:
        assert part in errors[0], errors[0]
    assert "Traceback" not in text and "_pytest.outcomes" not in text and "INTERNALERROR" not in text
    return errors[0]


def test_a_device_typo_is_refused_before_anything_loads(pytester: pytest.Pytester, novelty_args: list[str]) -> None:
    result = pytester.runpytest_subprocess(*novelty_args, "--device", "gpu")
    clean_usage_error(result, "--device", "'gpu' is not a device", "cuda:N")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_a_gpu_this_machine_lacks_is_bad_input(pytester: pytest.Pytester, novelty_args: list[str]) -> None:
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() > 3:
        pytest.skip("this machine has a fourth GPU")
    result = pytester.runpytest_subprocess(*novelty_args, "--device", "cuda:3")
    clean_usage_error(result, "--device", "cuda:3")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_a_missing_generator_backend_names_its_extra(pytester: pytest.Pytester, novelty_args: list[str]) -> None:
    result = pytester.runpytest_subprocess(*novelty_args, "--generator", "vllm")
    clean_usage_error(result, "--generator", 'pip install "pytest-novelty[vllm]"')


def test_a_prompt_longer_than_the_context_is_found_before_the_model_loads(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    prompts = story_prompts(3)
    prompts[1]["text"] = "Lily " + "and Tom went to the park " * 40  # beyond the tiny model's 128 tokens
    (suite_dir / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in prompts))
    result = pytester.runpytest_subprocess(*novelty_args)
    line = clean_usage_error(result, "prompts.jsonl line 2: the model input is", "context of 128 tokens")
    assert "prompts.source" in line
    assert "loading" not in output(result)  # no model was loaded to find it


@pytest.mark.parametrize("option", ["--novelty-report", "--novelty-cache"])
def test_a_folder_option_given_a_file_is_bad_input(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path, option: str
) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    args = [a for a in novelty_args if not a.startswith(f"{option}=")]
    result = pytester.runpytest_subprocess(*args, f"{option}={file}")
    clean_usage_error(result, option, "a file is in the way of the folder; give a folder")


def test_a_suites_option_given_a_file_asks_for_the_folder_of_suite_files(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    """Suites are never created: the message says what to give, not that the folder "is created
    when missing" (true of the cache and report folders only)."""
    args = [a for a in novelty_args if not a.startswith("--novelty-suites=")]
    result = pytester.runpytest_subprocess(*args, f"--novelty-suites={suite_dir / 'story.toml'}")
    line = clean_usage_error(result, "--novelty-suites", "not a folder; give the folder of suite files (*.toml)")
    assert "created" not in line


def test_options_that_make_no_sense_are_refused(pytester: pytest.Pytester, novelty_args: list[str]) -> None:
    result = pytester.runpytest_subprocess(*novelty_args, "--gpus-per-worker", "0")
    clean_usage_error(result, "--gpus-per-worker", "0 is out of range: give a whole number from 1 to 1,024")
    result = pytester.runpytest_subprocess(*novelty_args, "--model-base-url", "http://127.0.0.1:9/v1")
    clean_usage_error(result, "--model-base-url", "applies to a served model")
    result = pytester.runpytest_subprocess(*novelty_args, "--model-revision", "v2")
    clean_usage_error(result, "--model-revision", "local folder")


def test_messages_name_the_option_the_user_typed(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / "missing"
    result = pytester.runpytest_subprocess(*novelty_args, "--baseline-model", str(missing))
    line = clean_usage_error(result, "--baseline-model", "checkpoint folder not found")
    assert "--model:" not in line and "'demo'" not in line


def test_a_lora_adapter_whose_base_is_missing_names_its_config_field(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(tmp_path / "gone")}))
    args = list(novelty_args)
    args[args.index("--model") + 1] = str(adapter)
    result = pytester.runpytest_subprocess(*args)
    line = clean_usage_error(result, "adapter_config.json: base_model_name_or_path", "--base-model")
    assert "--model:" not in line


def test_a_bad_judge_in_a_suite_file_names_the_file_and_key(
    pytester: pytest.Pytester, novelty_args: list[str], suite_dir: Path
) -> None:
    suite = suite_dir / "story.toml"
    suite.write_text(suite.read_text().replace('judge = "rules"', 'judge = "rulez"'))
    clean_usage_error(pytester.runpytest_subprocess(*novelty_args), str(suite), "scoring.judge", "'rules'")


def test_a_bad_originality_option_is_not_blamed_on_a_suite_file(
    pytester: pytest.Pytester, novelty_args: list[str], tmp_path: Path
) -> None:
    args = [a for a in novelty_args if not a.startswith("--originality=")]
    result = pytester.runpytest_subprocess(*args, f"--originality=infini-gram:{tmp_path / 'nope'}")
    assert result.ret in (USAGE, 8), output(result)
    text = output(result)
    assert "--originality" in text and "story.toml" not in text


def test_the_command_line_gives_bad_input_the_same_status(tmp_path: Path, suite_dir: Path, tiny_checkpoint: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_novelty.cli import main

    assert main(["run", "--model", str(tiny_checkpoint), "--suites", str(suite_dir), "--device", "gpu"]) == 4
    assert "--device: 'gpu' is not a device" in capsys.readouterr().err
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["run", "--model", str(tiny_checkpoint), "--gpus-per-worker", "0", "--originality", f"x:{port}"]) == 4
    assert "--gpus-per-worker: 0 is out of range" in capsys.readouterr().err  # before any spec is looked at
