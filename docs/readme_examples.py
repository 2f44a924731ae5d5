"""The examples of the README and of every docs page, produced by the code they describe.

Each example in README.md or in a page of ``docs/`` that shows what the code prints sits between
two markers (each name once, in whichever page shows it)::

    <!-- generated: NAME -->
    ```
    ...
    ```
    <!-- /generated -->

This script runs the commands behind each NAME on the embedded demo and writes the blocks again
(``--write``), or compares them with what the code prints now (the default, exit status 1 on a
stale one). ``tests/test_readme_examples.py`` runs the comparison in the test suite, and also
checks every page's links and every command line the pages show against the options the code has.

The demo's answers are sampled from shipped weights with per-row seeds and batch-invariant
decoding, so they are the same bits on every run of one machine, however it batches or shards;
another CPU model may round the model's arithmetic differently and sample a few different words.
The comparison therefore holds every word and the layout to the letter and every number to within
:data:`TOLERANCE` (absolute, measured across instruction sets): a stale example, such as a number
from before a definition changed, is off by far more than that.

    python docs/readme_examples.py --write    # after a change to what the examples show
    python docs/readme_examples.py            # check (what the test does)
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import RAN, shown  # docs/commands.py, beside this file

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = (README, *sorted((REPO / "docs").glob("*.md")))
"""Every page whose examples are checked: the README and the docs."""
TOLERANCE = 0.04
"""How far a number in an example may be from the code's. On one machine the demo's answers are
the same bits whatever the batch (batch-invariant decoding); another instruction set changed 1 of
its 750 answers (PyTorch's and MKL's kernels switched from AVX-512 to AVX2 on one machine), which
moved the story table's numbers by up to 0.037 (the Creativity Index's interval)."""
COUNT_SHARE = 0.05
"""How far, as a share, a count of prompts needed (``(0.02: 583 prompts)``) may be from the code's:
the same answer moved one from 564 to 583."""

BLOCK = re.compile(r"<!-- generated: (?P<name>[a-z-]+) -->\n(?P<body>.*?)<!-- /generated -->", re.S)
NUMBER = re.compile(r"[-+]?\d+\.\d+")
COUNT = re.compile(r"(?<=: )\d+(?= prompts\))")


def _pytest(cache: Path, *args: str, cwd: Path | None = None, columns: int = 80) -> str:
    """``pytest ARGS`` as a user types it, in its own process, on a terminal ``columns`` wide; its output."""
    env = {**os.environ, "PYTEST_NOVELTY_CACHE": str(cache), "COLUMNS": str(columns)}
    RAN.append(list(args))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=cwd or REPO, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stdout


def _section(text: str, start: str, end: str) -> str:
    """The lines of ``text`` from the first one holding ``start`` to the first starting with ``end``."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if start in line)
    last = next(i for i, line in enumerate(lines[first:], first) if line.startswith(end))
    return "\n".join(lines[first : last + 1])


def demo_gate(cache: Path) -> str:
    """``pytest --model demo``: the gate's tables."""
    out = _pytest(cache, "--model", "demo")
    # Up to the work line, which says what this run generated (a cold and a warm run differ there).
    return _section(out, " novelty gate ", "novelty work done:").rsplit("\n", 1)[0]


def demo_early(cache: Path) -> str:
    """``pytest --model demo-early``: the case that fails (pytest's summary line, not cut to the width)."""
    out = _pytest(cache, "--model", "demo-early", columns=400)
    return "\n".join(line for line in out.splitlines() if line.startswith("FAILED "))


def demo_baseline(cache: Path) -> str:
    """``pytest --model demo --baseline-model demo-early -k story``: the regression's explanation and
    the table of the compared cases."""
    out = _pytest(cache, "--model", "demo", "--baseline-model", "demo-early", "-k", "story", columns=200)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "test_metric[story-novelty@5>=0.3]" in line and "___" in line)
    failure = lines[start + 1 : start + 4]
    table = _section(out, "suite story:", "  CI and p:").splitlines()
    return "\n".join([*failure, "", *table])


def demo_series(cache: Path) -> str:
    """The series of the two demo checkpoints as the steps of one run, story only."""
    out = subprocess.run([sys.executable, "-m", "pytest_novelty.cli", "demo", "build", "--cache", str(cache)],
                         capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]  # fmt: skip
    demo = Path(out)
    with tempfile.TemporaryDirectory(prefix="novelty-series-") as scratch:
        run = Path(scratch) / "my-run"
        run.mkdir()
        (run / "checkpoint-100").symlink_to(demo / "demo-early")
        (run / "checkpoint-400").symlink_to(demo / "demo")
        report = Path(scratch) / "report"
        _pytest(cache, f"--model-series={run}", f"--originality=infini-gram:{demo / 'index'}",
                f"--novelty-report={report}", "-k", "story")  # fmt: skip
        text = (report / "report.md").read_text(encoding="utf-8")
    table = [line for line in _section(text, "| step |", "| 400 |").splitlines()]
    return "\n".join(table)


def demo_answers(cache: Path) -> str:
    """The demo's story answers exported to a file, then gated from it: the same table, and the work
    line saying the answers were read, not generated."""
    env = {**os.environ, "PYTEST_NOVELTY_CACHE": str(cache)}
    cli = [sys.executable, "-m", "pytest_novelty.cli"]
    built = Path(subprocess.run([*cli, "demo", "path", "index"], env=env, capture_output=True, text=True,
                                check=True).stdout.strip())  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="novelty-answers-") as scratch:
        file = Path(scratch) / "demo-answers.jsonl"
        export = ["answers", "export", "--model", "demo", "--out", str(file)]
        RAN.append(export)
        subprocess.run([*cli, *export], cwd=REPO, env=env, capture_output=True, text=True, check=True)
        gate = [f"--model=answers:{file}", f"--originality=infini-gram:{built}", "-k", "story"]
        out = _pytest(cache, *gate, cwd=Path(scratch))
    table = _section(out, "suite story", "novelty work done:").splitlines()
    # The work line up to what it says of generation (its seconds differ from run to run).
    work = [re.sub(r" \(\d+\.\ds\)", "", line).split("nothing generated")[0] + "nothing generated"
            for line in out.splitlines() if line.startswith("[novelty main] story:")]  # fmt: skip
    names = {str(file): "demo-answers.jsonl", str(built): "$(pytest-novelty demo path index)"}
    lines = [line.replace(f"{file}", "demo-answers.jsonl") for line in [*table[:-1], "", *work]]
    return "\n".join([shown("pytest-novelty", export, names), shown("pytest", gate, names), *lines])


def options_table(cache: Path) -> str:
    """The options table, from the one declaration of the options."""
    sys.path.insert(0, str(REPO))
    from pytest_novelty.pipeline.options import OPTIONS, PYTEST

    lines = ["| option | ini setting | meaning |", "|---|---|---|"]
    for option in OPTIONS:
        if PYTEST not in option.where:
            continue
        value = f" {option.metavar}" if option.takes_value and option.metavar else ""
        names = f"`{option.short}{value}`, `{option.long}`" if option.short else f"`{option.long}{value}`"
        ini = f"`{option.ini}`" if option.ini else ""
        lines.append(f"| {names} | {ini} | {option.described.replace('|', '/')} |")
    return "\n".join(lines)


EXAMPLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "demo-gate": ("```", demo_gate),
    "demo-early": ("```", demo_early),
    "demo-baseline": ("```", demo_baseline),
    "demo-series": ("", demo_series),
    "demo-answers": ("```", demo_answers),
    "options": ("", options_table),
}
"""Each example's name, its fence (``` for a code block, '' for a Markdown table) and its producer
(docs/tail.md's producers live in docs/tail_examples.py, docs/architecture.md's picture in
docs/architecture_picture.py; both join the table below)."""


def _page_producers(name: str) -> ModuleType:
    """A docs page's own producers (a module beside this one), imported by file path."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


TAIL = _page_producers("tail_examples")
EXAMPLES.update(TAIL.EXAMPLES)
EXAMPLES.update(_page_producers("architecture_picture").EXAMPLES)

LOOSE = {"agreement": 2.0}
"""Examples whose numbers are held to their words and layout only, and why: the agreement of three
models over bins of 20 prompts moves by whole steps of tau (and its bootstrap bounds with it) when
a single answer of the noisy copy differs, as answers may across machines and cache histories."""


def tolerance(name: str) -> float:
    """How far the numbers of example ``name`` may be from the code's (see :data:`LOOSE`)."""
    return LOOSE.get(name, TOLERANCE)


def render(name: str, cache: Path) -> str:
    """The block the README should hold for example ``name``, fenced as it is shown."""
    fence, produce = EXAMPLES[name]
    body = produce(cache).rstrip("\n")
    return f"{fence}\n{body}\n{fence[:3]}\n" if fence else f"{body}\n"


def blocks(text: str) -> dict[str, str]:
    """The generated blocks of a README text, by name."""
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}


def differences(shown: str, produced: str, tolerance: float = TOLERANCE) -> list[str]:
    """Why ``shown`` is not what the code produced: words that differ, or numbers further apart than
    ``tolerance`` (counts of prompts needed: than :data:`COUNT_SHARE` of theirs); empty when the example stands."""
    def words(text: str) -> str:
        return COUNT.sub("#", NUMBER.sub("#", text))

    if words(shown) != words(produced):
        return list(difflib.unified_diff(shown.splitlines(), produced.splitlines(), "README", "code", lineterm=""))
    far = [
        f"{a} in the README, {b} from the code"
        for a, b in zip(NUMBER.findall(shown), NUMBER.findall(produced), strict=True)
        if abs(float(a) - float(b)) > tolerance
    ]
    far += [
        f"{a} prompts in the README, {b} from the code"
        for a, b in zip(COUNT.findall(shown), COUNT.findall(produced), strict=True)
        if abs(int(a) - int(b)) > COUNT_SHARE * max(int(a), int(b))
    ]
    return far


def page_blocks() -> dict[str, tuple[Path, str]]:
    """Every generated block of every page, by name: the page that shows it and its body. A name
    shown twice is an error (the script would not know which copy to rewrite)."""
    found: dict[str, tuple[Path, str]] = {}
    for page in PAGES:
        for name, body in blocks(page.read_text(encoding="utf-8")).items():
            if name in found:
                raise ValueError(f"example '{name}' is shown in both {found[name][0].name} and {page.name}")
            found[name] = (page, body)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the pages' generated blocks")
    parser.add_argument("--cache", type=Path, help="cache folder for the demo runs (default: a temporary one)")
    args = parser.parse_args(argv)
    TAIL.WRITING[0] = bool(args.write)
    with tempfile.TemporaryDirectory(prefix="novelty-readme-") as scratch:
        cache = args.cache or Path(scratch)
        found = page_blocks()
        stale = 0
        for name in EXAMPLES:
            if name not in found:
                print(f"no page has the block '{name}'", file=sys.stderr)
                stale += 1
                continue
            page, shown = found[name]
            produced = render(name, cache)
            if args.write:
                text = page.read_text(encoding="utf-8")
                page.write_text(text.replace(f"<!-- generated: {name} -->\n{shown}",
                                             f"<!-- generated: {name} -->\n{produced}"), encoding="utf-8")  # fmt: skip
                continue
            problems = differences(shown, produced, tolerance(name))
            if problems:
                stale += 1
                print(f"{page.name} example '{name}' is stale:", *problems, sep="\n  ", file=sys.stderr)
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
