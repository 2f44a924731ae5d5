"""Repository-wide pytest settings for pytest-novelty's own test suite.

Kept light: it is also loaded by `pytest --model ...` runs in this checkout.
"""

from __future__ import annotations

import pytest

# Builders and speed scripts are not tests.
collect_ignore = ["fixtures", "benchmarks"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``gpu`` when no CUDA device is present."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none is available on this machine")
    for item in gpu_items:
        item.add_marker(skip)
