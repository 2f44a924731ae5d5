"""docs/tail.md's examples, produced by the code they describe (as docs/readme_examples.py does for the README).

Each example sits between ``<!-- generated: NAME -->`` and ``<!-- /generated -->`` markers; this
script runs the commands behind each NAME on the embedded demo and writes the blocks again
(``--write``) or compares them with what the code prints now (the default; exit status 1 on a stale
one), with the README's rule: every word and the layout exactly, every number within
``readme_examples.TOLERANCE``. ``tests/test_docs_tail.py`` runs the comparison.

    python docs/tail_examples.py --write [--cache DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "tail.md"
PLOT = REPO / "docs" / "tail-agreement.png"
_WRITING: list[bool] = [False]
"""Whether this run rewrites the page (then the agreement plot beside it is drawn again too)."""


def _readme_examples() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_examples", REPO / "docs" / "readme_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


SHARED = _readme_examples()


def _cli(cache: Path, *args: str, cwd: Path | None = None) -> str:
    """``pytest-novelty ARGS`` in its own process; its standard output."""
    done = subprocess.run([sys.executable, "-m", "pytest_novelty.cli", *args, "--cache", str(cache)],
                          cwd=cwd or REPO, capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode not in (0, 1):
        raise RuntimeError(f"pytest-novelty {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def tail_build(cache: Path) -> str:
    """The bundled story tail, built as suites/story.toml says (into a scratch file: the shipped one stays)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "story-tail.json"
        text = _cli(cache, "tail", "build", "suites/story.toml", "--pool", "demo", "--pool", "demo-early",
                    "--alpha", "0.1", "--out", str(out))  # fmt: skip
    return "$ pytest-novelty tail build suites/story.toml --pool demo --pool demo-early --alpha 0.1 \\\n" \
           "    --out suites/data/story-tail.json\n" + text.replace(str(out), "suites/data/story-tail.json")


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
        text = _cli(cache, "run", "--model", "demo", "--suites", str(folder), "--suite", "story")
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("suite story"))
    last = next(i for i, line in enumerate(lines) if line.startswith("novelty work done"))
    shown = [line for line in lines[first:last] if not line.startswith(("story: detects", "  story: tolerance"))]
    command = "$ pytest-novelty run --model demo --suites my-suites --suite story   # story.toml + 2 thresholds"
    return command + "\n" + "\n".join(shown)


def _noisy_copy(source: Path, dest: Path, seed: int = 1, scale: float = 2e-3) -> Path:
    """The demo's weights plus Gaussian noise of ``scale`` times each tensor's spread: a third checkpoint."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(source)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in model.parameters():
            tensor.add_(torch.randn(tensor.shape, generator=generator) * scale * float(tensor.std()))
    model.save_pretrained(dest)
    AutoTokenizer.from_pretrained(source).save_pretrained(dest)
    return dest


def agreement(cache: Path) -> str:
    """tail agreement on three demo checkpoints against an illustrative ranking (not human data)."""
    sys.path.insert(0, str(REPO))
    from pytest_novelty.pipeline import demo

    built = demo.ensure_demo(cache, log=lambda line: None, progress=False)
    noisy = cache / "docs-demo-noisy"
    if not (noisy / "config.json").is_file():
        _noisy_copy(built / "demo", noisy)
    with tempfile.TemporaryDirectory() as scratch:
        reference = Path(scratch) / "reference.json"
        reference.write_text(json.dumps({"ranks": {"demo": 1, "noisy": 2, "demo-early": 3}}))
        plot = PLOT if _WRITING[0] else Path(scratch) / PLOT.name
        text = _cli(cache, "tail", "agreement", "suites/story.toml", "--model", "demo", "--model", f"noisy={noisy}",
                    "--model", "demo-early", "--reference", str(reference), "--originality",
                    f"infini-gram:{built / 'index'}", "--plot", str(plot))  # fmt: skip
    shown = text.replace(str(plot), "docs/tail-agreement.png")
    return ('$ echo \'{"ranks": {"demo": 1, "noisy": 2, "demo-early": 3}}\' > reference.json\n'
            "$ pytest-novelty tail agreement suites/story.toml --model demo --model noisy=./demo-noisy \\\n"
            "    --model demo-early --reference reference.json --plot docs/tail-agreement.png\n" + shown)


def sequential(cache: Path) -> str:
    """The simulation's figures, as its test prints them."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-n", "0",
                           "tests/metrics/test_sequential_simulation.py"], cwd=REPO, capture_output=True, text=True,
                          check=False)  # fmt: skip
    wanted = ("suites at the bound", "SE above")
    return "\n".join(line.lstrip(".") for line in done.stdout.splitlines() if any(w in line for w in wanted))


EXAMPLES: dict[str, tuple[str, Callable[[Path], str]]] = {
    "tail-build": ("```", tail_build),
    "peak-overall": ("```", peak_overall),
    "agreement": ("```", agreement),
    "sequential": ("```", sequential),
}


def render(name: str, cache: Path) -> str:
    """The block the page should hold for example ``name``."""
    fence, produce = EXAMPLES[name]
    body = produce(cache).rstrip("\n")
    return f"{fence}\n{body}\n{fence}\n" if fence else f"{body}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the page's generated blocks")
    parser.add_argument("--cache", type=Path, help="cache folder for the demo runs (default: a temporary one)")
    args = parser.parse_args(argv)
    _WRITING[0] = bool(args.write)
    with tempfile.TemporaryDirectory(prefix="novelty-tail-docs-") as scratch:
        cache = args.cache or Path(scratch)
        text = PAGE.read_text(encoding="utf-8")
        found = SHARED.blocks(text)
        stale = 0
        for name in EXAMPLES:
            if name not in found:
                print(f"docs/tail.md has no block '{name}'", file=sys.stderr)
                stale += 1
                continue
            produced = render(name, cache)
            if args.write:
                text = text.replace(f"<!-- generated: {name} -->\n{found[name]}",
                                    f"<!-- generated: {name} -->\n{produced}")  # fmt: skip
                continue
            problems = SHARED.differences(found[name], produced)
            if problems:
                stale += 1
                print(f"docs/tail.md example '{name}' is stale:", *problems, sep="\n  ", file=sys.stderr)
        if args.write:
            PAGE.write_text(text, encoding="utf-8")
    return 1 if stale and not args.write else 0


if __name__ == "__main__":
    sys.exit(main())
