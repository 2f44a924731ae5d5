"""``reward:PATH``: a local sequence-classification reward model, mapped to NoveltyBench's 1-10 scale.

The raw reward of an answer is the first logit the model gives the conversation (the prompt as
the user turn, the response as the assistant's; ``User: ...`` / ``Assistant: ...`` text without a
chat template), mapped to 1-10 by :func:`~.reward_scale.reward_to_utility`. The default thresholds
are NoveltyBench's, calibrated for Skywork-Reward-Gemma-2-27B-v0.2; another reward model needs its
own nine (the ``thresholds`` option). A reward model is deterministic, so ``samples`` is ignored.
Raw rewards are cached, so changing the thresholds costs no recomputation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.infra.errors import ConfigError, HarnessError
from pytest_novelty.infra.hashing import identity_memo
from pytest_novelty.scoring.judges.base import JUDGES, JudgeItem, JudgeResult
from pytest_novelty.scoring.judges.cache import AnswerCache, judge_key
from pytest_novelty.scoring.judges.reward_scale import NOVELTYBENCH_REWARD_THRESHOLDS, reward_to_utility
from pytest_novelty.scoring.llm import checked_identity_id

DEFAULT_THRESHOLDS = NOVELTYBENCH_REWARD_THRESHOLDS
SCALE_MAX = 10
_FORMAT_VERSION = "reward/1"


def check_thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    """Validate user thresholds: nine ascending numbers, so that scores span 1-10."""
    try:
        values = tuple(float(t) for t in thresholds)
    except (TypeError, ValueError):
        raise ConfigError("thresholds must be numbers", field="thresholds") from None
    if len(values) != SCALE_MAX - 1 or list(values) != sorted(values):
        raise ConfigError(
            f"thresholds must be {SCALE_MAX - 1} ascending numbers (one per step of the 1-{SCALE_MAX} "
            f"scale), got {list(values)}", field="thresholds",
        )
    return values


@JUDGES.register(
    "reward",
    argument="PATH",
    options={"thresholds": None, "batch_size": int, "max_length": int, "device": str, "trust_remote_code": bool},
    summary="a local reward model mapped to the 1-10 scale",
)
class RewardJudge:
    """Scores items with a local reward model."""

    def __init__(
        self, path: str, *, thresholds: Sequence[float] = DEFAULT_THRESHOLDS, cache_dir: Path | str | None = None,
        batch_size: int = 8, max_length: int | None = None, device: str = "auto", trust_remote_code: bool = False,
    ) -> None:
        memo = None if cache_dir is None else identity_memo(Path(cache_dir))  # unchanged weights hashed once
        self.identity_id = checked_identity_id(
            f"reward:{path}", path, trust_remote_code=trust_remote_code, field="--judge", memo=memo
        )
        self.path = path
        self.spec = f"reward:{path}"
        self.description = f"reward model {path} (1-{SCALE_MAX} by thresholds)"
        self.thresholds = check_thresholds(thresholds)
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.trust_remote_code = trust_remote_code
        self.cache = AnswerCache(cache_dir)
        self._model: Any = None
        self._tokenizer: Any = None

    def __repr__(self) -> str:
        return f"RewardJudge(spec={self.spec!r})"

    def score(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[JudgeResult]:
        """One 1-10 score per item from its raw reward (quality = score / 10)."""
        scales = [reward_to_utility(reward, self.thresholds) for reward in self.rewards(items, progress=progress)]
        return [JudgeResult(quality=scale / SCALE_MAX, scores=(float(scale),), judge=self.spec) for scale in scales]

    def planned_calls(self, items: Sequence[JudgeItem]) -> int:
        """Dry run: how many items the model would have to score (the rest are cached)."""
        keys = [self._key(item) for item in items]
        return len(set(keys) - set(self.cache.get_many(keys)))

    def rewards(self, items: Sequence[JudgeItem], *, progress: bool = False) -> list[float]:
        """The raw reward of each item (first logit), from the cache or the model."""
        keys = [self._key(item) for item in items]
        known = {key: float(value["reward"]) for key, value in self.cache.get_many(keys).items()}
        todo = sorted(
            {key: i for i, key in enumerate(keys) if key not in known}.items(),
            key=lambda pair: len(items[pair[1]].prompt) + len(items[pair[1]].response),
        )
        if todo:
            from tqdm import tqdm

            self._load()
            bar = tqdm(total=len(todo), disable=not progress, desc=f"judge {self.spec}", unit="item")
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start : start + self.batch_size]
                values = self._forward([items[i] for _, i in batch])
                for (key, _), value in zip(batch, values, strict=True):
                    known[key] = float(self.cache.put(key, {"reward": value})["reward"])
                bar.update(len(batch))
            bar.close()
        return [known[key] for key in keys]

    def _key(self, item: JudgeItem) -> str:
        # The thresholds map rewards to scores afterwards, so they are not part of the key.
        return judge_key(kind="reward", model=f"{self.path}@{self.identity_id}", rubric=_FORMAT_VERSION,
                         sampling={"max_length": self.max_length}, prompt=item.prompt, response=item.response)

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from pytest_novelty.generation.devices import resolve_device

        self.device = resolve_device(self.device)
        dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.path, trust_remote_code=self.trust_remote_code)
            model = AutoModelForSequenceClassification.from_pretrained(
                self.path, dtype=dtype, trust_remote_code=self.trust_remote_code
            )
        except (OSError, ValueError) as exc:
            raise HarnessError(f"cannot load the reward model {self.path}: {exc}") from None
        tokenizer.padding_side = "right"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        if model.config.pad_token_id is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        self._tokenizer = tokenizer
        self._model = model.to(self.device).eval()

    def _format(self, item: JudgeItem) -> tuple[str, bool]:
        """The conversation as text, and whether the chat template (which adds special tokens) made it."""
        if getattr(self._tokenizer, "chat_template", None):
            conversation = [{"role": "user", "content": item.prompt}, {"role": "assistant", "content": item.response}]
            return str(self._tokenizer.apply_chat_template(conversation, tokenize=False)), True
        return f"User: {item.prompt}\n\nAssistant: {item.response}", False

    def _forward(self, items: Sequence[JudgeItem]) -> list[float]:
        import torch

        formatted = [self._format(item) for item in items]
        templated = formatted[0][1]
        limit = self.max_length or getattr(self._tokenizer, "model_max_length", None)
        if not isinstance(limit, int) or limit > 1_000_000:
            limit = None
        encoded = self._tokenizer(
            [text for text, _ in formatted], return_tensors="pt", padding=True, truncation=limit is not None,
            max_length=limit, add_special_tokens=not templated,
        )
        encoded = {name: tensor.to(self.device) for name, tensor in encoded.items()}
        with torch.inference_mode():
            logits = self._model(**encoded).logits
        return [float(value) for value in logits[:, 0].float().cpu()]
