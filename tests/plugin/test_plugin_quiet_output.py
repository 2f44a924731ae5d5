"""Normal output carries no third-party notices: the demo build keeps transformers quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

TINY_RECIPE = dict(vocab_size=300, n_embd=16, n_layer=1, n_head=1, n_positions=64, batch_size=4, seq_len=32)


@pytest.mark.slow
def test_tiny_demo_build_prints_only_its_own_lines(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    from transformers.utils import logging as hf_logging

    from pytest_novelty.pipeline.demo import _load_builder, quiet_transformers

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    with quiet_transformers():
        _load_builder().build_demo(tmp_path / "out", steps=4, early_step=2, docs=300, recipe=TINY_RECIPE)
    err = capfd.readouterr().err
    assert (tmp_path / "out" / "demo" / "config.json").is_file()
    assert "demo: built in" in err
    assert "[transformers]" not in err and "loss_type" not in err
    assert "Writing model shards" not in err
    # transformers' settings are as they were.
    assert hf_logging.get_verbosity() == verbosity and hf_logging.is_progress_bar_enabled() == bars
