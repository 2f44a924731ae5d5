"""Helpers for the plugin's pytester integration tests: a suite folder over the tiny checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.suite_text import suite_toml

PROMPTS = [
    {"id": f"p{i}", "text": f"{name} and {other} went to the {place}.", "meta": {"characters": [name, other]}}
    for i, (name, other, place) in enumerate(
        [
            ("Lily", "Tom", "park"),
            ("Mia", "Ben", "garden"),
            ("Sam", "Anna", "beach"),
            ("Max", "Lucy", "forest"),
            ("Tom", "Mia", "school"),
            ("Ben", "Lily", "house"),
        ]
    )
]

SUITE = suite_toml(thresholds=[("originality@4", 0.0), ("quality", 0.0)])


@pytest.fixture
def suite_dir(pytester: pytest.Pytester) -> Path:
    """A folder with one story suite over six prompts; thresholds adjustable via write_suite."""
    folder = pytester.path / "gate-suites"
    folder.mkdir()
    (folder / "prompts.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    (folder / "story.toml").write_text(SUITE)
    return folder


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
