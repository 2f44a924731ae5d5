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


@pytest.mark.slow
def test_a_layers_notice_reaches_the_terminal_once_past_the_capture(
    pytester: pytest.Pytester, novelty_args: list[str], tiny_index: Path
) -> None:
    """A notice from inside a layer (here: an index that records no checksums) is one line on
    pytest's terminal, as the plugin's own lines are, not a write to a captured stderr."""
    import json
    import shutil

    from pytest_novelty.scoring.originality.index import INFO_FILE

    index = pytester.path / "old-index"
    shutil.copytree(tiny_index, index)
    meta = json.loads((index / INFO_FILE).read_text())
    del meta["checksums"]
    (index / INFO_FILE).write_text(json.dumps(meta))
    args = [a if not a.startswith("--originality=") else f"--originality=infini-gram:{index}" for a in novelty_args]
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 0
    notes = [line for line in result.outlines if "records no checksums" in line]
    assert len(notes) == 1 and notes[0].startswith("[novelty] note: ")
    assert not any("records no checksums" in line for line in result.errlines)
