"""The README's examples are what the code prints, and its workflow's commands are ones the code has.

Every block of README.md between ``<!-- generated: NAME -->`` markers is produced again by
``docs/readme_examples.py`` (the same commands on the demo) and compared: every word and the
layout exactly, every number within the script's tolerance (another CPU model may sample a few
other words from the same weights). A failure names the stale example; ``python
docs/readme_examples.py --write`` regenerates it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_examples", REPO / "docs" / "readme_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


EXAMPLES = _examples()
SHOWN = EXAMPLES.blocks((REPO / "README.md").read_text(encoding="utf-8"))


def test_every_generated_example_is_in_the_readme() -> None:
    assert set(SHOWN) == set(EXAMPLES.EXAMPLES)


def test_the_comparison_catches_a_stale_number_and_a_changed_word() -> None:
    shown = "novelty@5   0.4995  >= 0.3     pass\n"
    assert EXAMPLES.differences(shown, "novelty@5   0.4995  >= 0.3     pass\n") == []
    assert EXAMPLES.differences(shown, "novelty@5   0.5100  >= 0.3     pass\n") == []  # within 0.03
    assert EXAMPLES.differences(shown, "novelty@5   0.3387  >= 0.3     pass\n")  # the stale series example
    assert EXAMPLES.differences(shown, "novelty@5   0.4995  >= 0.3     FAIL\n")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES.EXAMPLES))
def test_the_example_is_what_the_code_prints(name: str, demo_run_cache: Path) -> None:
    produced = EXAMPLES.render(name, demo_run_cache)
    problems = EXAMPLES.differences(SHOWN[name], produced)
    assert not problems, f"README.md example '{name}' is stale (python docs/readme_examples.py --write):\n" + "\n".join(
        problems
    )


def test_the_workflow_uses_options_the_code_has() -> None:
    from pytest_novelty.pipeline.options import OPTIONS
    from pytest_novelty.plugin.snapshots import NoveltySnapshotExtension

    text = (REPO / ".github" / "workflows" / "gate.yml").read_text(encoding="utf-8")
    ours = {o.long for o in OPTIONS} | {o.short for o in OPTIONS if o.short}
    # The options given to pytest: those of the args=(...) and args+=(...) lines, commented ones too.
    lines = re.findall(r"args\+?=\((.*?)\)", text, re.S)
    assert lines, "gate.yml builds no pytest arguments"
    used = set(re.findall(r"(?<![\w-])(--(?:novelty-)?[a-z][a-z-]+)", " ".join(lines)))
    others = {"--snapshot-update", "--html", "--self-contained-html", "--junitxml", "--upgrade", "--quiet"}
    unknown = sorted(u for u in used if u not in ours and u not in others and not u.startswith("--tb"))
    assert not unknown, f"gate.yml uses options the code does not have: {unknown}"
    folders = set(re.findall(r"__[a-z_]*snapshots__", text))
    assert folders <= {NoveltySnapshotExtension.snapshot_dirname}, folders
