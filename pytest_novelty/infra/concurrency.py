"""Asyncio work at bounded concurrency: the one fan-out of the harness, the place a request gives
up while it waits to be retried, and synchronous calls into asyncio code.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, overload

__all__ = ["Held", "StillRunning", "fan_out", "in_thread", "run_coroutine", "wait_aside"]

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

_HELD: contextvars.ContextVar[Held | None] = contextvars.ContextVar("novelty_held_slot", default=None)


class Held:
    """A place among a caller's requests in flight (one acquisition of its semaphore), given up while
    the request waits to be retried: ``async with Held(semaphore):`` around sending it, and a retry
    wait in the same task (:func:`wait_aside`) releases the semaphore meanwhile, so a request told to
    come back in a minute does not keep another from going now.
    """

    def __init__(self, semaphore: asyncio.Semaphore) -> None:
        self.semaphore = semaphore
        self.holding = False
        self._token: contextvars.Token[Held | None] | None = None

    async def __aenter__(self) -> Held:
        await self.semaphore.acquire()
        self.holding = True
        self._token = _HELD.set(self)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._token is not None:
            _HELD.reset(self._token)
        if self.holding:
            self.holding = False
            self.semaphore.release()

    async def wait_aside(self, seconds: float) -> None:
        """Sleep ``seconds`` without the place, then take one again (in line with the others)."""
        if self.holding:
            self.holding = False
            self.semaphore.release()
        await asyncio.sleep(seconds)
        await self.semaphore.acquire()
        self.holding = True


async def wait_aside(seconds: float) -> None:
    """Wait before a retry, giving up the caller's :class:`Held` place meanwhile, if it holds one."""
    held = _HELD.get()
    if held is None:
        await asyncio.sleep(seconds)
    else:
        await held.wait_aside(seconds)


@overload
async def fan_out(count: int, work: Callable[[int], Awaitable[T]], *, concurrency: int | None) -> list[T]: ...


@overload
async def fan_out(
    count: int, work: Callable[[int], Awaitable[T]], *, concurrency: int | None, collect: tuple[type[E], ...]
) -> list[T | E]: ...


async def fan_out(
    count: int,
    work: Callable[[int], Awaitable[T]],
    *,
    concurrency: int | None,
    collect: tuple[type[BaseException], ...] = (),
) -> list[Any]:
    """``[await work(0), ..., await work(count - 1)]``, a fixed pool of ``concurrency`` workers taking
    the indices in order; ``None`` starts every item at once, for work that bounds its own requests
    with :class:`Held` (the judges and concept extractors, whose items send several requests).

    An item that raises one of the ``collect`` types has that exception in its place, and the batch
    goes on. Any other exception stops the batch: no worker starts another item, the items in
    flight are cancelled, and that first error is raised as it is.
    """
    results: list[Any] = [None] * count
    indices = iter(range(count))
    failed: list[BaseException] = []

    async def worker() -> None:
        while not failed:
            i = next(indices, None)
            if i is None:
                return
            try:
                results[i] = await work(i)
            except collect as error:
                results[i] = error
            except BaseException as error:
                failed.append(error)
                raise

    size = count if concurrency is None else min(max(1, concurrency), count)
    workers = [asyncio.ensure_future(worker()) for _ in range(size)]
    try:
        if workers:
            await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        if failed:
            raise failed[0]
        for task in workers:
            task.result()
    finally:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return results


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion, in a helper thread when an event loop is already running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    return in_thread(lambda: asyncio.run(coroutine), name="novelty-http")


class StillRunning(Exception):
    """A call :func:`in_thread` gave up waiting for."""


def in_thread(call: Callable[[], T], *, name: str, timeout: float | None = None) -> T:
    """``call()``'s value or error, from a thread of its own; :class:`StillRunning` when it has not
    returned within ``timeout`` seconds (None: no bound). A thread with a bound is a daemon: one the
    caller stopped waiting for ends by itself and never keeps the process alive."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as error:  # handed to the caller as it is
            box["error"] = error

    thread = threading.Thread(target=target, name=name, daemon=timeout is not None)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise StillRunning(f"{name} did not finish within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
