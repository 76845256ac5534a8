"""Real time, stopped: test doubles for how the approval queue paces itself (ADR 0016).

The queue reads deadlines from the gate's `Clock` (a `ManualClock` in tests),
but paces its looks at the store, a waiter's own timeout and a resolver's
patience by real time (``time.monotonic_ns`` and ``time.sleep`` of
`runtime._approval_queue`), so that a manual clock never makes a wait hang.
With `StoppedTime` in that module's place, real time moves only when a test
(or a sleep) moves it; with `JumpingLoop`, an async waiter's pause elapses at
once and moves both clocks by its length. A test then states exactly which
pauses a waiter asks for and when the store is looked at, and no test asserts
how long anything took.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from runtime import _approval_queue
from runtime.testing import ManualClock

T = TypeVar("T")

NS_PER_S = 1_000_000_000


class StoppedTime:
    """Stands in for the `time` module of `runtime._approval_queue`.

    ``monotonic_ns`` reads a counter that only `advance` and `sleep` move;
    `sleep` notes how long it was asked for and moves the counter by that much,
    returning at once. A caller that sleeps more than ``max_sleeps`` times is
    stopped with an AssertionError, so that a loop that never ends fails the test.
    """

    def __init__(self, *, now_ns: int = 7 * NS_PER_S, max_sleeps: int = 1_000) -> None:
        self._lock = threading.Lock()
        self._now_ns = now_ns
        self.sleeps: list[float] = []
        self.max_sleeps = max_sleeps

    def monotonic_ns(self) -> int:
        with self._lock:
            return self._now_ns

    def advance(self, ns: int) -> None:
        with self._lock:
            self._now_ns += ns

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.sleeps.append(seconds)
            if len(self.sleeps) > self.max_sleeps:
                raise AssertionError(f"slept more than {self.max_sleeps} times: a loop without end")
            self._now_ns += round(seconds * NS_PER_S)


def stop_real_time(monkeypatch: pytest.MonkeyPatch) -> StoppedTime:
    """Put a `StoppedTime` in place of the queue module's ``time`` (build the gate after this)."""
    stopped = StoppedTime()
    monkeypatch.setattr(_approval_queue, "time", stopped)
    return stopped


class JumpingLoop(asyncio.SelectorEventLoop):
    """An event loop on which a timer fires at once, having moved both clocks by its delay.

    Made for one waiter at a time: every timer set on the loop is a pause that
    waiter asked for, noted in ``pauses`` (the test's own code sets none).
    Every hop to a worker thread (``asyncio.to_thread``) is counted in ``hops``.
    More than ``max_pauses`` pauses stop the waiter with an AssertionError.
    """

    def __init__(self, real: StoppedTime, clock: ManualClock, *, max_pauses: int = 1_000) -> None:
        super().__init__()
        self._real = real
        self._clock = clock
        self._max_pauses = max_pauses
        self.pauses: list[float] = []
        self.hops = 0

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Callable[..., object], *args: Any, context: Any = None
    ) -> asyncio.TimerHandle:
        self.pauses.append(delay)
        if len(self.pauses) > self._max_pauses:
            raise AssertionError(f"paused more than {self._max_pauses} times: a loop without end")
        elapsed = round(delay * NS_PER_S)
        self._real.advance(elapsed)
        self._clock.advance(elapsed)
        return super().call_later(0, callback, *args, context=context)

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        self.hops += 1
        return super().run_in_executor(executor, func, *args)


def run_jumping(
    loop: JumpingLoop, main: Callable[[], Coroutine[Any, Any, T]], *, bound_s: float = 20.0
) -> T:
    """Run ``main()`` to completion on ``loop``, then close the loop.

    A waiter that asks for no timer and is never woken would leave the loop idle
    for good: after ``bound_s`` of real time it is cancelled (the test fails,
    with CancelledError), far beyond what any passing run takes.
    """

    async def bounded() -> T:
        task = asyncio.current_task()
        assert task is not None
        watchdog = threading.Timer(bound_s, loop.call_soon_threadsafe, args=(task.cancel,))
        watchdog.start()
        try:
            return await main()
        finally:
            watchdog.cancel()

    with asyncio.Runner(loop_factory=lambda: loop) as runner:
        return runner.run(bounded())
