"""Fixtures of the demo tests: the demo builder, loaded by path the way the package loads it."""

from __future__ import annotations

from types import ModuleType

import pytest

from pytest_novelty.pipeline import demo


@pytest.fixture(scope="module")
def build() -> ModuleType:
    """``fixtures/demo/build.py`` of this checkout, loaded afresh for each test module."""
    return demo._load_builder()
