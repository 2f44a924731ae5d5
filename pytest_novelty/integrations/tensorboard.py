"""``--novelty-log tensorboard:DIR``: the gate's results as TensorBoard event files in DIR.

Written with the ``tensorboard`` package's own event-file writer (``EventFileWriter``, the one
PyTorch's ``SummaryWriter`` wraps) and its summary protos, so neither TensorFlow nor torch is
imported: scalars as ``simple_value`` summaries (what the Trainer's ``report_to="tensorboard"``
writes too, so the gate's curves sit beside the Trainer's), texts through the text plugin's
``text_pb``, and the report's PNG plots as image summaries, their bytes as written. Needs the
``tensorboard`` extra.

What DIR gets, each at the checkpoint's step (every checkpoint of a series at its own):

* scalars ``novelty/<suite>/<metric>`` (every gated metric, quality, originality@n, coverage@n,
  unscored) and, at the gated step, ``novelty/passed``, ``novelty/cases_failed``,
  ``novelty/cases_errored``;
* text ``novelty/<suite>/cases`` (each case's value, bound, outcome and comparison),
  ``novelty/<suite>/copied_spans`` (the longest copied spans) and ``novelty/identity``;
* images ``novelty/<suite>/<plot>`` (the suite's report plots).

Each run adds one event file to DIR, so runs gated one after another (checkpoints of a training
run) draw one curve per scalar.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

from pytest_novelty.integrations.base import TRACKERS, installed, local_folder, require
from pytest_novelty.integrations.run import PREFIX, TrackedRun


@TRACKERS.register("tensorboard", argument="DIR", needs="a log folder", summary="TensorBoard event files")
class TensorBoardTracker:
    """Writes a run's scalars, texts and plots as TensorBoard events into one folder."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.spec = f"tensorboard:{folder}"

    def check(self) -> None:
        installed("tensorboard", "tensorboard", self.spec)
        local_folder(self.spec, self.folder)

    def log(self, run: TrackedRun) -> str:
        require("tensorboard", "tensorboard", self.spec)
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.text.summary_v2 import text_pb  # numpy only, unlike summary.v1
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        folder = local_folder(self.spec, self.folder)
        writer = EventFileWriter(str(folder))

        def emit(step: int, values: list[Any]) -> None:
            summary = summary_pb2.Summary(value=values)
            writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

        def scalars(values: dict[str, float]) -> list[Any]:
            return [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in values.items()]

        try:
            for point in run.points[:-1]:
                emit(point.step, scalars(point.flat()))
            texts = [text_pb(f"{PREFIX}/identity", identity_markdown(run))]
            images = []
            for suite in run.suites:
                texts.append(text_pb(f"{PREFIX}/{suite}/cases", run.cases_markdown(suite)))
                spans = run.spans_markdown(suite)
                if spans:
                    texts.append(text_pb(f"{PREFIX}/{suite}/copied_spans", spans))
                for kind, path in sorted(run.plots.get(suite, {}).items()):
                    images.append(_image(summary_pb2, f"{PREFIX}/{suite}/{kind}", Path(path).read_bytes()))
            gated = scalars({**run.gated.flat(), **run.summary_scalars()})
            emit(run.step, gated + [value for text in texts for value in text.value] + images)
            writer.flush()
        finally:
            writer.close()
        steps = [str(p.step) for p in run.points]
        where = f"step {steps[0]}" if len(steps) == 1 else f"steps {', '.join(steps)}"
        return f"tensorboard: {len(run.gated.flat())} scalars at {where} in {folder}"


def identity_markdown(run: TrackedRun) -> str:
    """The run's identity as a two-column Markdown table."""
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in sorted(run.identity.items()))])


def _image(summary_pb2: Any, tag: str, png: bytes) -> Any:
    """An image summary of a PNG file's bytes as written (its size read from the PNG header)."""
    if png[:8] != b"\x89PNG\r\n\x1a\n" or png[12:16] != b"IHDR":
        raise ValueError(f"{tag}: not a PNG file")
    width, height, _, color = struct.unpack(">IIBB", png[16:26])
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color, 3)  # PNG colour type -> channels
    image = summary_pb2.Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=png)
    return summary_pb2.Summary.Value(tag=tag, image=image)
