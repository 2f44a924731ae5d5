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

__all__ = ["check_checkpoint_identity", "check_context", "check_models", "check_served_model", "preflight"]


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
            raise ConfigError(f"{suite.path}: {exc}") from None
        except Exception as exc:  # the engines raise OSError, ValueError, RuntimeError for a broken index
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise PreflightError(f"cannot open the originality index {spec}: {type(exc).__name__}: {first}") from None
        check = getattr(backend, "check", None)
        if callable(check):
            check()  # a remote index: one real query (PreflightError in one line)
    checked: set[tuple[str, str]] = set()
    for suite in suites:
        judge = runner.judge(suite)
        check = getattr(judge, "check", None)
        where = (str(judge.spec), str(getattr(judge, "base_url", "")))
        if check is not None and where not in checked:
            checked.add(where)
            check()
    return time.perf_counter() - start


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
    for suite in suites:
        wanted = suite.generation.max_new_tokens
        if wanted >= context:
            raise ConfigError(
                f"{wanted} new tokens do not fit the model's context of {context} tokens, with no room "
                f"left for a prompt; use fewer than {context}",
                path=suite.path,
                field="generation.max_new_tokens",
            )


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
