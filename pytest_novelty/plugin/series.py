"""``--model-series`` in a pytest session: the checkpoints found, checked, and the newest made ``--model``."""

from __future__ import annotations

import pytest

from pytest_novelty.infra.errors import NoveltyError
from pytest_novelty.pipeline.series import Checkpoint, check_series, find_checkpoints
from pytest_novelty.suites.schema import Suite

SERIES = pytest.StashKey[list[Checkpoint]]()
"""The session's series, in step order (set by :func:`configure_series`)."""


def configure_series(config: pytest.Config) -> None:
    """``--model-series``: find the checkpoints, check each, and make the newest the candidate
    (``--model``); the list goes to ``config.stash[SERIES]``. Bad input is a ``UsageError``."""
    spec = str(config.option.novelty_model_series)
    try:
        checkpoints = find_checkpoints(spec)
    except NoveltyError as exc:
        raise pytest.UsageError(str(exc)) from None
    # An xdist worker receives the controller's options, --model already set to the newest checkpoint.
    if config.option.novelty_model and config.option.novelty_model != checkpoints[-1].path:
        raise pytest.UsageError("give --model or --model-series, not both: the series' newest checkpoint is the model")
    try:
        check_series(checkpoints, trust_remote_code=config.option.novelty_trust_remote_code,
                     base_model=config.option.novelty_base_model)
    except NoveltyError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SERIES] = checkpoints
    config.option.novelty_model = checkpoints[-1].path


def spread_series(suite: Suite) -> bool:
    """Whether a series' earlier checkpoints on ``suite`` are units of work of their own
    (``test_checkpoint`` items that xdist spreads over its workers). A suite gated against the
    series' best earlier checkpoint needs them all before its cases decide, so they are scored
    where its cases run, one after another."""
    return suite.gate.against != "series-best"
