"""`CountingStore`: a real `MemoryCounterStore` that remembers what it was asked."""

from __future__ import annotations

from typing import Any

from runtime import MemoryCounterStore, Usage


class CountingStore:
    """A `CounterStore` that delegates to a `MemoryCounterStore` and records each call.

    Attributes:
        inner: the store that does the counting.
        asked: per ``reserve``, in order, its holder and its ``force`` flag.
        settled: per ``settle``, in order, its holder and ``consumed``.
    """

    def __init__(self) -> None:
        self.inner = MemoryCounterStore()
        self.asked: list[tuple[str, bool]] = []
        self.settled: list[tuple[str, bool]] = []

    @property
    def forced(self) -> list[bool]:
        """The ``force`` flag of each ``reserve``, in order."""
        return [force for _, force in self.asked]

    @property
    def holders(self) -> list[str]:
        """The holder of each ``reserve``, in order."""
        return [holder for holder, _ in self.asked]

    def reserve(self, counter: str, holder: str, **terms: Any) -> Usage:
        self.asked.append((holder, bool(terms["force"])))
        return self.inner.reserve(counter, holder, **terms)

    def settle(self, holder: str, *, consumed: bool) -> None:
        self.settled.append((holder, consumed))
        self.inner.settle(holder, consumed=consumed)
