"""The embedded demo: a tiny story model trained here, its training corpus and that corpus' index.

``--model demo`` (and the weaker ``demo-early``) resolve to folders in the cache, built on first
use from the builders in ``fixtures/demo/`` and reused afterwards. Concurrent runs (pytest-xdist
workers, parallel CI jobs) wait on a file lock instead of building twice; the build goes to a
temporary folder that is renamed into place only when complete, so an interrupted build is
simply redone.

Training is the only slow step (about two minutes on two idle cores), so the project ships the two
trained weight files in ``fixtures/demo/trained/`` with a manifest naming the builder that trained
them (the same hash that keys the cache folder). A first run rebuilds corpus, tokenizer, configs
and index from the builder and places those weights: seconds. A training build on another machine
writes the same corpus, tokenizer, configs and index, the same tensor layout and losses within 2 %,
but not the same weight bytes (float32 training is not bit-reproducible across CPU models);
``tests/demo/test_demo_shipped.py`` rebuilds from scratch and checks that.
Weights from another builder version are never used: the demo is then trained here, as before.
``python -m pytest_novelty.pipeline.demo ship`` trains from scratch and refreshes the shipped files.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_novelty.infra.errors import HarnessError

DEMO_MODELS = ("demo", "demo-early")
DEMO_VERSION = "v2"  # v2: the index records checksums of its files


MANIFEST = "MANIFEST.json"
# What training cannot skip: each checkpoint's weights and the losses measured while training.
_WEIGHT_FACTS = ("loss", "train_loss")


def _builder_digest() -> str:
    """A short hash of the builder's files: a changed builder means a new demo build.

    The files directly in ``fixtures/demo/`` (code, word lists, task data); the shipped weights
    in ``trained/`` are an output of the builder, not part of it.
    """
    from pytest_novelty.infra.resources import bundled_path

    digest = hashlib.sha256()
    folder = bundled_path("fixtures") / "demo"
    for path in sorted(folder.glob("*")):
        if path.suffix in (".py", ".json"):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:8]


def demo_dir(cache_dir: Path) -> Path:
    """Where the demo assets of this builder version live inside ``cache_dir``."""
    return Path(cache_dir) / f"demo-{DEMO_VERSION}-{_builder_digest()}"


def is_built(cache_dir: Path) -> bool:
    """Whether a complete demo build is present."""
    return (demo_dir(cache_dir) / "BUILD.json").is_file()


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no inter-process lock
            yield
            return
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _load_builder() -> ModuleType:
    from pytest_novelty.infra.resources import bundled_path

    path = bundled_path("fixtures") / "demo" / "build.py"
    spec = importlib.util.spec_from_file_location("pytest_novelty_demo_build", path)
    if spec is None or spec.loader is None:
        raise HarnessError(f"{path}: cannot load the demo builder; reinstall pytest-novelty")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' log notices and its "Writing model shards" bars off, restored afterwards.

    While the demo builder trains and saves its own model they tell the user nothing (a GPT-2
    class name that maps to no loss type, a bar per saved checkpoint); the builder prints its own
    progress lines.
    """
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def trained_dir() -> Path:
    """The folder of the shipped trained weights and their manifest."""
    from pytest_novelty.infra.resources import bundled_path

    return bundled_path("fixtures") / "demo" / "trained"


def read_manifest(folder: Path | None = None) -> dict[str, Any] | None:
    """The shipped weights' manifest, or None when there is none (or it cannot be read)."""
    try:
        return dict(json.loads(((folder or trained_dir()) / MANIFEST).read_text(encoding="utf-8")))
    except (OSError, ValueError, HarnessError):
        return None


def shipped_weights(builder: ModuleType, folder: Path | None = None) -> tuple[Any, str]:
    """The shipped weights as the builder's ``TrainedWeights``, or None and the reason not to use them.

    They are used only when the manifest names this exact builder and each file has the recorded
    sha256, so a changed builder (or a damaged file) means training, never stale weights.
    ``folder`` defaults to :func:`trained_dir`.
    """
    folder = folder or trained_dir()
    manifest = read_manifest(folder)
    if manifest is None:
        return None, f"no shipped weights in {folder}"
    if manifest.get("builder") != _builder_digest() or manifest.get("demo_version") != DEMO_VERSION:
        return None, (f"the shipped weights were trained by builder {manifest.get('builder')}, "
                      f"this is {_builder_digest()}")
    files, losses = {}, {}
    for name in DEMO_MODELS:
        entry = manifest["weights"][name]
        path = folder / entry["file"]
        if not path.is_file() or _sha256(path) != entry["sha256"]:
            return None, f"{path} is missing or does not match its sha256 in {MANIFEST}"
        files[name], losses[name] = path, {key: float(entry[key]) for key in _WEIGHT_FACTS}
    return builder.TrainedWeights(files=files, losses=losses), ""


def _check_placed(staging: Path, manifest: dict[str, Any]) -> None:
    """The checkpoints written from shipped weights hold exactly those weights."""
    for name in DEMO_MODELS:
        written = staging / name / "model.safetensors"
        if _sha256(written) != manifest["weights"][name]["sha256"]:
            raise HarnessError(
                f"{written}: the rebuilt demo weights differ from {trained_dir() / MANIFEST}; "
                "reinstall pytest-novelty, or remove the manifest to train the demo here"
            )


def ensure_demo(cache_dir: Path, *, log: Callable[[str], None] | None = None, progress: bool = True,
                train: bool = False) -> Path:
    """Build the demo assets into ``cache_dir`` unless they are there; return their folder.

    With the shipped trained weights (the usual case) this takes seconds; ``train=True``, or
    weights from another builder version, trains from scratch (minutes).
    """
    target = demo_dir(cache_dir)
    if is_built(cache_dir):
        return target
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    with _lock(Path(cache_dir) / f".{target.name}.lock"):
        if is_built(cache_dir):
            return target
        start = time.perf_counter()
        builder = _load_builder()
        weights, why = (None, "training requested") if train else shipped_weights(builder)
        if weights is not None:
            say(f"[novelty] preparing the demo in {target}: shipped weights of both checkpoints, "
                "corpus and index rebuilt here (once; about 10 s on 2 idle cores)")
        else:
            say(f"[novelty] building the demo in {target}: training the checkpoints ({why}), "
                "corpus and index (once; about 2 minutes on 2 idle cores)")
        staging = Path(cache_dir) / f".{target.name}-staging"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with quiet_transformers():
            facts: dict[str, Any] = dict(builder.build_demo(staging, progress=progress, weights=weights))
        if weights is not None:
            _check_placed(staging, read_manifest() or {})
        from pytest_novelty.scoring.originality import build_index

        say("[novelty] indexing the demo training corpus")
        # The indexer's bar redraws with carriage returns: only on a terminal, never in a CI log.
        index_facts = build_index([staging / "corpus.jsonl"], staging / "index", tokenizer="words",
                                  progress=progress and sys.stderr.isatty())
        facts["index"] = index_facts
        facts["seconds_total"] = round(time.perf_counter() - start, 1)
        (staging / "BUILD.json").write_text(json.dumps(facts, indent=1, default=str) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        say(f"[novelty] demo built in {facts['seconds_total']:.0f}s")
    return target


def ship(build: Path | None = None, dest: Path | None = None) -> dict[str, Any]:
    """Copy the trained weights of a from-scratch build into ``dest`` with their manifest.

    ``build`` is a demo folder trained by this builder (``demo-<version>-<hash>`` whose hash is
    this builder's, with ``BUILD.json``); without it the demo is trained now in a temporary cache.
    ``dest`` defaults to ``fixtures/demo/trained``. Returns the manifest.
    """
    import platform
    import tempfile

    import torch
    import transformers

    digest = _builder_digest()
    with tempfile.TemporaryDirectory(prefix="novelty-demo-ship-") as scratch:
        if build is None:
            build = ensure_demo(Path(scratch), train=True)
        build = Path(build)
        facts = json.loads((build / "BUILD.json").read_text(encoding="utf-8"))
        if build.name != f"demo-{DEMO_VERSION}-{digest}" or not facts.get("trained_here", True):
            raise HarnessError(f"{build}: not a from-scratch build of builder {digest} ({DEMO_VERSION}); "
                               "run without --from to train one")
        dest = Path(dest) if dest else trained_dir()
        dest.mkdir(parents=True, exist_ok=True)
        weights: dict[str, Any] = {}
        for name in DEMO_MODELS:
            shutil.copyfile(build / name / "model.safetensors", dest / f"{name}.safetensors")
            checkpoint = json.loads((build / name / "demo_facts.json").read_text(encoding="utf-8"))
            weights[name] = {"file": f"{name}.safetensors", "sha256": _sha256(dest / f"{name}.safetensors"),
                             **{key: checkpoint[key] for key in _WEIGHT_FACTS}}
    manifest = {
        "builder": digest,
        "demo_version": DEMO_VERSION,
        "trained_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                         "machine": platform.machine(), "threads": facts["recipe"]["threads"]},
        "weights": weights,
    }
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_novelty.pipeline.demo ship [--from BUILD]``: refresh the shipped trained weights."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pytest_novelty.pipeline.demo",
                                     description="Refresh the demo's shipped trained weights.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("ship", help="train the demo from scratch and copy its weights to fixtures/demo/trained")
    cmd.add_argument("--from", dest="build", type=Path, help="a from-scratch demo build of this builder to copy")
    args = parser.parse_args(argv)
    try:
        manifest = ship(args.build)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
