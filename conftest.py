"""Repository-wide pytest settings for pytest-novelty's own test suite.

Kept light: it is also loaded by `pytest --model ...` runs in this checkout.
"""

from __future__ import annotations

import pytest

# Builders and speed scripts are not tests.
collect_ignore = ["fixtures", "benchmarks"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rebuild-demo",
        action="store_true",
        help="also run the tests marked rebuild: they train the demo from scratch (about 5 minutes on 2 cores)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``rebuild`` unless ``--rebuild-demo`` is given, and tests marked ``gpu``
    when no CUDA device is present."""
    if not config.getoption("--rebuild-demo", default=False):
        skip_rebuild = pytest.mark.skip(reason="trains the demo from scratch (5 minutes): run with --rebuild-demo")
        for item in items:
            if item.get_closest_marker("rebuild"):
                item.add_marker(skip_rebuild)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none is available on this machine")
    for item in gpu_items:
        item.add_marker(skip)
