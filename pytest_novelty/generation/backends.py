"""The generation backends by name: the ``--generator`` backends that load a checkpoint, the
``--model PREFIX:NAME`` sources that are not checkpoints, the cheap check of a model before
anything heavy loads, and :func:`open_generator`, which opens either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_novelty.generation import Generator, LoadSettings
from pytest_novelty.infra.registry import Registry

if TYPE_CHECKING:
    from pytest_novelty.infra.hashing import Memo

GENERATORS = ("hf", "vllm", "auto")
"""The ``--generator`` choices: the built-in backends and ``auto`` (:func:`choose_backend`)."""


def choose_backend(backend: str, device: str = "auto") -> str:
    """The backend to open: ``auto`` means vLLM where it can run (a CUDA device, and ``import vllm``
    works), else ``hf``; any other name is returned as it is. vLLM samples differently, so its
    answers carry their own cache key: a run that switches backend generates again."""
    if backend != "auto":
        return backend
    if device != "auto" and not device.startswith("cuda"):
        return "hf"
    import torch

    if not torch.cuda.is_available():
        return "hf"
    try:
        import vllm  # noqa: F401
    except ImportError:
        return "hf"
    return "vllm"


GENERATOR_BACKENDS: Registry[Generator] = Registry(
    "generator",
    field="--generator",
    builtins=("pytest_novelty.generation.hf", "pytest_novelty.generation.vllm"),
)
"""Backends that load a checkpoint (``--generator NAME``), opened as ``factory(model, load: LoadSettings)``."""

MODEL_SOURCES: Registry[Generator] = Registry(
    "model source", field="--model",
    builtins=("pytest_novelty.generation.openai", "pytest_novelty.generation.answers"),
    settings=("base_url", "revision", "memo"),
)
"""``--model PREFIX:NAME`` values that are not checkpoints (``openai:NAME``, ``answers:FILE``), opened
as ``factory(name, base_url=..., revision=..., memo=...)`` (each takes those it uses); the backend's
``check(model, base_url)`` runs before anything heavy is loaded."""


def is_served(model: str) -> bool:
    """Whether ``model`` names a registered model source rather than a checkpoint (so it has no
    folder: no ``novelty-index/``, no config to read)."""
    return MODEL_SOURCES.find(model) is not None


ANSWERS_PREFIX = "answers:"
"""``--model answers:FILE``: answers generated elsewhere, read from files (:mod:`.answers`)."""


def is_answers(model: str) -> bool:
    """Whether ``model`` names answers read from files (``answers:FILE``) rather than a model."""
    return model.strip().startswith(ANSWERS_PREFIX)


def check_model(
    model: str, *, trust_remote_code: bool = False, base_model: str | None = None, base_url: str | None = None,
    option: str = "--model",
) -> None:
    """Cheap checks of a model before anything heavy is imported (one line on bad input, naming ``option``)."""
    source = MODEL_SOURCES.find(model)
    if source is not None:
        if source.backend.check is not None:
            source.backend.check(model, base_url)
        return
    from pytest_novelty.generation.checkpoint import check_checkpoint

    check_checkpoint(model, trust_remote_code=trust_remote_code, base_model=base_model, option=option)


def open_generator(
    model: str,
    *,
    device: str = "auto",
    trust_remote_code: bool = False,
    backend: str = "hf",
    gpus: int = 1,
    base_model: str | None = None,
    base_url: str | None = None,
    revision: str | None = None,
    memo: Memo | None = None,
) -> Generator:
    """Load ``model`` (a local folder, a PEFT adapter folder, a hub id, or a :data:`MODEL_SOURCES`
    spec such as ``openai:NAME`` served at ``base_url``, whose ``revision`` pins the weights the cache
    trusts) with ``backend`` (:func:`choose_backend`); the other arguments are :class:`LoadSettings`."""
    source = MODEL_SOURCES.find(model)
    if source is not None:
        return MODEL_SOURCES.call(source, base_url=base_url, revision=revision, memo=memo)
    load = LoadSettings(device=device, trust_remote_code=trust_remote_code, gpus=gpus, base_model=base_model, memo=memo)
    return GENERATOR_BACKENDS.open(choose_backend(backend, device), model, load)

