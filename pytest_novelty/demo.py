"""The embedded demo: a tiny story model trained here, its training corpus and that corpus' index.

``--model demo`` (and the weaker ``demo-early``) resolve to folders in the cache, built on first
use from the builders in ``fixtures/demo/`` and reused afterwards. Concurrent runs (pytest-xdist
workers, parallel CI jobs) wait on a file lock instead of building twice; the build goes to a
temporary folder that is renamed into place only when complete, so an interrupted build is
simply redone.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_novelty.errors import HarnessError

DEMO_MODELS = ("demo", "demo-early")
DEMO_VERSION = "v2"  # v2: the index records checksums of its files


def _builder_digest() -> str:
    """A short hash of the builder's files: a changed builder means a new demo build."""
    import hashlib

    from pytest_novelty.resources import bundled_path

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
    from pytest_novelty.resources import bundled_path

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


def ensure_demo(cache_dir: Path, *, log: Callable[[str], None] | None = None, progress: bool = True) -> Path:
    """Build the demo assets into ``cache_dir`` unless they are there; return their folder."""
    target = demo_dir(cache_dir)
    if is_built(cache_dir):
        return target
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    with _lock(Path(cache_dir) / f".{target.name}.lock"):
        if is_built(cache_dir):
            return target
        say(f"[novelty] building the demo checkpoint, corpus and index in {target} (once; a few minutes)")
        start = time.perf_counter()
        staging = Path(cache_dir) / f".{target.name}-staging"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        with quiet_transformers():
            facts: dict[str, Any] = dict(_load_builder().build_demo(staging, progress=progress))
        from pytest_novelty.scoring.originality import build_index

        say("[novelty] indexing the demo training corpus")
        index_facts = build_index([staging / "corpus.jsonl"], staging / "index", tokenizer="words", progress=progress)
        facts["index"] = index_facts
        facts["seconds_total"] = round(time.perf_counter() - start, 1)
        (staging / "BUILD.json").write_text(json.dumps(facts, indent=1, default=str) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
        say(f"[novelty] demo built in {facts['seconds_total']:.0f}s")
    return target
