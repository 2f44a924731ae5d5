"""One builder of the run configuration for pytest's options and the command line's."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

from pytest_novelty.cli import build_parser
from pytest_novelty.pipeline.options import CLI, check_values
from pytest_novelty.pipeline.runner import RunConfig


def _settings(config: RunConfig) -> dict[str, object]:
    return {k: v for k, v in asdict(config).items() if k not in ("log", "progress")}


def test_the_command_line_and_pytest_options_give_the_same_configuration(tmp_path: Path) -> None:
    args = build_parser().parse_args([
        "run", "--model", "ckpt", "--device", "cpu", "--judge", "openai:j", "--judge-base-url", "http://h/v1",
        "--originality", "infini-gram:idx", "--trust-remote-code", "--gpus", "2", "--base-model", "base",
        "--model-base-url", "http://m/v1", "--model-revision", "r1", "--generator", "vllm",
    ])  # fmt: skip
    pytest_options = SimpleNamespace(
        novelty_device="cpu", novelty_judge="openai:j", novelty_judge_base_url="http://h/v1",
        novelty_originality="infini-gram:idx", novelty_trust_remote_code=True, novelty_gpus_per_worker=2,
        novelty_base_model="base", novelty_model_base_url="http://m/v1", novelty_model_revision="r1",
        novelty_generator="vllm", novelty_seed=None,
    )  # fmt: skip
    check_values(args, CLI)  # the command line's values as main() checks them (a number is one then)
    from_cli = RunConfig.from_options(args, model="ckpt", cache_dir=tmp_path)
    from_pytest = RunConfig.from_options(pytest_options, model="ckpt", cache_dir=tmp_path, worker="gw1")
    assert _settings(from_cli) == {**_settings(from_pytest), "worker": "main"}
    assert (from_cli.device, from_cli.gpus_per_worker, from_cli.trust_remote_code) == ("cpu", 2, True)
    assert from_pytest.worker == "gw1" and from_cli.seed is None


def test_options_left_out_keep_the_defaults(tmp_path: Path) -> None:
    config = RunConfig.from_options(SimpleNamespace(novelty_seed=7), model="m", cache_dir=tmp_path)
    assert _settings(config) == {**_settings(RunConfig(model="m", cache_dir=tmp_path)), "seed": 7}
