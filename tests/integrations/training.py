"""A real (tiny) ``Trainer`` run on the CPU for the callback's tests, and a callback that watches it.

A GPT-2 of 32 dimensions (``tiny_checkpoint``) trains on the tiny corpus with batches of 8;
:func:`make_trainer` builds the Trainer with the callback attached, :class:`StepClock` records
when each step ended (and can act at given steps), :func:`scalars` reads TensorBoard's event
files back with TensorBoard's own reader.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import small_corpus


def dataset(tokenizer: Any, count: int = 96, length: int = 32) -> list[dict[str, Any]]:
    """``count`` tokenised stories of the tiny corpus, padded to ``length``, with their labels."""
    import torch

    rows = []
    for text in small_corpus(count, seed=1):
        ids = tokenizer(text, truncation=True, max_length=length, padding="max_length", return_tensors="pt")
        input_ids = ids["input_ids"][0]
        labels = input_ids.clone()
        labels[ids["attention_mask"][0] == 0] = -100
        rows.append({"input_ids": input_ids, "attention_mask": ids["attention_mask"][0], "labels": labels})
    torch.manual_seed(0)
    return rows


def make_trainer(checkpoint: Path, output: Path, gate: Any, **arguments: Any) -> Any:
    """A Trainer of the tiny model writing to ``output`` with the callback ``gate`` attached;
    ``arguments`` override the ``TrainingArguments`` below."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    settings: dict[str, Any] = dict(
        output_dir=str(output), max_steps=24, save_steps=8, logging_steps=8, per_device_train_batch_size=8,
        learning_rate=5e-3, report_to=[], use_cpu=True, disable_tqdm=True, seed=0, dataloader_num_workers=0,
        save_only_model=True,
    )  # fmt: skip
    settings.update(arguments)
    trainer = Trainer(model=AutoModelForCausalLM.from_pretrained(checkpoint), args=TrainingArguments(**settings),
                      train_dataset=dataset(tokenizer), processing_class=tokenizer)  # fmt: skip
    gate.attach(trainer)
    return trainer


@dataclass
class StepClock:
    """A TrainerCallback (made by :meth:`callback`) that records when each step ended, what the
    gate callback had found by then, and runs ``actions[step]`` at that step (with the Trainer's
    ``control``) and ``at_save[step]`` at its save; ``pause`` sleeps at every step (a step that
    leaves the CPU to the gate)."""

    gate: Any
    actions: dict[int, Callable[[Any], None]] = field(default_factory=dict)
    at_save: dict[int, Callable[[], None]] = field(default_factory=dict)
    """Run at the save of a step, after the gate callback took the save (it runs first)."""
    pause: float = 0.0
    limit: float = 600.0
    """Seconds after which training is stopped, so a test that goes wrong fails instead of hanging."""
    ends: list[tuple[int, float, int]] = field(default_factory=list)
    """(step, time.monotonic(), how many gates had ended) at each step's end."""

    def callback(self) -> Any:
        from transformers import TrainerCallback

        clock = self
        start = time.monotonic()

        class _Clock(TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                if clock.pause:
                    time.sleep(clock.pause)
                clock.ends.append((int(state.global_step), time.monotonic(), len(clock.gate.history)))
                action = clock.actions.get(int(state.global_step))
                if action is not None:
                    action(control)
                if time.monotonic() - start > clock.limit:
                    control.should_training_stop = True
                return control

            def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                action = clock.at_save.get(int(state.global_step))
                if action is not None:
                    action()
                return control

        return _Clock()

    def time_of(self, step: int) -> float:
        return next(t for s, t, _ in self.ends if s == step)


def scalars(output: Path) -> dict[str, dict[int, float]]:
    """Every scalar the Trainer's TensorBoard callback wrote under ``output/runs``: tag → step → value."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, dict[int, float]] = {}
    for logdir in sorted({p.parent for p in (output / "runs").rglob("events.out.tfevents.*")}):
        events = EventAccumulator(str(logdir))
        events.Reload()
        for tag in events.Tags()["scalars"]:
            out.setdefault(tag, {}).update({e.step: e.value for e in events.Scalars(tag)})
    return out
