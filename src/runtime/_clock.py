"""Time, injectable so that tests are deterministic (ADR 0004).

Durations come only from `monotonic_ns`; `time_ns` (wall clock) is used for
timestamps and never subtracted.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """The two clocks the gate reads."""

    def monotonic_ns(self) -> int:
        """Nanoseconds on a clock that never goes backwards; only differences mean anything."""
        ...

    def time_ns(self) -> int:
        """Nanoseconds since the Unix epoch (wall clock); for timestamps only."""
        ...


class SystemClock:
    """The process's real clocks: `time.monotonic_ns` and `time.time_ns`."""

    __slots__ = ()

    def monotonic_ns(self) -> int:
        """Return `time.monotonic_ns()`."""
        return time.monotonic_ns()

    def time_ns(self) -> int:
        """Return `time.time_ns()`."""
        return time.time_ns()
