"""Preflight: check once, before anything is generated, everything a run needs from outside.

A run that cannot finish should stop within seconds with one line that names the cause, not once
per suite after minutes of retries. Before any model loads, :func:`check_folders` writes one small
file into every folder the run writes (the cache, the report folder, ``--output``'s folder) and
:func:`check_models` checks every checkpoint folder; then :func:`preflight` checks, for the suites
about to run:

- every suite's prompts load (a broken prompt file is reported once per run, not once per case);
- every ``generation.max_new_tokens`` fits the checkpoint's context (read from its config, without
  loading the weights), and so does every prompt of a run that generates anything;
- a served model (``--model openai:NAME``) is listed by its server
  (:meth:`pytest_novelty.generation.openai.OpenAIGenerator.check`: one ``GET /models`` within
  10 s; an unreachable or silent server, a missing or refused key with the variable to set, a
  name the server does not list), when anything is to be generated;
- answers generated elsewhere (``--model answers:FILE``) answer every prompt as the suite would
  have them generated (:func:`check_recorded_answers`);
- every originality index opens (``open_backend``, kept by the runner for the run), and a remote
  one (``infini-gram-api:``, ``infini-gram-mini:``) answers one real count query within 10 s
  (its ``check``);
- every remote judge answers a cheap request (:meth:`pytest_novelty.scoring.llm.OpenAIChat.check`:
  a missing or refused key, an unreachable or silent endpoint);
- a hub id resolves, through :func:`pytest_novelty.infra.identity.checkpoint_identity` where that module
  exists (the hook is :func:`check_checkpoint_identity`);
- over a cache holding a sharded gate's records, every shard's answers are there
  (:func:`pytest_novelty.pipeline.shard_work.check_merged`: a missing shard is one line naming it).

A warm rerun, whose answers are all cached (:mod:`pytest_novelty.pipeline.warm`), loads no
tokenizer and asks no served model: the prompt lengths and the server's model list matter only
to what is generated.

Bad configuration raises :class:`~pytest_novelty.infra.errors.ConfigError`, an unreachable or broken
service :class:`~pytest_novelty.infra.errors.PreflightError` (a harness error). Each distinct judge and
index is checked once, however many suites share it. A part is checked when it is
:class:`~pytest_novelty.infra.abilities.Preflighted` (has a ``check()`` method: the remote ones), so a
registered backend opts in by defining one.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_novelty.infra.abilities import Preflighted
from pytest_novelty.infra.errors import ConfigError, HarnessError, NoveltyError, PreflightError, did_you_mean
from pytest_novelty.infra.progress import notice
from pytest_novelty.pipeline.options import spelled
from pytest_novelty.suites.schema import Suite

if TYPE_CHECKING:
    from pytest_novelty.pipeline.runner import Runner

__all__ = [
    "check_cache_folder",
    "check_checkpoint_identity",
    "check_context",
    "check_folders",
    "check_models",
    "check_options",
    "check_recorded_answers",
    "check_served_model",
    "check_source",
    "preflight",
]

def preflight(runner: Runner, suites: Iterable[Suite]) -> float:
    """Check what ``runner`` (a :class:`~pytest_novelty.pipeline.runner.Runner`) needs for ``suites``.

    Returns the seconds it took; raises on the first problem (see the module doc).
    """
    start = time.perf_counter()
    suites = list(suites)
    config = runner.config
    check_checkpoint_identity(config.model)
    for suite in suites:
        runner.load_prompts(suite)
    from pytest_novelty.pipeline.warm import runs_to_generate

    generating = runs_to_generate(runner, suites)  # a warm rerun: none, and no model loads
    check_context(runner, suites, generating)
    if generating:
        check_served_model(runner)
    check_recorded_answers(runner, suites)
    specs: dict[str, Suite] = {}
    for suite in suites:
        specs.setdefault(runner.originality_spec(suite), suite)
    for spec, suite in specs.items():
        try:
            backend = runner.models.backend(spec)
        except HarnessError:
            raise
        except ConfigError as exc:
            raise _blame(exc, config.originality, "--originality", suite, "scoring.originality") from None
        except Exception as exc:  # the engines raise OSError, ValueError, RuntimeError for a broken index
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise PreflightError(f"cannot open the originality index {spec}: {type(exc).__name__}: {first}") from None
        if isinstance(backend, Preflighted):
            backend.check()  # a remote index: one real query (PreflightError in one line)
    checked: set[str] = set()
    for suite in suites:
        try:
            judge = runner.models.judge(suite)
        except ConfigError as exc:
            raise _blame(exc, config.judge, "--judge", suite, "scoring.judge") from None
        # A spec names one endpoint in a session (the judge's base URL is the session's), so each
        # is checked once, however many suites (and sample counts) share it.
        if isinstance(judge, Preflighted) and judge.spec not in checked:
            checked.add(judge.spec)
            _named_check(judge, config.judge_base_url and spelled("judge-base-url", config.front))
    from pytest_novelty.pipeline.shard_work import check_merged

    check_merged(runner, suites)  # a merge run over shards' caches: every shard's part is there
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
    def flag(name: str) -> str:
        return spelled(name, front)

    from pytest_novelty.generation.backends import is_answers, is_served
    from pytest_novelty.generation.devices import check_device
    from pytest_novelty.infra.hub import looks_like_hub_id

    check_device(str(options.novelty_device))
    if options.novelty_generator == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ConfigError('--generator vllm needs vllm, which is not installed: pip install "pytest-novelty[vllm]"',
                          field=flag("generator"))
    served = is_served(model) and not is_answers(model)  # answers are files: no endpoint, no revisions
    revision = getattr(options, "novelty_model_revision", None)
    if revision and is_answers(model):
        raise ConfigError(f"does not apply to {model!r}: answers are identified by their files' content",
                          field=flag("model-revision"))
    if options.novelty_model_base_url and not served:
        raise ConfigError(
            f"applies to a served model (--model openai:NAME), not to {model!r}; drop it, or serve the "
            "checkpoint and pass --model openai:NAME",
            field=flag("model-base-url"),
        )
    if revision and not served:
        if not looks_like_hub_id(model) or Path(model).exists():
            raise ConfigError(
                f"applies to a hub id or a served model; {model!r} is a local folder, which has no revisions",
                field=flag("model-revision"),
            )
        if "@" in model:
            raise ConfigError(f"{model!r} already pins a revision; give one of the two", field=flag("model-revision"))
        model = f"{model}@{revision}"
    base = getattr(options, "novelty_base_model", None)
    if base and not _may_be_adapter(model):
        raise ConfigError(f"applies to a PEFT adapter --model (a folder holding adapter_config.json), not to "
                          f"{model!r}; drop it", path=base, field=flag("base-model"))
    if getattr(options, "novelty_adaptive_minutes", None) is not None and not options.novelty_adaptive:
        raise ConfigError(f"bounds the time of the adaptive rounds, so it applies with {flag('adaptive')} SAMPLES; "
                          "give both, or drop it", field=flag("adaptive-minutes"))
    shard = getattr(options, "novelty_shard", None)
    if shard:  # K/N, or auto with the scheduler's variables set
        from pytest_novelty.pipeline.shards import parse_shard

        parse_shard(str(shard), option=flag("shard"))
        if getattr(options, "novelty_fill_missing_shards", False):
            raise ConfigError(f"a shard run generates its own part; {flag('fill-missing-shards')} is for the merge "
                              "run", field=flag("shard"))
        if getattr(options, "novelty_snapshot_update", False) or getattr(options, "update_snapshots", False):
            raise ConfigError("a shard decides no case, so it accepts no snapshot; --snapshot-update is for the "
                              "merge run", field=flag("shard"))
    return model


def _may_be_adapter(model: str) -> bool:
    """Whether ``model`` is, or may be, a PEFT adapter: an adapter folder, or a hub id not yet fetched."""
    from pytest_novelty.generation.backends import is_answers, is_served
    from pytest_novelty.generation.checkpoint import is_adapter
    from pytest_novelty.pipeline.demo import DEMO_MODELS

    if model in DEMO_MODELS or is_served(model) or is_answers(model):
        return False
    return is_adapter(model) or not Path(model).exists()


def check_folders(options: Any, cache_dir: Path, *, front: str = "pytest", cache_ini: bool = False) -> None:
    """Every folder the run writes can be written, before any model loads: the cache (the demo is
    prepared inside it), the report folder, with ``--snapshot-update`` the snapshot folder (the
    ``--novelty-snapshot-dir`` root, else ``__novelty_snapshots__`` in a ``--novelty-suites`` folder)
    and, on the command line, the ``--output`` file's folder.

    A folder that cannot be written is one line naming it and the cause
    (:func:`~pytest_novelty.infra.storage.check_writable`): bad input (exit 4) when the user named it
    (the option, ``cache_ini`` for pytest's ``novelty_cache`` setting, or ``PYTEST_NOVELTY_CACHE``)
    and it is read-only or forbidden, a harness error (exit 8) for a full disk or the default cache
    folder. A read-only cache is refused even when it holds every answer: every run writes to its
    cache (the checksum memo of each checkpoint and index it reads, the demo's lock and repairs, the
    answers it lacks), so a run over it would fail part-way or silently store nothing; copy it to a
    writable folder instead (its entries are whole files, so a copy is a cache).
    """
    from pytest_novelty.infra.storage import check_writable

    check_cache_folder(cache_dir, option=spelled("cache", front), given=bool(options.novelty_cache), ini=cache_ini)
    if options.novelty_report:
        report = Path(str(options.novelty_report)).expanduser()
        check_writable(report, "report folder", named_by=spelled("report", front))
    output = getattr(options, "novelty_output", None)
    if output:
        from pytest_novelty.infra.storage import folder_error, probe_write

        try:
            probe_write(Path(str(output)).expanduser().parent)
        except OSError as exc:
            raise folder_error(output, "folder of the output file", exc, named_by=spelled("output", front)) from None
    root, suites = getattr(options, "novelty_snapshot_dir", None), getattr(options, "novelty_suites", None)
    updating = getattr(options, "update_snapshots", False) or getattr(options, "novelty_snapshot_update", False)
    if updating and (root or suites):  # syrupy would find it read-only after every case ran; SNAPSHOT_DIRNAME
        folder = Path(str(root)) if root else Path(str(suites)) / "__novelty_snapshots__"
        check_writable(folder.expanduser(), "snapshot folder", named_by=spelled("snapshot-dir" if root else "suites",
                                                                                 front))  # fmt: skip


def check_cache_folder(cache_dir: Path, *, option: str, given: bool, ini: bool = False) -> None:
    """The cache folder can be written (see :func:`check_folders`). It was named by the user when
    ``given`` with ``option`` (``--novelty-cache``, the command line's ``--cache``), by the ini
    setting (``ini``) or by ``PYTEST_NOVELTY_CACHE``; else it is the default under the home folder."""
    from pytest_novelty.infra.storage import check_writable

    named = option if given else ("novelty_cache" if ini else None)
    if named is None and os.environ.get("PYTEST_NOVELTY_CACHE"):
        named = "PYTEST_NOVELTY_CACHE"
    check_writable(cache_dir, "cache folder", named_by=named,
                   elsewhere=f"give another folder with {option} DIR (or PYTEST_NOVELTY_CACHE)")


def check_models(
    options: Any, models: Iterable[str], baseline: str | None, cache_dir: Path, suites: Iterable[Suite]
) -> None:
    """Fail fast on a checkpoint that is not there, before anything loads: every model of the run
    (the candidate, a series' earlier checkpoints, the baseline) is checked with the options that
    load it, each error naming the option the user typed; the demo is prepared here (once, on the
    controller under xdist: the caller decides). A served model needs ``--originality``."""
    suites = list(suites)
    auto = any(s.scoring.originality == "auto" for s in suites)
    for model, option in [*((m, "--model") for m in models), *([(baseline, "--baseline-model")] if baseline else [])]:
        check_source(options, model, option, cache_dir, auto=auto)
    check_answer_files(list(models), baseline, suites, every=not getattr(options, "novelty_suite", None))


def check_source(options: Any, model: str, option: str, cache_dir: Path, *, auto: bool) -> None:
    """One model checked before anything loads, with the options that load it (errors naming
    ``option`` as the user typed it); the demo is prepared here. A served model (or files of
    answers) has no folder to find an index in, so with a suite's ``auto`` originality
    (``auto``) it needs ``--originality``."""
    from pytest_novelty.generation.backends import check_model, is_served
    from pytest_novelty.pipeline import demo
    from pytest_novelty.pipeline.runner import needs_originality

    if model in demo.DEMO_MODELS:
        demo.ensure_demo(cache_dir)
        return
    check_model(model, trust_remote_code=bool(options.novelty_trust_remote_code),
                base_model=getattr(options, "novelty_base_model", None), base_url=options.novelty_model_base_url,
                option=option)  # fmt: skip
    if auto and is_served(model) and not options.novelty_originality:
        raise ConfigError(needs_originality(model), field="--originality")


def check_answer_files(models: Sequence[str], baseline: str | None, suites: Sequence[Suite], *, every: bool) -> None:
    """Files of answers (``answers:FILE``) that answer suites the run does not have are bad input
    naming them (a misspelt suite would otherwise go unnoticed: its rows are never read), when
    ``every`` suite of the folder runs; a baseline that names the same answers as the candidate is
    said (every comparison would be of the answers with themselves)."""
    from pytest_novelty.generation.answers import AnswerFiles
    from pytest_novelty.generation.backends import MODEL_SOURCES, is_answers

    named = [*models, *filter(None, [baseline])]
    sources = {model: MODEL_SOURCES.open(model) for model in dict.fromkeys(named) if is_answers(model)}
    families = {suite.family for suite in suites}
    for source in sources.values():
        assert isinstance(source, AnswerFiles)
        unknown = sorted(name for name in source.suites() if name.split("[")[0].split("#")[0] not in families)
        if unknown and every:
            raise ConfigError(f"the files answer suite {unknown[0]!r}{did_you_mean(unknown[0], sorted(families))}, "
                              f"which the suites folder does not have (it has {', '.join(sorted(families))}); "
                              "rename the rows' suite, or add that suite", path=source.argument, field="--model")
    candidate, other = sources.get(models[0]) if models else None, sources.get(baseline or "")
    if candidate is not None and other is not None and candidate.identity_id == other.identity_id:
        notice("[novelty] warning: --baseline-model names the same answers as --model (the same content): every "
               "comparison is of the answers with themselves")


def check_served_model(runner: Runner) -> None:
    """A served model (``openai:NAME``) must be listed by its server, which must answer in seconds.

    The generator opens here (it loads nothing: a served model is only an endpoint), so the run
    uses the one that was checked; a local checkpoint is left to the checks above.
    """
    from pytest_novelty.generation.backends import is_served

    if not is_served(runner.config.model):
        return
    generator = runner.generator()
    if isinstance(generator, Preflighted):
        config = runner.config
        _named_check(generator, config.model_base_url and spelled("model-base-url", config.front))


def _named_check(component: Preflighted, option: str | None) -> None:
    """``component.check()``, its failure naming the option that gave its URL (none: the environment's)."""
    try:
        component.check()
    except PreflightError as exc:
        if not option or option in str(exc):
            raise
        raise PreflightError(f"{option}: {exc}") from None


def check_context(runner: Runner, suites: Iterable[Suite], generating: Iterable[Suite] | None = None) -> None:
    """Every suite's ``generation.max_new_tokens`` must leave room for a prompt in the context.

    Read from the checkpoint's ``config.json`` (``max_position_embeddings`` / ``n_positions``);
    a hub id or a served model is checked when it loads. The prompts themselves are counted only
    for the runs in ``generating`` (all of ``suites`` when None): a run whose answers are all cached
    sends no prompt to the model, and counting needs the tokenizer (and with it torch).
    """
    from pytest_novelty.generation.checkpoint import context_length, context_refusal

    path = runner.model_path()
    if not Path(path).is_dir():
        return
    context = context_length(path)
    if context is None:
        return
    suites = list(suites)
    for suite in suites:
        if suite.generation.max_new_tokens >= context:
            raise context_refusal(suite.generation.max_new_tokens, context, path=suite.path)
    counted = suites if generating is None else list(generating)
    if counted:
        check_prompt_lengths(runner, counted, path, context)


def check_prompt_lengths(runner: Runner, suites: Iterable[Suite], path: str, context: int) -> None:
    """No prompt fills the model's context: each suite's model inputs (with their in-context
    examples and the chat template) are counted with the checkpoint's own tokenizer, read from
    its folder without loading the weights. A prompt of ``context`` tokens or more would leave no
    room for an answer: bad input, named by its file and line, found before the model loads.

    The tokenizer is the one the generation step loads (an adapter without its own uses its
    base's), so one that cannot be read is bad input now, in one line naming the checkpoint
    (:func:`~pytest_novelty.generation.checkpoint.load_tokenizer`), not a check silently skipped. Only an
    adapter over a hub base is left to the generation step, which counts the lengths again."""
    from pytest_novelty.generation.checkpoint import load_tokenizer, render, token_counts, tokenizer_source

    source = tokenizer_source(path, runner.config.base_model)
    if not Path(source).is_dir():  # a hub base: read when the model loads, at its pinned commit
        return
    tokenizer = load_tokenizer(source, trust_remote_code=runner.config.trust_remote_code)
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


def check_recorded_answers(runner: Runner, suites: Iterable[Suite]) -> None:
    """A source whose answers exist already (``--model answers:FILE``) answers every prompt of
    every run as the suite would have them generated: each prompt that has no answers, fewer than
    ``generation.samples``, another prompt text or contradicting settings is bad input naming the
    prompt and the file, found here, before anything is scored. Runs whose inputs are built only
    during the run (:func:`~pytest_novelty.pipeline.warm.model_inputs`) are checked when they run."""
    from pytest_novelty.generation import is_recorded
    from pytest_novelty.pipeline.answers import check_recorded
    from pytest_novelty.pipeline.warm import model_inputs

    generator = runner.generator()
    if not is_recorded(generator):
        return
    for suite, known in model_inputs(runner, suites):
        if known is not None:
            prompts, _, texts, settings = known
            check_recorded(generator, suite, prompts, texts, settings)


def check_checkpoint_identity(model: str) -> None:
    """Resolve a hub id once, before the run, where :mod:`pytest_novelty.infra.identity` can.

    The identity module (content hashes and hub revisions) resolves ``org/name`` to a commit; a
    failure there (no network, no such repository) becomes one :class:`PreflightError` line. Local
    folders and the demo are left to the checkpoint checks that already ran.
    """
    from pytest_novelty.infra.hub import looks_like_hub_id
    from pytest_novelty.infra.identity import checkpoint_identity

    if Path(model).exists() or not looks_like_hub_id(model):
        return
    try:
        checkpoint_identity(model)
    except NoveltyError:
        raise
    except Exception as exc:  # network and hub errors: one line, not the hub client's retries
        raise PreflightError(f"cannot resolve the hub id {model!r}: {type(exc).__name__}: {exc}") from None
