"""Shared test fixtures: a tiny real checkpoint and a real infini-gram index, built in the test run."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path

# Imported here, once: pytester's in-process runs (tests/faults, the xdist-less run) take their
# modules out of sys.modules when they end, and C extensions cannot be loaded a second time in one
# process (numpy: "cannot load module more than once"; matplotlib's contourpy: "type 'FillType' is
# already registered").
import contourpy  # noqa: F401
import numpy  # noqa: F401
import pytest
import zstandard  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


def _run_cache() -> Path:
    from pytest_novelty.infra.storage import default_cache_dir

    return default_cache_dir()


# Read at import, before pytester points HOME at a temporary folder: the demo prepared once is shared.
DEMO_CACHE = _run_cache()

# The pytest runs the tests start as child processes (pytester's, the Trainer callback's gates, the
# docs' examples) never use these plugins, and the hypothesis plugin alone costs about a second of
# imports in every process (1.8 s against 0.7 s for an empty collection here): they are left out.
CHILD_OPTIONS = "-p no:hypothesispytest -p no:anyio"


def _child_options(current: str | None) -> str:
    return f"{current} {CHILD_OPTIONS}" if current and CHILD_OPTIONS not in current else (current or CHILD_OPTIONS)


os.environ["PYTEST_ADDOPTS"] = _child_options(os.environ.get("PYTEST_ADDOPTS"))


def _worker_threads() -> str | None:
    """torch's threads for this xdist worker and the child runs it starts: its share of the cores.

    The plugin gives an xdist worker of a gate ``cpus // workers`` threads; a child run the tests
    start (pytester's, the command line's, a training gate) is no worker and would take every core,
    so with a child per worker the cores are oversubscribed and a tiny model's generation slows
    several-fold. ``OMP_NUM_THREADS`` is read when torch starts, so it is set before any import of
    it; outside xdist, or where the user set it, nothing changes."""
    from pytest_novelty.generation.devices import cpu_threads

    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers or "OMP_NUM_THREADS" in os.environ:
        return None
    return str(cpu_threads(int(workers)))


if (_threads := _worker_threads()) is not None:
    os.environ["OMP_NUM_THREADS"] = _threads


# pytest prints a child run's short test summary in full where one of these is set (it takes them
# for a CI machine) and cuts it to the terminal's width elsewhere: the tests that count a message in
# a child's output would read twice as many on CI. The child runs get neither, on every machine.
CI_MARKERS = ("CI", "BUILD_NUMBER")


@pytest.fixture(autouse=True)
def _light_child_runs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester clears ``PYTEST_ADDOPTS`` for the runs it starts: give them the child options again;
    and no child run takes its machine for a CI one (:data:`CI_MARKERS`)."""
    for name in CI_MARKERS:
        monkeypatch.delenv(name, raising=False)
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
        monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_OPTIONS)

NAMES = ["Lily", "Tom", "Mia", "Ben", "Sam", "Anna", "Max", "Lucy"]
THINGS = ["ball", "kite", "cat", "dog", "tree", "boat", "cake", "hat", "box", "bird"]
PLACES = ["park", "garden", "house", "beach", "forest", "school"]


def small_corpus(docs: int = 1500, seed: int = 0) -> list[str]:
    """Simple template stories, about 150 KB for 1,500 documents (enough for one index part)."""
    rng = random.Random(seed)
    out = []
    for _ in range(docs):
        a, b = rng.sample(NAMES, 2)
        thing, place = rng.choice(THINGS), rng.choice(PLACES)
        out.append(
            f"{a} and {b} went to the {place}. {a} saw a {thing} near the {rng.choice(THINGS)}. "
            f"{b} said, \"Let us play with the {thing}!\" They were happy and played all day."
        )
    return out


def build_tiny_checkpoint(folder: Path, corpus: list[str], *, seed: int = 0) -> Path:
    """A real (untrained, seeded) GPT-2 style checkpoint with a byte-level BPE tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    eos = "<|endoftext|>"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=[eos], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=eos, bos_token=eos, unk_token=eos, pad_token=eos, padding_side="left"
    )
    eos_id = fast.convert_tokens_to_ids(eos)
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(fast), n_embd=32, n_layer=2, n_head=2, n_positions=128,
        bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=eos_id,
    )
    model = GPT2LMHeadModel(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture
def notices() -> Iterator[list[str]]:
    """Every notice (:func:`pytest_novelty.infra.progress.notice`) said during the test, in order;
    the channel before is restored after it."""
    from pytest_novelty.infra.progress import notices_to

    heard: list[str] = []
    with notices_to(heard.append):
        yield heard


@pytest.fixture(scope="session")
def tiny_corpus() -> list[str]:
    return small_corpus()


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory, tiny_corpus: list[str]) -> Path:
    """A tiny real Hugging Face checkpoint folder."""
    return build_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny-model", tiny_corpus)


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory: pytest.TempPathFactory, tiny_corpus: list[str]) -> Path:
    """A real infini-gram index (words tokenisation) of the tiny corpus."""
    from pytest_novelty.scoring.originality import build_index

    root = tmp_path_factory.mktemp("corpus")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in tiny_corpus))
    out = root / "idx"
    build_index([corpus], out, tokenizer="words", progress=False)
    return out


@pytest.fixture(scope="session")
def demo_assets() -> Path:
    """The demo assets, prepared once for the whole test run and shared by every test that needs them.

    They live in the run's cache (``$PYTEST_NOVELTY_CACHE``, else the user cache), so pytest-xdist
    workers and later runs share them; a file lock makes a second worker wait instead of building
    twice. From the shipped trained weights this takes seconds; nothing here trains the demo (only
    ``tests/demo/test_demo_shipped.py`` does, once, to check the shipped weights). Tests copy the
    folder into a private cache before they write anything.
    """
    from pytest_novelty.pipeline import demo

    return demo.ensure_demo(DEMO_CACHE, progress=False)


def copy_demo(assets: Path, cache: Path) -> Path:
    """A private cache folder holding a copy of the shared demo ``assets``; returns ``cache``."""
    import shutil

    cache.mkdir(parents=True, exist_ok=True)
    shutil.copytree(assets, cache / assets.name)
    return cache


@pytest.fixture(scope="session")
def demo_run_cache(tmp_path_factory: pytest.TempPathFactory, demo_assets: Path) -> Path:
    """One private cache for the tests that run the demo's own suites (``pytest --model demo``):
    a copy of the prepared demo in which the first such test generates and scores, and the others
    reuse its answers (one per pytest-xdist worker). Tests that change what is generated, or damage
    a file, take a cache of their own."""
    return copy_demo(demo_assets, tmp_path_factory.mktemp("demo-runs"))
