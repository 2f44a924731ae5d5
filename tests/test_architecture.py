"""The package's layers hold: every import goes to its own layer or to one to its left, no modules
import each other in a circle, and the map in ARCHITECTURE.md names every module.

The rule is read from the code as it is (every ``import`` and ``from ... import`` of a
``pytest_novelty`` module, type-only imports included, wherever they stand), so a new import that
runs against the flow of data fails here with the two modules named.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "pytest_novelty"

# The layers, left to right: a module may import from its own layer and from those before it.
LAYERS = ("infra", "suites", "generation", "scoring", "metrics", "pipeline", "gate", "report", "front ends")
FRONT_ENDS = ("plugin", "cli", "integrations")
# The metrics are pure functions over arrays: they import no other layer at all.
ISOLATED = {"metrics"}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top in FRONT_ENDS or top == "":
        return "front ends"  # the package root re-exports for users, like a front end
    assert top in LAYERS, f"{module} is in no layer; add it to ARCHITECTURE.md and to LAYERS here"
    return top


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported pytest_novelty module) for every import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("pytest_novelty")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pytest_novelty"):
            if node.module == "pytest_novelty":
                found += [(node.lineno, f"pytest_novelty.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at ``root`` (its folder) and the modules of it that it imports, type-only
    and function-level imports included. ``from pkg import name`` imports the module ``pkg.name`` where
    there is one (a submodule), else ``pkg`` itself."""
    base = root.parent
    names = {".".join(p.relative_to(base).with_suffix("").parts): p for p in root.rglob("*.py")}
    modules = {name.removesuffix(".__init__"): path for name, path in names.items()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                          for a in node.names}
        graph[name] = found - {name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: every strongly connected set of two or more modules (Tarjan's
    algorithm), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_modules_import_each_other_in_a_circle() -> None:
    found = circles(import_graph(PACKAGE))
    assert not found, "import circles (give each piece of work the module it belongs to):\n" + "\n".join(
        " -> ".join(group) for group in found)


def test_the_circle_check_finds_a_planted_circle(tmp_path: Path) -> None:
    """The check above can fail: a package whose modules import each other through a third, one of them
    only for type checking and one inside a function, is a circle; a module it imports is not in it."""
    package = tmp_path / "planted"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from planted.sub import b\nimport planted.leaf\n")
    (package / "sub" / "b.py").write_text("def f():\n    from planted import c\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted.a import x\n")
    (package / "leaf.py").write_text("import os\n")
    assert circles(import_graph(package)) == [["planted.a", "planted.c", "planted.sub.b"]]
    (package / "c.py").write_text("import os\n")
    assert circles(import_graph(package)) == []


def test_every_import_flows_from_right_to_left() -> None:
    wrong = []
    for path in MODULES:
        importer = module_name(path)
        mine = layer_of(importer)
        for line, imported in imports_of(path):
            theirs = layer_of(imported)
            if theirs == mine:
                continue
            if mine in ISOLATED or LAYERS.index(theirs) > LAYERS.index(mine):
                wrong.append(f"{path.relative_to(REPO)}:{line}: {mine} imports {imported} ({theirs})")
    assert not wrong, "imports against the flow of data:\n" + "\n".join(wrong)


def test_the_rule_catches_an_import_against_the_flow(tmp_path: Path) -> None:
    """The check above can fail: an import from gate inside metrics is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("from pytest_novelty.gate.case import decide\n")
    ((_line, imported),) = imports_of(bad)
    assert layer_of(imported) == "gate" and LAYERS.index("gate") > LAYERS.index("metrics")


def test_the_map_names_every_module() -> None:
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    rels = [p.relative_to(PACKAGE).as_posix() for p in MODULES if p.stat().st_size or p.name != "__init__.py"]
    missing = [rel for rel in rels if f"`{rel}`" not in text]
    assert not missing, f"ARCHITECTURE.md does not list {', '.join(missing)}"


# pytest and syrupy are the plugin's: the layers a front end builds on import neither, so the
# command line (and anyone who calls the gate from Python) never loads them.
TEST_FRAMEWORKS = ("pytest", "_pytest", "syrupy", "xdist", "pytest_html")
WITHOUT_PYTEST = ("infra", "suites", "generation", "scoring", "metrics", "pipeline", "gate", "report")


def framework_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of pytest, syrupy or a pytest plugin in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [(node.lineno, n) for n in names if n.split(".")[0] in TEST_FRAMEWORKS]
    return found


def test_no_layer_below_the_front_ends_imports_pytest_or_syrupy() -> None:
    wrong = [
        f"{path.relative_to(REPO)}:{line}: imports {name}"
        for path in MODULES
        if layer_of(module_name(path)) in WITHOUT_PYTEST
        for line, name in framework_imports(path)
    ]
    assert not wrong, "pytest and syrupy belong to plugin/:\n" + "\n".join(wrong)


def test_the_framework_rule_catches_an_import(tmp_path: Path) -> None:
    """The check above can fail: a syrupy import, a pytest one and a plain one are told apart."""
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy\nfrom syrupy.extensions.single_file import X\nif True:\n    import pytest\n")
    assert framework_imports(bad) == [(2, "syrupy.extensions.single_file"), (4, "pytest")]


def test_the_command_line_and_the_gate_load_neither_pytest_nor_syrupy() -> None:
    """Importing the command line, building its parser and importing every module of the gate and the
    report loads neither framework (the modules' own lazy imports are the next check's business)."""
    import subprocess
    import sys

    modules = [module_name(p) for p in MODULES if layer_of(module_name(p)) in ("gate", "report")]
    code = (
        "import importlib, sys\n"
        "from pytest_novelty.cli import build_parser\n"
        "build_parser()\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {TEST_FRAMEWORKS!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip() == "[]", done.stdout
