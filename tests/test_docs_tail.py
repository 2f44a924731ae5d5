"""docs/tail.md's examples are what the code prints (as the README's are: tests/test_readme_examples.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tail_examples", REPO / "docs" / "tail_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


EXAMPLES = _examples()
SHOWN = EXAMPLES.SHARED.blocks((REPO / "docs" / "tail.md").read_text(encoding="utf-8"))


def test_every_generated_example_is_on_the_page() -> None:
    assert set(SHOWN) == set(EXAMPLES.EXAMPLES)
    assert (REPO / "docs" / "tail-agreement.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES.EXAMPLES))
def test_the_example_is_what_the_code_prints(name: str, demo_run_cache: Path) -> None:
    produced = EXAMPLES.render(name, demo_run_cache)
    problems = EXAMPLES.SHARED.differences(SHOWN[name], produced)
    stale = f"docs/tail.md example '{name}' is stale (python docs/tail_examples.py --write):\n"
    assert not problems, stale + "\n".join(problems)
