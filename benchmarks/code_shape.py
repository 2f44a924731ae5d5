"""The package's shape in figures: what a refactor is measured by, before and after.

Prints the number of modules, their lines and median size, the modules over 500 lines and the
functions over 60 (each with whether it says why it is kept whole), ``Any`` per 1,000 lines,
``getattr``/``hasattr`` calls, string-key lookups on case rows in ``report/`` and ``integrations/``,
the longest functions, and the pairs of places that repeat six or more lines (the same lines once
white space is folded, or the same shape once names, strings and numbers are blanked; import lines,
comments and lines of fewer than three tokens do not count, nor a run found in more than eight places,
nor a run alike only in shape whose lines are mostly thin: dataclass fields, dictionary entries).
Run from the repository root: ``python benchmarks/code_shape.py [PACKAGE_DIR]``.
"""

from __future__ import annotations

import ast
import io
import keyword
import re
import statistics
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_novelty"
ROW_KEYS = re.compile(r"\brows?\.get\(\"|\brows?\[\"")
KEPT = "Kept whole:"
RUN = 6
"""Lines a repeated run needs."""
COMMON = 8
"""Places a run may stand in before it is too common to count (boilerplate such as a signature)."""
THIN = 5
"""Tokens a line needs to count towards a repeat of shape: half the run's lines must have as many."""


def _code_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, text with white space folded, shape) of the lines that count: the lines where a
    token of code starts (a docstring or a string over several lines is one token, on its first
    line), without import lines and lines of fewer than three tokens. The shape blanks every name,
    string and number (keywords and punctuation stay)."""
    tokens: dict[int, list[str]] = defaultdict(list)
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER, tokenize.ENCODING)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in skip:
            continue
        if tok.type == tokenize.NAME and not keyword.iskeyword(tok.string):
            shaped = "N"
        elif tok.type in (tokenize.STRING, tokenize.NUMBER):
            shaped = "S"
        else:
            shaped = tok.string
        tokens[tok.start[0]].append(shaped)
    lines = text.splitlines()
    kept = []
    for number, shape in sorted(tokens.items()):
        folded = " ".join(lines[number - 1].split())
        if len(shape) < 3 or folded.startswith(("import ", "from ")):
            continue
        kept.append((number, folded, " ".join(shape)))
    return kept


def duplicate_pairs(files: list[Path]) -> tuple[int, int]:
    """(pairs of files, same-file pairs included, that share a run of :data:`RUN` lines of the same
    shape; of those, the pairs that share a run of the very same lines)."""
    places: dict[tuple[bool, tuple[str, ...]], list[tuple[Path, int]]] = defaultdict(list)
    for file in files:
        lines = _code_lines(file.read_text(encoding="utf-8"))
        for i in range(len(lines) - RUN + 1):
            window = lines[i : i + RUN]
            places[(True, tuple(text for _, text, _ in window))].append((file, window[0][0]))
            places[(False, tuple(shape for _, _, shape in window))].append((file, window[0][0]))
    pairs: dict[bool, set[tuple[Path, Path]]] = {True: set(), False: set()}
    for (exact, run), where in places.items():
        if len(where) < 2 or len(where) > COMMON:
            continue
        if not exact and sum(len(shape.split()) >= THIN for shape in run) < RUN // 2:
            continue  # alike only in the shape of thin lines: fields, keywords, one call a line
        for a in range(len(where)):
            for b in range(a + 1, len(where)):
                (fa, la), (fb, lb) = where[a], where[b]
                if fa != fb or abs(la - lb) >= RUN:  # a run overlapping itself is no repeat
                    pairs[exact].add(tuple(sorted((fa, fb))))  # type: ignore[arg-type]
    return len(pairs[True] | pairs[False]), len(pairs[True])


def _kept_whole(text: str, node: ast.AST | None = None) -> bool:
    """Whether a module (its first 30 lines) or a function (its lines) says why it is kept whole."""
    lines = text.splitlines()
    if node is None:
        return any(KEPT in line for line in lines[:30])
    start, end = node.lineno - 1, (node.end_lineno or node.lineno)  # type: ignore[attr-defined]
    return any(KEPT in line for line in lines[max(0, start - 3) : end])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    package = Path(args[0]).resolve() if args else PACKAGE
    files = sorted(package.rglob("*.py"))
    sizes = [len(f.read_text(encoding="utf-8").splitlines()) for f in files]
    total = sum(sizes)
    any_count = probes = 0
    functions: list[tuple[int, str]] = []
    long_functions: list[tuple[int, str, bool]] = []
    big_modules: list[tuple[int, str, bool]] = []
    for file, size in zip(files, sizes, strict=True):
        text = file.read_text(encoding="utf-8")
        tree = ast.parse(text)
        if size > 500:
            big_modules.append((size, str(file.relative_to(package.parent)), _kept_whole(text)))
        any_count += sum(1 for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "Any")
        any_count += sum(1 for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "Any")
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            if isinstance(called, ast.Name) and called.id in ("getattr", "hasattr"):
                probes += 1
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((length, f"{file.relative_to(package.parent)}::{node.name}"))
                if length > 60:
                    long_functions.append((length, functions[-1][1], _kept_whole(text, node)))
    row_lookups = sum(
        len(ROW_KEYS.findall(f.read_text(encoding="utf-8")))
        for folder in ("report", "integrations") for f in (package / folder).rglob("*.py")
    )
    pairs, identical = duplicate_pairs(files)
    print(f"modules: {len(files)}, lines: {total}, median module: {statistics.median(sizes):.0f} lines")
    for title, rows in (("modules over 500 lines", big_modules), ("functions over 60 lines", long_functions)):
        kept = sum(1 for *_, whole in rows if whole)
        print(f"{title}: {len(rows)} ({kept} say why they are kept whole)")
        for length, name, whole in sorted(rows, reverse=True):
            print(f"  {length:4d}  {name}{'  (kept whole)' if whole else ''}")
    print(f"Any per 1,000 lines: {1000 * any_count / total:.1f} ({any_count} uses)")
    print(f"getattr/hasattr calls: {probes}")
    print(f"string-key lookups on rows in report/ and integrations/: {row_lookups}")
    print(f"repeated-code pairs: {pairs} ({identical} with the very same lines, the others alike in shape)")
    print("longest functions:")
    for length, name in sorted(functions, reverse=True)[:8]:
        print(f"  {length:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
