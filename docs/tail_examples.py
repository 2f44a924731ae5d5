"""The producers of docs/tail.md's examples: the commands behind each of its generated blocks, on the
embedded demo, and the figures of the sequential rule's simulations (docs/tail.md shows the
threshold rule's, docs/verdicts.md the paired rule's). ``docs/readme_examples.py`` owns the
mechanism (it finds the blocks of every page, writes them with ``--write`` and compares them) and
takes these producers into its table; the agreement plot beside the page is drawn again when the
pages are written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from commands import RAN, shown  # docs/commands.py, beside this file

REPO = Path(__file__).resolve().parents[1]
PLOT = REPO / "docs" / "tail-agreement.png"
WRITING: list[bool] = [False]
"""Whether this run rewrites the pages (then the agreement plot beside docs/tail.md is drawn again too)."""


def _cli(cache: Path, *args: str, cwd: Path | None = None) -> str:
    """``pytest-novelty ARGS`` in its own process, over the cache ``cache`` (as ``$PYTEST_NOVELTY_CACHE``,
    so the arguments are what the example shows); its standard output."""
    env = {**os.environ, "PYTEST_NOVELTY_CACHE": str(cache)}
    RAN.append(list(args))
    done = subprocess.run([sys.executable, "-m", "pytest_novelty.cli", *args], cwd=cwd or REPO, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode not in (0, 1):
        raise RuntimeError(f"pytest-novelty {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def tail_build(cache: Path) -> str:
    """The bundled story tail, built as suites/story.toml says (into a scratch file: the shipped one stays)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "story-tail.json"
        args = ["tail", "build", "suites/story.toml", "--pool", "demo", "--pool", "demo-early", "--alpha", "0.1",
                "--out", str(out)]  # fmt: skip
        text = _cli(cache, *args)
    names = {str(out): "suites/data/story-tail.json"}
    return shown("pytest-novelty", args, names) + "\n" + text.replace(str(out), names[str(out)])


PEAK_THRESHOLDS = """
[[thresholds]]
metric = "novelty_overall"
min = 0.15

[[thresholds]]
metric = "novelty_at_peak@0.1"
min = 0.05
"""


def peak_overall(cache: Path) -> str:
    """The story suite with Novelty Overall and Novelty at Peak gated beside q@Tail, on the demo."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "suites"
        folder.mkdir()
        shutil.copytree(REPO / "suites" / "data", folder / "data")
        (folder / "story.toml").write_text((REPO / "suites" / "story.toml").read_text() + PEAK_THRESHOLDS)
        args = ["run", "--model", "demo", "--suites", str(folder), "--suite", "story"]
        text = _cli(cache, *args)
        command = shown("pytest-novelty", args, {str(folder): "my-suites"}) + "   # story.toml + 2 thresholds"
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("suite story"))
    last = next(i for i, line in enumerate(lines) if line.startswith("novelty work done"))
    kept = [line for line in lines[first:last] if not line.startswith(("story: detects", "  story: tolerance"))]
    return command + "\n" + "\n".join(kept)


def agreement(cache: Path) -> str:
    """tail agreement on three demo checkpoints against an illustrative ranking (not human data)."""
    sys.path.insert(0, str(REPO))
    from fixtures.noisy_checkpoint import noisy_copy
    from pytest_novelty.infra.progress import notices_to
    from pytest_novelty.pipeline import demo

    with notices_to(lambda line: None):
        built = demo.ensure_demo(cache, progress=False)
    noisy = cache / "docs-demo-noisy"
    if not (noisy / "config.json").is_file():
        noisy_copy(built / "demo", noisy)
    with tempfile.TemporaryDirectory() as scratch:
        reference = Path(scratch) / "reference.json"
        reference.write_text(json.dumps({"ranks": {"demo": 1, "noisy": 2, "demo-early": 3}}))
        plot = PLOT if WRITING[0] else Path(scratch) / PLOT.name
        args = ["tail", "agreement", "suites/story.toml", "--model", "demo", "--model", f"noisy={noisy}", "--model",
                "demo-early", "--reference", str(reference), "--originality", f"infini-gram:{built / 'index'}",
                "--plot", str(plot)]  # fmt: skip
        text = _cli(cache, *args)
        names = {str(noisy): "./demo-noisy", str(reference): "reference.json", str(plot): "docs/tail-agreement.png",
                 str(built / "index"): "$(pytest-novelty demo path index)"}  # fmt: skip
        command = shown("pytest-novelty", args, names)
    return ('$ echo \'{"ranks": {"demo": 1, "noisy": 2, "demo-early": 3}}\' > reference.json\n'
            + command + "\n" + text.replace(str(plot), names[str(plot)]))


def _simulation(path: str, wanted: tuple[str, ...]) -> list[str]:
    """The lines a simulation test file prints (``pytest -s``) that hold one of the ``wanted`` words."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-n", "0", path],
                          cwd=REPO, capture_output=True, text=True, check=False)  # fmt: skip
    return [line.lstrip(".") for line in done.stdout.splitlines() if any(w in line for w in wanted)]


def sequential(cache: Path) -> str:
    """The threshold simulation's figures, as its test prints them."""
    wanted = ("suites at the bound", "futility stop", "SE above")
    return "\n".join(_simulation("tests/metrics/test_sequential_simulation.py", wanted))


PAIRING = 46
"""How wide the paired simulation prints a pairing's name (the start of each of its lines)."""


def sequential_paired(cache: Path) -> str:
    """The paired simulation's table (docs/verdicts.md), as its test prints it, each pairing's name once."""
    lines = _simulation("tests/metrics/test_sequential_paired_simulation.py", ("false fail", "SE inside"))
    shown, previous = [], ""
    for line in lines:
        name = line[:PAIRING]
        shown.append(line if name != previous else " " * PAIRING + line[PAIRING:])
        previous = name
    return "\n".join(shown)


EXAMPLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "tail-build": ("```", tail_build),
    "peak-overall": ("```", peak_overall),
    "agreement": ("```", agreement),
    "sequential": ("```", sequential),
    "sequential-paired": ("```", sequential_paired),
}
