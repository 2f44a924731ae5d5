"""The integrations sit between the report and the front ends: they import the layers (report,
pipeline, ...) but no front end, no layer imports them, and importing them loads no tracker."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_novelty"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_integrations_import_no_front_end_and_no_layer_imports_them() -> None:
    for path in (PACKAGE / "integrations").glob("*.py"):
        front = {n for n in _imports(path) if n.startswith(("pytest_novelty.plugin", "pytest_novelty.cli"))}
        assert not front, (path.name, front)
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name in ("integrations", "plugin", "cli"):  # the front ends may call them
            continue
        assert not {n for n in _imports(path) if n.startswith("pytest_novelty.integrations")}, path


def test_importing_the_package_loads_no_tracker_and_no_transformers() -> None:
    code = ("import sys, pytest_novelty.integrations, pytest_novelty.integrations.html; "
            "print(sorted(m for m in ('wandb', 'mlflow', 'tensorboard', 'transformers', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
