"""``hf:PATH``: an LLM judge run locally, a causal LM loaded through transformers.

The same rubrics (:mod:`.rubrics`) and parsing (:mod:`.parsing`) as the ``openai:`` judge. The
rubric messages go through the checkpoint's chat template; a checkpoint without one (a base model)
gets the system and user text joined, followed by ``Evaluation:``. Generation reuses the
generation layer's Hugging Face backend: prompts batched by length with left padding, ``samples``
sequences per prompt sampled at ``temperature``, reproducible from ``seed``.

A sample whose reply holds no valid score is generated again with another seed, at most
``max_reasks`` times; an item none of whose samples scored is unscored (``quality=None``). Each
answer is cached per (spec, checkpoint fingerprint, seed, temperature, rubric version, task,
prompt, response, sample index). The model is loaded on first use, not when the judge is opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.errors import ConfigError
from pytest_novelty.scoring.judges.base import JudgeItem, JudgeResult, rubric_result
from pytest_novelty.scoring.judges.cache import AnswerCache, answer_key
from pytest_novelty.scoring.judges.parsing import UnparsableScore, parse_score
from pytest_novelty.scoring.judges.rubrics import rubric_for


class HFJudge:
    """Grades items with a local causal LM; see the module doc."""

    def __init__(
        self,
        path: str,
        *,
        cache_dir: Path | str | None = None,
        samples: int = 5,
        temperature: float = 0.7,
        batch_size: int = 0,
        max_new_tokens: int = 256,
        seed: int = 0,
        max_reasks: int = 1,
        device: str = "auto",
        trust_remote_code: bool = False,
    ) -> None:
        from pytest_novelty.generation.hf import check_checkpoint, checkpoint_fingerprint

        if samples < 1 or batch_size < 0 or max_new_tokens < 1 or max_reasks < 0:
            raise ValueError("samples and max_new_tokens must be >= 1, batch_size (0: auto) and max_reasks >= 0")
        try:
            check_checkpoint(path, trust_remote_code=trust_remote_code)
        except ConfigError as exc:
            raise ConfigError(f"hf:{path}: {exc}", field="--judge") from None
        self.path = path
        self.spec = f"hf:{path}"
        self.description = f"local LLM judge {path}"
        self.samples = samples
        self.temperature = temperature
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.max_reasks = max_reasks
        self.device = device
        self.trust_remote_code = trust_remote_code
        self.fingerprint = checkpoint_fingerprint(path)
        self.cache = AnswerCache(cache_dir)
        self.sequences_generated = 0
        """Judge replies generated over the life of this judge (re-asks included)."""
        self._generator: Any = None

    def __repr__(self) -> str:
        return f"HFJudge(spec={self.spec!r}, samples={self.samples}, temperature={self.temperature})"

    def planned_calls(self, items: Sequence[JudgeItem]) -> int:
        """Dry run: how many judge replies a run would generate from the current cache (no re-asks)."""
        keys = {key for item in items for key in self._keys(item)}
        return len(keys - set(self.cache.get_many(keys)))

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        """Grade ``items`` (see the module doc); one result per item, in order."""
        keys = [self._keys(item) for item in items]
        answers = self.cache.get_many(key for item_keys in keys for key in item_keys)
        for attempt in range(1 + self.max_reasks):
            # one generation per distinct item: identical items share their answers
            unique: dict[str, int] = {}
            for i, item_keys in enumerate(keys):
                unique.setdefault(item_keys[0], i)
            todo = [i for i in unique.values() if any(key not in answers for key in keys[i])]
            if not todo:
                break
            replies = self._generate([items[i] for i in todo], attempt, progress)
            last = attempt == self.max_reasks
            for i, texts in zip(todo, replies, strict=True):
                missing = [key for key in keys[i] if key not in answers]
                for key, reply in zip(missing, texts, strict=False):
                    try:
                        answer: dict[str, Any] = {"score": parse_score(reply), "error": None}
                    except UnparsableScore as unparsable:
                        if not last:
                            continue
                        answer = {"score": None, "error": f"{unparsable} (asked {attempt + 1} times)"}
                    answer["reply"] = reply
                    answers[key] = answer
                    self.cache.put(key, answer)
        results = []
        for item_keys in keys:
            found = [answers[key] for key in item_keys if key in answers]
            scores = [a["score"] for a in found if a["score"] is not None]
            results.append(rubric_result(scores, self.spec, [a["error"] for a in found if a["error"]]))
        return results

    # -- internals --------------------------------------------------------------------------------

    def _keys(self, item: JudgeItem) -> list[str]:
        rubric = rubric_for(item.task)
        return [
            answer_key(
                self.spec,
                self.fingerprint,
                self.seed,
                self.temperature,
                rubric.version,
                item.task,
                item.prompt,
                item.response,
                sample,
            )
            for sample in range(self.samples)
        ]

    def _load(self) -> Any:
        if self._generator is None:
            from pytest_novelty.generation import open_generator

            try:
                self._generator = open_generator(
                    self.path, device=self.device, trust_remote_code=self.trust_remote_code
                )
            except ConfigError as exc:
                raise ConfigError(f"hf:{self.path}: {exc}", field="--judge") from None
        return self._generator

    def _render(self, item: JudgeItem) -> str:
        generator = self._load()
        messages = rubric_for(item.task).messages(item)
        try:
            return str(generator.render(messages))
        except ConfigError:  # no chat template: a plain prompt for a base model
            system, user = messages[0]["content"], messages[1]["content"]
            return f"{system}\n\n{user}\n\nEvaluation:"

    def _generate(self, items: Sequence[JudgeItem], attempt: int, progress: bool) -> list[list[str]]:
        """``samples`` replies per item, batched by length; each attempt uses its own seed."""
        from pytest_novelty.generation import Progress, generate
        from pytest_novelty.suites.schema import GenerationSettings

        generator = self._load()
        texts = [self._render(item) for item in items]
        settings = GenerationSettings(
            samples=self.samples,
            temperature=self.temperature,
            top_p=1.0,
            top_k=0,
            max_new_tokens=self.max_new_tokens,
            seed=self.seed + 7919 * attempt,
            batch_size=self.batch_size,
        )
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(texts) * self.samples, desc=f"judge {self.spec}", unit="reply")

        def advance(done: Progress) -> None:
            if bar is not None:
                bar.n = done.rows_done
                bar.refresh()

        replies, _ = generate(generator, texts, settings, on_batch=advance)
        if bar is not None:
            bar.close()
        self.sequences_generated += sum(len(r) for r in replies)
        return replies
