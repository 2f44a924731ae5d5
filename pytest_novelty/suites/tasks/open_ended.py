"""Open-ended requests (NoveltyBench): prompts that admit many good answers, sampled k times."""

from __future__ import annotations

from pytest_novelty.suites.tasks.base import CompletionTask


class OpenTask(CompletionTask):
    """``Question: TEXT`` / ``Answer:``; the answer ends at a blank line."""

    name = "open"
    description = "answer an open-ended request that has many good answers"
    concepts = "the main ideas and choices"
    input_label = "Question:"
    answer_label = "Answer:"
