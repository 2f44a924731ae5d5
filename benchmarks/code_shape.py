"""The package's shape in figures: what the spine's refactor is measured by, before and after.

Prints the number of modules and their median size, ``Any`` per 1,000 lines, ``getattr``/``hasattr``
calls that probe an object (not a module or a class's own attribute table), string-key lookups on
case rows in ``report/`` and ``integrations/``, and the longest functions. Run from the repository
root: ``python benchmarks/code_shape.py``.
"""

from __future__ import annotations

import ast
import re
import statistics
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_novelty"
ROW_KEYS = re.compile(r"\brows?\.get\(\"|\brows?\[\"")


def main() -> int:
    files = sorted(PACKAGE.rglob("*.py"))
    sizes = [len(f.read_text(encoding="utf-8").splitlines()) for f in files]
    total = sum(sizes)
    any_count = probes = 0
    functions: list[tuple[int, str]] = []
    for file in files:
        text = file.read_text(encoding="utf-8")
        tree = ast.parse(text)
        any_count += sum(1 for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "Any")
        any_count += sum(1 for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "Any")
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Name) and called.id in ("getattr", "hasattr"):
                probes += 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((length, f"{file.relative_to(PACKAGE.parent)}::{node.name}"))
    row_lookups = sum(
        len(ROW_KEYS.findall(f.read_text(encoding="utf-8")))
        for folder in ("report", "integrations") for f in (PACKAGE / folder).rglob("*.py")
    )
    print(f"modules: {len(files)}, lines: {total}, median module: {statistics.median(sizes):.0f} lines")
    print(f"Any per 1,000 lines: {1000 * any_count / total:.1f} ({any_count} uses)")
    print(f"getattr/hasattr calls: {probes}")
    print(f"string-key lookups on rows in report/ and integrations/: {row_lookups}")
    print("longest functions:")
    for length, name in sorted(functions, reverse=True)[:8]:
        print(f"  {length:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
