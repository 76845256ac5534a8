"""Test doubles for code that embeds ghost: a clock you move by hand.

An in-memory audit sink lives in `audit` (`audit.MemoryAuditSink`).
"""

from __future__ import annotations

import threading

__all__ = ["ManualClock"]


class ManualClock:
    """A `runtime.Clock` that only moves when told to.

    Both clocks start where given; `advance` moves both by the same amount, so
    a test can state exactly how long a stage took.

    Args:
        monotonic_ns: the initial monotonic reading.
        time_ns: the initial wall-clock reading (default: 2026-01-01T00:00:00Z).
        step_ns: added to the monotonic clock after every `monotonic_ns` read,
            so that successive reads differ (default 0: reads repeat).
    """

    def __init__(
        self,
        *,
        monotonic_ns: int = 1_000_000_000,
        time_ns: int = 1_767_225_600_000_000_000,
        step_ns: int = 0,
    ) -> None:
        if step_ns < 0:
            raise ValueError(f"step_ns must not be negative, got {step_ns}")
        self._monotonic_ns = monotonic_ns
        self._time_ns = time_ns
        self._step_ns = step_ns
        self._lock = threading.Lock()

    def monotonic_ns(self) -> int:
        """Return the current monotonic reading, then step it by ``step_ns``."""
        with self._lock:
            now = self._monotonic_ns
            self._monotonic_ns += self._step_ns
            return now

    def time_ns(self) -> int:
        """Return the current wall-clock reading."""
        with self._lock:
            return self._time_ns

    def advance(self, ns: int) -> None:
        """Move both clocks forward by ``ns`` nanoseconds.

        Raises:
            ValueError: ``ns`` is negative (a monotonic clock never goes back).
        """
        if ns < 0:
            raise ValueError(f"a monotonic clock cannot go back: advance({ns})")
        with self._lock:
            self._monotonic_ns += ns
            self._time_ns += ns
