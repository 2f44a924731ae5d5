"""Helpers for the plugin's pytester integration tests: a suite folder over the tiny checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.suite_text import story_prompts, suite_toml, write_story_suite_folder

PROMPTS = story_prompts(6)

SUITE = suite_toml(thresholds=[("originality@4", 0.0), ("quality", 0.0)])


@pytest.fixture
def suite_dir(pytester: pytest.Pytester) -> Path:
    """A folder with one story suite over six prompts; thresholds adjustable via write_suite."""
    return write_story_suite_folder(pytester.path / "gate-suites", PROMPTS, SUITE)


@pytest.fixture
def novelty_args(suite_dir: Path, tiny_checkpoint: Path, tiny_index: Path, tmp_path: Path) -> list[str]:
    """Command-line arguments that gate the tiny checkpoint on the suite folder."""
    return [
        "--model",
        str(tiny_checkpoint),
        f"--novelty-suites={suite_dir}",
        f"--novelty-cache={tmp_path / 'cache'}",
        f"--originality=infini-gram:{tiny_index}",
        "-p",
        "no:cacheprovider",
    ]


@pytest.fixture(scope="module")
def warm_story(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path, tiny_index: Path) -> Path:
    """Every answer and score of the tiny checkpoint's gate on the suite ``suite_dir`` writes (its
    thresholds, gate and judge do not change the answers); a test whose point is not the generation
    copies it into its own cache (``tests.warm_cache.copy_warm``) and skips a cold run."""
    from tests.warm_cache import story_cache

    return story_cache(tmp_path_factory, tiny_checkpoint, tiny_index)
