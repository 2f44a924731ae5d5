"""``--novelty-log tensorboard:DIR``: the gate's results as TensorBoard event files in DIR.

Written with PyTorch's ``SummaryWriter`` (``torch.utils.tensorboard``), which encodes through the
``tensorboard`` package's own event-file writer and summary protos; it is the writer the Hugging
Face Trainer's ``report_to="tensorboard"`` uses, so the gate's curves sit beside the Trainer's.
Needs the ``tensorboard`` extra.

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

from pathlib import Path

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
        from torch.utils.tensorboard import SummaryWriter

        folder = local_folder(self.spec, self.folder)
        writer = SummaryWriter(log_dir=str(folder))
        try:
            for point in run.points:
                for tag, value in point.flat().items():
                    writer.add_scalar(tag, value, point.step)
            step = run.step
            for tag, value in run.summary_scalars().items():
                writer.add_scalar(tag, value, step)
            writer.add_text(f"{PREFIX}/identity", identity_markdown(run), step)
            for suite in run.suites:
                writer.add_text(f"{PREFIX}/{suite}/cases", run.cases_markdown(suite), step)
                spans = run.spans_markdown(suite)
                if spans:
                    writer.add_text(f"{PREFIX}/{suite}/copied_spans", spans, step)
                for kind, path in sorted(run.plots.get(suite, {}).items()):
                    writer.add_image(f"{PREFIX}/{suite}/{kind}", _pixels(path), step, dataformats="HWC")
            writer.flush()
        finally:
            writer.close()
        count = len(run.gated.flat())
        steps = ", ".join(str(p.step) for p in run.points)
        return f"tensorboard: {count} scalars at step {steps} in {folder}"


def identity_markdown(run: TrackedRun) -> str:
    """The run's identity as a two-column Markdown table."""
    return "\n".join(["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in sorted(run.identity.items()))])


def _pixels(path: Path) -> object:
    """A PNG as an RGB array of bytes, height × width × 3 (what ``add_image`` takes as HWC)."""
    import numpy as np
    from matplotlib.image import imread

    image = imread(path)  # PNG: floats in [0, 1], RGB or RGBA
    rgb = image[..., :3] if image.ndim == 3 else np.stack([image] * 3, axis=-1)
    return (np.clip(rgb, 0.0, 1.0) * 255).round().astype(np.uint8)
