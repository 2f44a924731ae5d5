"""The pipeline that runs one suite end to end, shared by the pytest plugin and the command line.

suites → generation → scoring → metrics: this module only wires the layers together and keeps
what is expensive (loaded models, backends, judges) for the length of a session.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pytest_novelty.errors import ConfigError, HarnessError
from pytest_novelty.progress import QUIET, ProgressSink
from pytest_novelty.storage import read_json, stable_hash
from pytest_novelty.suites.prompts import Prompt
from pytest_novelty.suites.schema import Suite

Log = Callable[[str], None]

LOOKUP_CHUNK = 512  # texts per originality request to a backend, and per cached file
JUDGE_CHUNK = 256  # answers per call to a judge (a remote judge runs each chunk's requests concurrently)
TOP_REASONS = 3  # reasons named when too many answers are unscored


SERVED_NEEDS_ORIGINALITY = (
    "a served model has no checkpoint folder to find novelty-index/ in; pass --originality "
    "infini-gram:DIR (an index of its training corpus)"
)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class RunConfig:
    """Session-wide settings from the command line (they override the suite files)."""

    model: str
    cache_dir: Path
    device: str = "auto"
    originality: str | None = None
    judge: str | None = None
    judge_base_url: str | None = None
    trust_remote_code: bool = False
    seed: int | None = None
    generator: str = "hf"
    gpus_per_worker: int = 1  # GPUs one model is spread over
    base_model: str | None = None  # the base checkpoint of a PEFT adapter folder (else its config's)
    model_base_url: str | None = None  # the endpoint of a served model (--model openai:NAME)
    model_revision: str | None = None  # the served weights' revision, for the cache key
    worker: str = "main"  # the pytest-xdist worker running the suites (for the log and the report)
    log: Log = _stderr
    progress: ProgressSink = QUIET


@dataclass
class SuiteResult:
    """Everything one suite produced for one checkpoint."""

    suite: Suite
    model: str
    prompts: list[Prompt]
    answers: list[list[str]]
    originality: dict[int, np.ndarray]
    quality: np.ndarray
    metrics: dict[str, float]
    per_prompt: dict[str, list[float]]
    info: dict[str, Any] = field(default_factory=dict)


def _swept(suite: Suite) -> str:
    name = suite.name
    return name[name.rindex("[") + 1 : name.rindex("=")] if "[" in name else ""


class Runner:
    """Runs suites against one checkpoint, loading each heavy part once."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self._generator: Any = None
        self._model_path: str | None = None
        self._backends: dict[str, Any] = {}
        self._judges: dict[tuple[Any, ...], Any] = {}
        self._agreements: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._identities: dict[str, str] = {}

    # -- resolution -----------------------------------------------------------------------------

    def model_path(self) -> str:
        """The checkpoint to load; ``demo`` and ``demo-early`` are built on first use."""
        if self._model_path is None:
            from pytest_novelty import demo

            model = self.config.model
            if model in demo.DEMO_MODELS:
                assets = demo.ensure_demo(self.config.cache_dir, log=self.config.log)
                self._model_path = str(assets / model)
            else:
                from pytest_novelty.generation import check_model

                check_model(
                    model,
                    trust_remote_code=self.config.trust_remote_code,
                    base_model=self.config.base_model,
                    base_url=self.config.model_base_url,
                )
                self._model_path = model
        return self._model_path

    def originality_spec(self, suite: Suite) -> str:
        """The originality backend spec: the command line wins, then the suite file.

        ``auto`` means the index that belongs to the checkpoint: the demo's own training corpus,
        or a ``novelty-index/`` folder saved inside the checkpoint folder.
        """
        spec = self.config.originality or suite.scoring.originality
        if spec != "auto":
            return spec
        from pytest_novelty import demo

        if self.config.model in demo.DEMO_MODELS:
            return f"infini-gram:{demo.ensure_demo(self.config.cache_dir, log=self.config.log) / 'index'}"
        from pytest_novelty.generation import is_served

        if is_served(self.config.model):
            raise ConfigError(SERVED_NEEDS_ORIGINALITY, path=suite.path, field="scoring.originality")
        local = Path(self.model_path()) / "novelty-index"
        from pytest_novelty.scoring.originality import is_index

        if is_index(local):
            return f"infini-gram:{local}"
        raise ConfigError(
            "scoring.originality is 'auto' but the checkpoint has no novelty-index/ folder; index its "
            "training corpus (pytest-novelty index build) and pass --originality infini-gram:DIR",
            path=suite.path,
            field="scoring.originality",
        )

    def generator(self) -> Any:
        if self._generator is None:
            from pytest_novelty.generation import open_generator
            from pytest_novelty.identity import identity_memo

            path = self.model_path()
            self.config.log(f"[novelty] loading {self.config.model} ({path})")
            self._generator = open_generator(
                path,
                device=self.config.device,
                trust_remote_code=self.config.trust_remote_code,
                backend=self.config.generator,
                gpus=self.config.gpus_per_worker,
                base_model=self.config.base_model,
                base_url=self.config.model_base_url,
                revision=self.config.model_revision,
                log=self.config.log,
                memo=identity_memo(self.config.cache_dir),
            )
        return self._generator

    def backend(self, spec: str) -> Any:
        if spec not in self._backends:
            from pytest_novelty.scoring.originality import open_backend

            self._backends[spec] = open_backend(spec, cache_dir=self.config.cache_dir / "originality")
        return self._backends[spec]

    def judge(self, suite: Suite) -> Any:
        spec = self.config.judge or suite.scoring.judge
        key = (spec, suite.scoring.judge_samples, suite.scoring.judge_temperature)
        if key not in self._judges:
            from pytest_novelty.scoring.judges import open_judge

            self._judges[key] = open_judge(
                spec,
                cache_dir=self.config.cache_dir / "judge",
                samples=suite.scoring.judge_samples,
                temperature=suite.scoring.judge_temperature,
                base_url=self.config.judge_base_url,
            )
            if hasattr(self._judges[key], "notify"):
                self._judges[key].notify = self.config.log  # waits on a remote judge are shown
        return self._judges[key]

    def judge_agreement(self, suite: Suite) -> dict[str, Any] | None:
        """The suite judge's agreement with ``[scoring] calibration`` (once per judge and file), or None.

        Measured for the checkpoint that is gated only (the plugin and ``run`` put it in its
        ``info["judge_agreement"]``): the judge, not the checkpoint, is what it describes."""
        if suite.scoring.calibration is None:
            return None
        from pytest_novelty.scoring.judges.calibrate import suite_agreement

        key = (self.config.judge or suite.scoring.judge, suite.scoring.judge_samples,
               suite.scoring.judge_temperature, suite.scoring.calibration, suite.base_dir, suite.task)
        if key not in self._agreements:
            self._agreements[key] = suite_agreement(self.judge(suite), suite)
        return self._agreements[key]

    # -- the pipeline ---------------------------------------------------------------------------

    def load_prompts(self, suite: Suite) -> list[Prompt]:
        """The suite's prompts."""
        from pytest_novelty.suites.loaders import load_prompts

        src = suite.prompts
        options = {"task": suite.task, **dict(src.options)}
        prompts = load_prompts(src.source, base_dir=suite.base_dir, limit=src.limit, seed=src.seed, **options)
        if suite.gate.reference:
            # Compared with the human references, so only prompts that have one take part.
            prompts = [p for p in prompts if p.reference]
        if not prompts:
            raise ConfigError("the prompt source yielded no prompts", path=suite.path, field="prompts.source")
        return prompts

    def prompts(self, suite: Suite) -> tuple[list[Prompt], list[Any]]:
        """The suite's prompts and the model inputs built from them."""
        from pytest_novelty.suites.prompting import build_inputs

        prompts = self.load_prompts(suite)
        return prompts, build_inputs(suite, prompts)

    def run(
        self, suite: Suite, *, pool_novelty: np.ndarray | None = None, inputs: list[Any] | None = None
    ) -> SuiteResult:
        """Generate, score and summarise one suite.

        ``pool_novelty`` (prompts × samples originality at n = 4 of a frozen reference pool, e.g.
        the baseline checkpoint) ranks the prompts for q@Tail; without it the candidate's own
        outputs do. ``inputs`` replaces the model inputs built from the suite's prompting settings
        (one per prompt, in order), as the rounds of denial prompting do.
        """
        from pytest_novelty.cache import repaired
        from pytest_novelty.suites.prompting import extract_answer
        from pytest_novelty.suites.tasks import get_task

        log = self.config.log
        start = time.perf_counter()
        repaired_before = repaired()
        if inputs is None:
            prompts, inputs = self.prompts(suite)
        else:
            prompts = self.load_prompts(suite)
            if len(inputs) != len(prompts):
                raise ValueError(f"{len(inputs)} inputs for {len(prompts)} prompts")
        gen = self.generator()
        task = get_task(suite.task)
        texts = [gen.render(x) for x in inputs]
        settings = suite.generation
        if self.config.seed is not None:
            settings = replace(settings, seed=self.config.seed)
        if not settings.stop and task.stop:
            settings = replace(settings, stop=tuple(task.stop))

        from pytest_novelty.generation.hf import PromptTooLong

        try:
            raw, stats = self._generate(suite.name, gen, texts, settings)
        except PromptTooLong as exc:
            raise self._too_long(suite, gen, prompts, texts, exc) from None
        method = suite.prompting.method
        answers = [
            [extract_answer(method, task, p, r) for r in samples] for p, samples in zip(prompts, raw, strict=True)
        ]
        t_gen = time.perf_counter() - start
        info = {
            "model": self.config.model,
            "model_path": self.model_path(),
            "fingerprint": gen.fingerprint,
            "identity": str(getattr(getattr(gen, "identity", None), "description", gen.fingerprint)),
            "samples": settings.samples,
            "generated_batches": stats.batches,
            "generated_rows": stats.rows,
            "cached_rows": stats.cached_rows,
            "tokens": stats.tokens,
            "tokens_per_second": round(stats.tokens_per_second, 1),
            "worker": self.config.worker,
            "device": str(getattr(gen, "device", "")) if stats.rows else "cache",
            "sweep": None
            if suite.sweep_value is None
            else {"suite": suite.path.stem, "parameter": _swept(suite), "value": suite.sweep_value},
        }
        result = self.score(suite, prompts, answers, pool_novelty=pool_novelty, info=info)
        result.info["seconds"]["generation"] = t_gen
        result.info["cache_repaired"] = repaired() - repaired_before
        log(work_line(suite.name, result.info))
        return result

    def _too_long(self, suite: Suite, gen: Any, prompts: list[Prompt], texts: list[str], exc: Any) -> ConfigError:
        """Name the prompt that does not fit the context: its file and line, and what made it long."""
        from pytest_novelty.suites.loaders import locate_prompt

        counts = gen.token_counts(texts)
        worst = max(range(len(texts)), key=lambda i: counts[i])
        where = locate_prompt(suite.prompts.source, prompts[worst].id, base_dir=suite.base_dir)
        examples = suite.prompting.examples if suite.prompting.method in ("few-shot", "novel-examples") else 0
        fix = (
            f"use fewer in-context examples (prompting.examples = {examples})"
            if examples
            else "shorten the prompt or leave it out"
        )
        field = "prompting.examples" if examples else "prompts.source"
        return ConfigError(
            f"{where}: the model input is {counts[worst]} tokens, beyond the model's context of "
            f"{exc.context} tokens; {fix}",
            path=suite.path,
            field=field,
        )

    def _generate(self, name: str, gen: Any, texts: list[str], settings: Any) -> tuple[list[list[str]], Any]:
        """The generation step with a progress bar (samples, tokens/s, ETA), or quarter-way log lines."""
        from pytest_novelty import generation

        total = len(texts) * settings.samples
        reported = [0]
        with self.config.progress.bar(total, f"{name}: generating", unit="sample") as bar:

            def on_batch(p: generation.Progress) -> None:
                # update() redraws at most every tenth of a second: this runs at every decoding step.
                bar.set_postfix_str(f"{p.tokens_per_second:,.0f} tok/s", refresh=False)
                bar.update(total - p.rows_total + p.rows_done - bar.n)
                quarter = 4 * p.rows_done // p.rows_total
                if bar.disable and quarter > reported[0]:
                    reported[0] = quarter
                    eta = p.seconds / p.rows_done * (p.rows_total - p.rows_done)
                    self.config.log(
                        f"[novelty] {name}: generated {p.rows_done}/{p.rows_total} samples "
                        f"({p.batches_done}/{p.batches_total} batches done, {p.tokens_per_second:,.0f} tokens/s, "
                        f"ETA {eta:.0f}s)"
                    )

            done = generation.generate(
                gen, texts, settings, cache_dir=self.config.cache_dir / generation.NAMESPACE, on_batch=on_batch
            )
            bar.refresh()  # the final count, which the rate limit may have held back
            return done

    def references(self, suite: Suite) -> SuiteResult:
        """The dataset's human references, scored like a checkpoint's answers (one per prompt).

        Only prompts with a reference take part; the paired comparison with the candidate uses the
        prompt ids both share.
        """
        prompts = self.load_prompts(suite)
        if not suite.gate.reference or not prompts:
            raise ConfigError(
                "gate.reference is on but no prompt has a human reference", path=suite.path, field="gate.reference"
            )
        answers = [[str(p.reference)] for p in prompts]
        result = self.score(suite, prompts, answers, info={"model": "human references"})
        result.model = "human references"
        return result

    def score(
        self,
        suite: Suite,
        prompts: list[Prompt],
        answers: list[list[str]],
        *,
        pool_novelty: np.ndarray | None = None,
        info: dict[str, Any] | None = None,
    ) -> SuiteResult:
        """Originality, quality and the suite's metrics for given answers (prompts × samples)."""
        start = time.perf_counter()
        originality, prompt_novelty, longest, lookups = self._originality(suite, prompts, answers)
        t_orig = time.perf_counter() - start
        quality, judge_info, judge_requests, reasons = self._quality(suite, prompts, answers)
        t_judge = time.perf_counter() - start - t_orig

        from pytest_novelty.metrics.suite import suite_metrics

        equivalent = None
        if any(t.base in ("distinct_k", "utility_k") for t in suite.thresholds) and len(answers[0]) > 1:
            from pytest_novelty.scoring.partitioners import open_equivalence

            equivalent = open_equivalence(suite.scoring.equivalence)
        metrics, per_prompt, tails = suite_metrics(
            quality=quality,
            originality=originality,
            prompt_ids=[p.id for p in prompts],
            metrics=[t.metric for t in suite.thresholds if equivalent or t.base not in ("distinct_k", "utility_k")],
            prompt_novelty=prompt_novelty,
            answers=answers,
            equivalent=equivalent,
            pool_novelty=pool_novelty,
        )
        info = {
            **(info or {}),
            "judge": judge_info,
            "originality": self.originality_spec(suite),
            "units": self.originality_units(self.originality_spec(suite)),
            "prompts": len(prompts),
            "seconds": {"originality": t_orig, "judge": t_judge},
            "longest_copied": longest,
            "tail_ids": tails,
            "originality_lookups": lookups,
            "judge_requests": judge_requests,
            "unscored_reasons": reasons,
        }
        model = str(info.get("model", self.config.model))
        return SuiteResult(suite, model, prompts, answers, originality, quality, metrics, per_prompt, info)

    def originality_units(self, spec: str) -> str:
        """What originality's n-grams were counted in: words, or the tokens of the index's tokenizer."""
        kind, _, target = spec.partition(":")
        if kind not in ("infini-gram", "ngram-set"):
            return f"the {kind} index's units"
        from pytest_novelty.scoring.originality import INFO_FILE

        folder = Path(target.replace(os.pathsep, ",").split(",")[0].split("?", 1)[0].strip())
        tokenizer = str((read_json(folder / INFO_FILE) or {}).get("tokenizer", ""))
        if tokenizer == "words":
            return "words"
        built_with = Path(tokenizer).expanduser().resolve() if tokenizer else None
        if built_with is not None and built_with.suffix == ".json":
            built_with = built_with.parent
        own = built_with == Path(self._model_path or self.config.model).expanduser().resolve()
        return "tokens of the checkpoint's tokenizer" if own else f"tokens of {tokenizer or 'the index tokenizer'}"

    def _index_identity(self, spec: str) -> str:
        """What the originality answers depend on: the spec and, for local indexes, their metadata
        (read once per session: in ``words`` mode it holds the whole vocabulary)."""
        if spec not in self._identities:
            from pytest_novelty.scoring.originality import INFO_FILE

            kind, _, target = spec.partition(":")
            metas = []
            if kind in ("infini-gram", "ngram-set"):
                for part in target.replace(os.pathsep, ",").split(","):
                    metas.append(read_json(Path(part.split("?", 1)[0].strip()) / INFO_FILE))
            self._identities[spec] = stable_hash(spec, metas)
        return self._identities[spec]

    def _lookup(self, spec: str, texts: list[str], ns: list[int], what: str) -> tuple[list[dict[str, Any]], int]:
        """Originality of ``texts``, from the score cache or the backend, and how many were looked up.

        Texts are scored in chunks of ``LOOKUP_CHUNK``, each cached (namespace
        ``originality-scores``) as soon as it is done, so an interrupted run keeps the chunks it
        finished. A cached chunk whose layout does not fit (:func:`_scores_fit`) is dropped and
        scored again, like any damaged entry.
        """
        from pytest_novelty.cache import Cache
        from pytest_novelty.scoring.originality import score_texts

        identity = self._index_identity(spec)
        out: list[dict[str, Any]] = []
        looked_up = 0
        with self.config.progress.bar(len(texts), what, unit="text") as bar:
            for start in range(0, len(texts), LOOKUP_CHUNK):
                chunk = texts[start : start + LOOKUP_CHUNK]
                fits = functools.partial(_scores_fit, count=len(chunk), ns=ns)
                scores = Cache(self.config.cache_dir).namespace("originality-scores", validate=fits)
                key = stable_hash(identity, ns, chunk)
                cached = scores.get(key)
                if cached is None:
                    fresh = [_score_row(r, ns) for r in score_texts(self.backend(spec), chunk, ns)]
                    looked_up += len(chunk)
                    cached = scores.put(key, fresh)
                out.extend(cached)
                bar.update(len(chunk))
        return out, looked_up

    def _originality(
        self, suite: Suite, prompts: list[Prompt], answers: list[list[str]]
    ) -> tuple[dict[int, np.ndarray], np.ndarray, list[dict[str, Any]], int]:
        spec = self.originality_spec(suite)
        flat = [a for samples in answers for a in samples]
        ns = sorted({*suite.scoring.ngrams, 4})
        results, looked_up = self._lookup(spec, flat, ns, f"{suite.name}: originality")
        shape = (len(answers), len(answers[0]) if answers else 0)

        def column(rows: list[dict[str, Any]], n: int) -> np.ndarray:
            return np.array([math.nan if r["originality"][str(n)] is None else r["originality"][str(n)] for r in rows])

        originality = {n: column(results, n).reshape(shape) for n in ns}
        texts = [p.text for p in prompts]
        prompt_rows, prompts_looked_up = self._lookup(spec, texts, [4], f"{suite.name}: prompt novelty")
        prompt_novelty = column(prompt_rows, 4)
        ranked = sorted(range(len(results)), key=lambda i: -results[i]["longest_span"])[:3]
        longest = [{"generation": flat[i], **results[i]} for i in ranked]
        return originality, prompt_novelty, longest, looked_up + prompts_looked_up

    def _quality(
        self, suite: Suite, prompts: list[Prompt], answers: list[list[str]]
    ) -> tuple[np.ndarray, str, int, list[list[Any]]]:
        """Quality per answer (NaN where the judge gave no score), the judge's description, the
        requests it sent, and the reasons for unscored answers, most frequent first.

        More unscored answers than ``scoring.max_unscored`` allows is a harness error naming the
        most frequent reasons: the judge, not the model, failed.
        """
        from pytest_novelty.scoring.judges import JudgeItem

        judge = self.judge(suite)
        items = [
            JudgeItem(task=suite.task, prompt=p.text, response=a, meta=dict(p.meta))
            for p, samples in zip(prompts, answers, strict=True)
            for a in samples
        ]
        sent_before = int(getattr(judge, "requests_sent", 0))
        results = []
        with self.config.progress.bar(len(items), f"{suite.name}: judging", unit="answer") as bar:
            for start in range(0, len(items), JUDGE_CHUNK):
                chunk = items[start : start + JUDGE_CHUNK]
                results.extend(judge.score(chunk))
                bar.update(len(chunk))
        sent = int(getattr(judge, "requests_sent", 0)) - sent_before
        flat = np.array([math.nan if r.quality is None else r.quality for r in results], dtype=float)
        reasons = unscored_reasons(results)
        unscored = int(np.isnan(flat).sum())
        if items and unscored / len(items) > suite.scoring.max_unscored:
            named = ", ".join(f"{reason} ({count})" for reason, count in reasons[:TOP_REASONS])
            raise HarnessError(
                f"{suite.name}: the judge {judge.spec} left {unscored} of {len(items)} answers unscored "
                f"({unscored / len(items):.0%}, above scoring.max_unscored = {suite.scoring.max_unscored:g}): {named}"
            )
        if unscored:
            named = ", ".join(f"{reason} ({count})" for reason, count in reasons[:TOP_REASONS])
            self.config.log(f"[novelty] {suite.name}: {unscored} of {len(items)} answers unscored: {named}")
        return flat.reshape(len(answers), -1), str(getattr(judge, "description", judge.spec)), sent, reasons


def unscored_reasons(results: list[Any]) -> list[list[Any]]:
    """``[reason, answers]`` pairs for the judge results without a score, most frequent first.

    An answer counts once under each distinct reason its samples failed with; a "no score in
    reply (...)" reason is counted without its detail, so one cause is one line.
    """
    from collections import Counter

    from pytest_novelty.scoring.judges.base import NO_SCORE, REASON_SEPARATOR

    counts: Counter[str] = Counter()
    for result in results:
        if result.quality is not None:
            continue
        parts = (result.error or "no reason given").split(REASON_SEPARATOR)
        counts.update(list(dict.fromkeys(NO_SCORE if p.startswith(NO_SCORE) else p.strip()[:160] for p in parts)))
    return [[reason, count] for reason, count in counts.most_common()]


def _score_row(result: Any, ns: list[int]) -> dict[str, Any]:
    """One text's originality answer, as cached."""
    return {
        "originality": {str(n): result.originality[n] for n in ns},
        "longest_span": result.longest_span,
        "longest_span_doc": result.longest_span_doc,
        "longest_span_text": getattr(result, "longest_span_text", ""),
    }


def _scores_fit(rows: Any, count: int, ns: list[int]) -> bool:
    """Whether a cached chunk of originality answers has the layout :func:`_score_row` writes."""
    if not isinstance(rows, list) or len(rows) != count:
        return False
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("originality"), dict):
            return False
        values = [row["originality"].get(str(n), "missing") for n in ns]
        if any(v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))) for v in values):
            return False
        if not isinstance(row.get("longest_span"), int) or not isinstance(row.get("longest_span_text", ""), str):
            return False
    return True


def batches_text(count: int) -> str:
    """``1 batch``, ``3 batches``."""
    return f"{count} batch" if count == 1 else f"{count} batches"


def work_line(name: str, info: dict[str, Any]) -> str:
    """The run log's line for one suite: where it ran and what it did (an xdist worker sends it on)."""
    seconds = info.get("seconds", {})
    repaired = int(info.get("cache_repaired", 0))
    warning = f"; warning: {repaired} damaged cache entries dropped and recomputed" if repaired else ""
    return (
        f"[novelty {info.get('worker', 'main')}] {name}: {info.get('prompts', 0)} prompts x "
        f"{info.get('samples', 0)} samples; {info.get('generated_rows', 0)} generated in "
        f"{batches_text(int(info.get('generated_batches', 0)))} on {info.get('device', '?')} "
        f"({float(info.get('tokens_per_second', 0)):,.0f} tokens/s, {float(seconds.get('generation', 0)):.1f}s), "
        f"{info.get('cached_rows', 0)} from cache; originality {float(seconds.get('originality', 0)):.1f}s, "
        f"judge {float(seconds.get('judge', 0)):.1f}s{warning}"
    )
