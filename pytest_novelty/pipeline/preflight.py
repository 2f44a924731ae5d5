"""Preflight: check once, before anything is generated, everything a run needs from outside.

A run that cannot finish should stop within seconds with one line that names the cause, not once
per suite after minutes of retries. :func:`preflight` checks, for the suites about to run:

- every suite's prompts load (a broken prompt file is reported once per run, not once per case);
- every ``generation.max_new_tokens`` fits the checkpoint's context (read from its config, without
  loading the weights);
- a served model (``--model openai:NAME``) is listed by its server
  (:meth:`pytest_novelty.generation.openai.OpenAIGenerator.check`: one ``GET /models`` within
  10 s; an unreachable or silent server, a missing or refused key with the variable to set, a
  name the server does not list);
- every originality index opens (``open_backend``, kept by the runner for the run), and a remote
  one (``infini-gram-api:``, ``infini-gram-mini:``) answers one real count query within 10 s
  (its ``check``);
- every remote judge answers a cheap request (:meth:`pytest_novelty.scoring.llm.OpenAIChat.check`:
  a missing or refused key, an unreachable or silent endpoint);
- a hub id resolves, through :func:`pytest_novelty.infra.identity.checkpoint_identity` where that module
  exists (the hook is :func:`check_checkpoint_identity`).

Bad configuration raises :class:`~pytest_novelty.infra.errors.ConfigError`, an unreachable or broken
service :class:`~pytest_novelty.infra.errors.PreflightError` (a harness error). Each distinct judge and
index is checked once, however many suites share it. A part is checked when it has a ``check()``
method (the remote ones), so a registered backend opts in by defining one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, HarnessError, NoveltyError, PreflightError
from pytest_novelty.suites.schema import Suite

__all__ = [
    "check_checkpoint_identity",
    "check_context",
    "check_models",
    "check_options",
    "check_served_model",
    "preflight",
]

# Optional packages a setting needs, and the extra that installs each.
EXTRAS = {"vllm": "vllm", "peft": "peft", "datasets": "datasets"}


def preflight(runner: Any, suites: Iterable[Suite]) -> float:
    """Check what ``runner`` (a :class:`~pytest_novelty.pipeline.runner.Runner`) needs for ``suites``.

    Returns the seconds it took; raises on the first problem (see the module doc).
    """
    start = time.perf_counter()
    suites = list(suites)
    config = runner.config
    check_checkpoint_identity(config.model)
    for suite in suites:
        runner.load_prompts(suite)
    check_context(runner, suites)
    check_served_model(runner)
    specs: dict[str, Suite] = {}
    for suite in suites:
        specs.setdefault(runner.originality_spec(suite), suite)
    for spec, suite in specs.items():
        try:
            backend = runner.backend(spec)
        except HarnessError:
            raise
        except ConfigError as exc:
            raise _blame(exc, config.originality, "--originality", suite, "scoring.originality") from None
        except Exception as exc:  # the engines raise OSError, ValueError, RuntimeError for a broken index
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise PreflightError(f"cannot open the originality index {spec}: {type(exc).__name__}: {first}") from None
        check = getattr(backend, "check", None)
        if callable(check):
            check()  # a remote index: one real query (PreflightError in one line)
    checked: set[tuple[str, str]] = set()
    for suite in suites:
        try:
            judge = runner.judge(suite)
        except ConfigError as exc:
            raise _blame(exc, config.judge, "--judge", suite, "scoring.judge") from None
        check = getattr(judge, "check", None)
        where = (str(judge.spec), str(getattr(judge, "base_url", "")))
        if check is not None and where not in checked:
            checked.add(where)
            check()
    return time.perf_counter() - start


def _blame(exc: ConfigError, given: str | None, option: str, suite: Suite, key: str) -> ConfigError:
    """``exc`` about a spec, blamed on where the spec came from: the option when the command line
    gave it, else the suite file's key."""
    detail = exc.detail if exc.path is None else f"{exc.path}: {exc.detail}"
    if given:
        return ConfigError(detail, field=option)
    return ConfigError(detail, path=suite.path, field=key)


def check_options(options: Any, *, model: str, front: str = "pytest") -> str:
    """Every option value that can be checked without loading anything, when the run starts:
    bad input is one line naming the option as ``front`` (``"pytest"`` or ``"cli"``) spells it and
    the fix (exit 4), never a traceback later.

    ``model`` is the candidate (``--model``, or the newest checkpoint of ``--model-series``).
    Returns the model to gate: a hub id with ``--model-revision`` becomes ``org/name@REV``.
    """
    from pytest_novelty.pipeline.options import by_name

    def flag(name: str) -> str:
        return by_name(name).spelled(front)

    from pytest_novelty.generation import is_served
    from pytest_novelty.generation.devices import check_device
    from pytest_novelty.infra.identity import looks_like_hub_id

    check_device(str(options.novelty_device))
    if options.novelty_generator in ("vllm",):
        require("vllm", field=flag("generator"), what="--generator vllm")
    served = is_served(model)
    if options.novelty_model_base_url and not served:
        raise ConfigError(
            f"applies to a served model (--model openai:NAME), not to {model!r}; drop it, or serve the "
            "checkpoint and pass --model openai:NAME",
            field=flag("model-base-url"),
        )
    revision = getattr(options, "novelty_model_revision", None)
    if revision and not served:
        if not looks_like_hub_id(model) or Path(model).exists():
            raise ConfigError(
                f"applies to a hub id or a served model; {model!r} is a local folder, which has no revisions",
                field=flag("model-revision"),
            )
        if "@" in model:
            raise ConfigError(f"{model!r} already pins a revision; give one of the two", field=flag("model-revision"))
        model = f"{model}@{revision}"
    for name in ("cache", "report", "snapshot-dir", "suites"):
        value = getattr(options, "novelty_" + name.replace("-", "_"), None)
        if value and Path(str(value)).expanduser().exists() and not Path(str(value)).expanduser().is_dir():
            fix = "give a folder (it is created when missing)"
            fix = "give the folder of suite files (*.toml)" if name == "suites" else fix
            raise ConfigError(f"{value} is a file; {fix}", field=flag(name))
    return model


def require(package: str, *, field: str, what: str) -> None:
    """An optional package ``what`` needs is importable, else one line naming the extra to install."""
    import importlib.util

    if importlib.util.find_spec(package) is None:
        extra = EXTRAS.get(package, package)
        raise ConfigError(f"{what} needs {package}, which is not installed: pip install \"pytest-novelty[{extra}]\"",
                          field=field)


def check_models(
    options: Any, models: Iterable[str], baseline: str | None, cache_dir: Path, suites: Iterable[Suite]
) -> None:
    """Fail fast on a checkpoint that is not there, before anything loads: every model of the run
    (the candidate, a series' earlier checkpoints, the baseline) is checked with the options that
    load it, each error naming the option the user typed; the demo is prepared here (once, on the
    controller under xdist: the caller decides). A served model needs ``--originality``."""
    from pytest_novelty.generation import check_model, is_served
    from pytest_novelty.pipeline import demo
    from pytest_novelty.pipeline.runner import SERVED_NEEDS_ORIGINALITY

    suites = list(suites)
    for model, option in [*((m, "--model") for m in models), *([(baseline, "--baseline-model")] if baseline else [])]:
        if model in demo.DEMO_MODELS:
            demo.ensure_demo(cache_dir)
            continue
        check_model(
            model, trust_remote_code=bool(options.novelty_trust_remote_code),
            base_model=options.novelty_base_model, base_url=options.novelty_model_base_url, option=option,
        )  # fmt: skip
        auto = any(s.scoring.originality == "auto" for s in suites)
        if is_served(model) and not options.novelty_originality and auto:
            raise ConfigError(SERVED_NEEDS_ORIGINALITY, field="--originality")


def check_served_model(runner: Any) -> None:
    """A served model (``openai:NAME``) must be listed by its server, which must answer in seconds.

    The generator opens here (it loads nothing: a served model is only an endpoint), so the run
    uses the one that was checked; a local checkpoint is left to the checks above.
    """
    from pytest_novelty.generation import is_served

    if not is_served(runner.config.model):
        return
    check = getattr(runner.generator(), "check", None)
    if callable(check):
        check()


def check_context(runner: Any, suites: Iterable[Suite]) -> None:
    """Every suite's ``generation.max_new_tokens`` must leave room for a prompt in the context.

    Read from the checkpoint's ``config.json`` (``max_position_embeddings`` / ``n_positions``);
    a hub id or a served model is checked when it loads.
    """
    from pytest_novelty.generation.hf import context_length

    path = runner.model_path()
    if not Path(path).is_dir():
        return
    context = context_length(path)
    if context is None:
        return
    suites = list(suites)
    for suite in suites:
        wanted = suite.generation.max_new_tokens
        if wanted >= context:
            raise ConfigError(
                f"{wanted} new tokens do not fit the model's context of {context} tokens, with no room "
                f"left for a prompt; use fewer than {context}",
                path=suite.path,
                field="generation.max_new_tokens",
            )
    check_prompt_lengths(runner, suites, path, context)


def check_prompt_lengths(runner: Any, suites: Iterable[Suite], path: str, context: int) -> None:
    """No prompt fills the model's context: each suite's model inputs (with their in-context
    examples and the chat template) are counted with the checkpoint's own tokenizer, read from
    its folder without loading the weights. A prompt of ``context`` tokens or more would leave no
    room for an answer: bad input, named by its file and line, found before the model loads."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=runner.config.trust_remote_code)
    except Exception:  # an adapter folder without a tokenizer, a tokenizer that needs its own code: the
        return  # generation step checks the lengths again with the loaded model
    from pytest_novelty.generation.hf import render, token_counts
    from pytest_novelty.pipeline.answers import too_long

    for suite in suites:
        if suite.prompting.method == "novel-examples":  # its examples are chosen by originality, later
            continue
        prompts, inputs = runner.prompts(suite)
        if not prompts:
            continue
        counts = token_counts(tokenizer, [render(tokenizer, runner.config.model, x) for x in inputs])
        if max(counts) >= context:
            raise too_long(suite, prompts, counts, context)


def check_checkpoint_identity(model: str) -> None:
    """Resolve a hub id once, before the run, where :mod:`pytest_novelty.infra.identity` can.

    The identity module (content hashes and hub revisions) resolves ``org/name`` to a commit; a
    failure there (no network, no such repository) becomes one :class:`PreflightError` line. Local
    folders and the demo are left to the checkpoint checks that already ran.
    """
    from pytest_novelty.infra.identity import checkpoint_identity, looks_like_hub_id

    if Path(model).exists() or not looks_like_hub_id(model):
        return
    try:
        checkpoint_identity(model)
    except NoveltyError:
        raise
    except Exception as exc:  # network and hub errors: one line, not the hub client's retries
        raise PreflightError(f"cannot resolve the hub id {model!r}: {type(exc).__name__}: {exc}") from None
