"""``hf:PATH``: an LLM judge run locally, a causal LM loaded through transformers.

The same rubrics and score parsing as the ``openai:`` judge, through the checkpoint's chat
template (a base model gets the system and user text joined, then ``Evaluation:``), sampled by the
generation layer, reproducible from ``seed``. A sample whose reply holds no valid score is
generated again with another seed, at most ``max_reasks`` times. The model loads on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Unpack

from pytest_novelty.scoring.judges.base import JUDGES, NO_SCORE, JudgeItem, JudgeResult, rubric_result
from pytest_novelty.scoring.judges.cache import AnswerCache, judge_key
from pytest_novelty.scoring.judges.parsing import UnparsableScore, parse_score
from pytest_novelty.scoring.judges.rubrics import rubric_for
from pytest_novelty.scoring.llm import LOCAL_CHAT_OPTIONS, LocalChatModel, LocalChatOptions
from pytest_novelty.suites.prompting import Message

HF_JUDGE_DEFAULTS = LocalChatOptions(
    temperature=0.7, batch_size=0, max_new_tokens=256, seed=0, device="auto", trust_remote_code=False
)


@JUDGES.register(
    "hf",
    argument="PATH",
    options={"max_reasks": int, **{k: v for k, v in LOCAL_CHAT_OPTIONS.items() if k != "temperature"}},
    summary="an LLM judge run locally through transformers",
)
class HFJudge(LocalChatModel):
    """Grades items with a local causal LM."""

    def __init__(
        self, path: str, *, cache_dir: Path | str | None = None, samples: int = 5, max_reasks: int = 1,
        **local: Unpack[LocalChatOptions],
    ) -> None:
        """``local``: by default temperature 0.7, up to 256 new tokens, seed 0, batches as large as
        the memory allows, on the session's device."""
        if samples < 1 or max_reasks < 0:
            raise ValueError("samples must be >= 1, max_reasks >= 0")
        super().__init__(path, field="--judge", options=local, defaults=HF_JUDGE_DEFAULTS, cache_dir=cache_dir)
        self.description = f"local LLM judge {path}"
        self.samples = samples
        self.max_reasks = max_reasks
        self.cache = AnswerCache(cache_dir)

    def __repr__(self) -> str:
        return f"HFJudge(spec={self.spec!r}, samples={self.samples}, temperature={self.sampling.temperature})"

    def planned_calls(self, items: Sequence[JudgeItem]) -> int:
        """Dry run: how many judge replies a run would generate from the current cache (no re-asks)."""
        keys = {key for item in items for key in self._keys(item)}
        return len(keys - set(self.cache.get_many(keys)))

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        """One result per item, in order; identical items share their answers."""
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
                        answer = {"score": None, "error": f"{NO_SCORE} ({unparsable}, asked {attempt + 1} times)"}
                    answer["reply"] = reply
                    answers[key] = self.cache.put(key, answer)  # another run's answer if it was first
        results = []
        for item_keys in keys:
            found = [answers[key] for key in item_keys if key in answers]
            scores = [a["score"] for a in found if a["score"] is not None]
            results.append(rubric_result(scores, self.spec, [a["error"] for a in found if a["error"]]))
        return results

    def _keys(self, item: JudgeItem) -> list[str]:
        rubric = rubric_for(item.task)
        sampling = {"temperature": self.sampling.temperature, "seed": self.sampling.seed,
                    "max_new_tokens": self.sampling.max_new_tokens, "max_reasks": self.max_reasks}
        return [
            judge_key(kind="hf", model=f"{self.path}@{self.identity_id}", rubric=rubric.version, sampling=sampling,
                      samples=self.samples, task=item.task, prompt=item.prompt, response=item.response, sample=sample)
            for sample in range(self.samples)
        ]

    def _render(self, item: JudgeItem) -> str:
        """The text the model sees for ``item``'s rubric (a plain prompt for a base model)."""
        return self._chat_text(rubric_for(item.task).messages(item), _plain_rubric)[0]

    def _generate(self, items: Sequence[JudgeItem], attempt: int, progress: bool) -> list[list[str]]:
        """``samples`` replies per item, batched by length; each attempt uses its own seed."""
        from tqdm import tqdm

        from pytest_novelty.generation import Progress

        texts = [self._render(item) for item in items]
        bar = tqdm(total=len(texts) * self.samples, desc=f"judge {self.spec}", unit="reply", disable=not progress)

        def advance(done: Progress) -> None:
            bar.n = done.rows_done
            bar.refresh()

        try:
            return self._sample(texts, samples=self.samples, attempt=attempt, on_batch=advance)
        finally:
            bar.close()


def _plain_rubric(messages: list[Message]) -> str:
    """The rubric for a model without a chat template: system and user text, then ``Evaluation:``."""
    system, user = messages[0]["content"], messages[1]["content"]
    return f"{system}\n\n{user}\n\nEvaluation:"
