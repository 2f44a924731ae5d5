"""The run's one message channel (:func:`notice`) and progress bars for the long steps.

Layers say what a person should know while a run goes with :func:`notice`; the front end chooses
where the lines go (:func:`send_notices_to`): stderr by default, pytest's terminal past its capture
under the plugin, the controller's terminal for an xdist worker. Bars (:class:`ProgressSink`) are
tqdm bars that vanish when their step ends, drawn only on a terminal, so CI logs and xdist workers
keep just the per-step lines.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol


def to_stderr(line: str) -> None:
    """Write one line to stderr at once: the channel outside pytest."""
    print(line, file=sys.stderr, flush=True)


_notices: Callable[[str], None] = to_stderr


def notice(line: str) -> None:
    """A one-line notice from inside a layer, to the channel the front end chose."""
    _notices(line)


def send_notices_to(channel: Callable[[str], None]) -> Callable[[str], None]:
    """Make ``channel`` the one :func:`notice` writes to; returns the one it replaces."""
    global _notices
    previous, _notices = _notices, channel
    return previous


@contextlib.contextmanager
def notices_to(channel: Callable[[str], None]) -> Iterator[Callable[[str], None]]:
    """Within the block, :func:`notice` writes to ``channel``; the one before is restored after it."""
    previous = send_notices_to(channel)
    try:
        yield channel
    finally:
        send_notices_to(previous)


class TextStream(Protocol):
    """What a bar writes to: a text stream (``sys.stderr``, or pytest's terminal past its capture)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


@dataclass(frozen=True)
class ProgressSink:
    """Where progress bars are written; ``enabled=None`` means: only when ``stream`` is a terminal."""

    stream: TextStream | None = None
    enabled: bool | None = None

    def bar(self, total: int, desc: str, unit: str = "it") -> Any:
        """A tqdm bar (a disabled one, which costs nothing, when the sink is off)."""
        from tqdm import tqdm

        stream = self.stream if self.stream is not None else sys.stderr
        on = self.enabled if self.enabled is not None else _is_terminal(stream)
        return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=not on, leave=False, dynamic_ncols=True)


def _is_terminal(stream: TextStream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


QUIET = ProgressSink(enabled=False)
