"""The producer of docs/architecture.md's picture of the layers, drawn from the package's own imports.

Each layer is a box with its folders and its number of modules; an arrow runs from a layer to each
layer one of its modules imports (type-only and function-level imports included). Drawn from the
code at every check, so the picture cannot drift from it: ``docs/readme_examples.py`` takes this
producer into its table, and ``python docs/readme_examples.py --write`` redraws it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "pytest_novelty"

LAYERS = {
    "front ends": ("plugin", "cli", "integrations", ""),
    "report": ("report",),
    "gate": ("gate",),
    "pipeline": ("pipeline",),
    "metrics": ("metrics",),
    "scoring": ("scoring",),
    "generation": ("generation",),
    "suites": ("suites",),
    "infra": ("infra",),
}
"""The layers from the top down, and the folders of the package each holds ('' is the package root)."""


def layer_of(module: str) -> str:
    """The layer of a dotted module name of the package."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    return next(name for name, folders in LAYERS.items() if top in folders)


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def layer_imports() -> tuple[dict[str, int], set[tuple[str, str]]]:
    """The number of modules of each layer, and every (importer's layer, imported layer) pair."""
    modules = _modules()
    counts = dict.fromkeys(LAYERS, 0)
    edges: set[tuple[str, str]] = set()
    for name, path in modules.items():
        mine = layer_of(name)
        counts[mine] += 1
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported = [node.module]
            else:
                continue
            for other in imported:
                if other.startswith("pytest_novelty.") and layer_of(other) != mine:
                    edges.add((mine, layer_of(other)))
    return counts, edges


def _node(name: str) -> str:
    return name.replace(" ", "_")


def layers(cache: Path) -> str:
    """The mermaid picture of the layers (``cache`` is the examples' demo cache: not used here)."""
    counts, edges = layer_imports()
    lines = ["flowchart TD"]
    for name, folders in LAYERS.items():
        where = ", ".join(f"{f}/" for f in folders if f) or name
        lines.append(f'    {_node(name)}["{name}: {where}, {counts[name]} modules"]')
    order = list(LAYERS)
    for importer, imported in sorted(edges, key=lambda e: (order.index(e[0]), order.index(e[1]))):
        lines.append(f"    {_node(importer)} --> {_node(imported)}")
    return "\n".join(lines)


EXAMPLES: dict[str, tuple[str, Callable[[Path], str]]] = {"layers": ("```mermaid", layers)}
