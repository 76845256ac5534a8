"""`CounterStore`: where budgets and rates are counted, and `MemoryCounterStore` (ADR 0032).

A store keeps *entries*: one per action that may run against a counter, with
its wall-clock stamp, its amount (1 for a count, micro-units for a sum) and
its holder (the decision's id). What every store promises:

1. **Check and reserve are one step.** `CounterStore.reserve` prunes the
   counter's entries that left the window, adds up the rest, and — when the
   new amount fits under the maximum, or ``force`` says the action may run
   over it (an ``approval`` rule, where a human decides) — adds the entry,
   all atomically: two threads or two processes can never both see room for
   the last unit.
2. **Sliding window, half-open.** An entry stamped ``t`` counts for every
   ``now`` with ``now - window_ns < t``: it stops counting at exactly
   ``t + window_ns``. So no interval ``(a, a + window]`` ever holds more than
   the maximum of admitted entries. An entry stamped in the future (the wall
   clock stepped back) keeps counting: the store errs towards denying.
3. **Held until settled.** A new entry is *held*: it counts at once. The gate
   settles it when the action's fate is known: `CounterStore.settle` with
   ``consumed=True`` marks it *spent* (it keeps counting until it leaves the
   window), ``consumed=False`` removes it (a denied, rejected or expired
   action spends nothing). An entry never settled (the process died) still
   leaves with its window: a crash can over-count for one window, never
   under-count.
4. **Keys are hashes.** The gate hands a store a counter's SHA-256 (of the
   policy id, the rule id and the key's values), never the key's text.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

__all__ = ["CounterStore", "MemoryCounterStore", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """What a counter held when an action asked for room, and whether it got it.

    Attributes:
        used: the total of the counter's entries in the window, before this one.
        reserved: whether this action's entry was added (it fit, or was forced).
    """

    used: int
    reserved: bool


@runtime_checkable
class CounterStore(Protocol):
    """Where a gate counts its limited rules (`MemoryCounterStore`, `SqliteCounterStore`)."""

    def reserve(
        self,
        counter: str,
        holder: str,
        *,
        now_ns: int,
        window_ns: int,
        amount: int,
        maximum: int,
        force: bool,
    ) -> Usage:
        """Atomically: prune, add up, and add a held entry if it fits (or ``force``).

        Args:
            counter: the counter's id (a SHA-256 hex).
            holder: the entry's holder (the decision id); one entry per counter and holder.
            now_ns: the wall-clock time of the check; the entry's stamp.
            window_ns: the window's length.
            amount: what the action adds (1, or micro-units).
            maximum: the most the window may hold.
            force: add the entry even when it does not fit.

        Raises:
            CounterStoreError: the store cannot be read or written.
        """
        ...  # pragma: no cover - protocol

    def settle(self, holder: str, *, consumed: bool) -> None:
        """Mark the holder's held entries spent (``consumed``) or remove them.

        Settling is final: a holder already settled, or unknown, is a no-op.

        Raises:
            CounterStoreError: the store cannot be written.
        """
        ...  # pragma: no cover - protocol


class _Entry:
    # Held and spent entries count alike; a released one is zeroed (`settle`).
    __slots__ = ("amount", "stamp_ns")

    def __init__(self, stamp_ns: int, amount: int) -> None:
        self.stamp_ns = stamp_ns
        self.amount = amount


class _Counter:
    __slots__ = ("entries", "total", "window_ns")

    def __init__(self, window_ns: int) -> None:
        self.entries: deque[_Entry] = deque()
        self.total = 0
        self.window_ns = window_ns

    def prune(self, cutoff: int) -> None:
        entries = self.entries
        while entries and entries[0].stamp_ns <= cutoff:
            gone = entries.popleft()
            self.total -= gone.amount
            gone.amount = 0  # a later release of it subtracts nothing


# Every so many reservations, counters whose entries all left their window are
# dropped, so that memory follows the live keys, not every key ever seen.
_SWEEP_EVERY: Final = 1024


class MemoryCounterStore:
    """A `CounterStore` in this process's memory: the gate's default. Thread-safe.

    Its counts end with the process; `SqliteCounterStore` keeps them across
    restarts and shares them between processes. Each counter keeps its
    entries in stamp order with a running total, so a check costs O(1)
    amortised however many entries the window holds.
    """

    __slots__ = ("_counters", "_holders", "_lock", "_until_sweep")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, _Counter] = {}
        self._holders: dict[str, list[tuple[str, _Entry]]] = {}
        self._until_sweep = _SWEEP_EVERY

    def reserve(
        self,
        counter: str,
        holder: str,
        *,
        now_ns: int,
        window_ns: int,
        amount: int,
        maximum: int,
        force: bool,
    ) -> Usage:
        """See `CounterStore.reserve`."""
        cutoff = now_ns - window_ns
        with self._lock:
            self._until_sweep -= 1
            if self._until_sweep <= 0:
                self._sweep(now_ns)
            state = self._counters.get(counter)
            if state is None:
                state = self._counters[counter] = _Counter(window_ns)
            state.window_ns = window_ns
            # Entries arrive in stamp order unless the wall clock stepped back; one
            # stamped later than its successors stays (and counts) until it reaches
            # the front: an over-count, never an under-count.
            state.prune(cutoff)
            used = state.total
            if used + amount > maximum and not force:
                if not state.entries:
                    del self._counters[counter]
                return Usage(used, reserved=False)
            entry = _Entry(now_ns, amount)
            state.entries.append(entry)
            state.total += amount
            self._holders.setdefault(holder, []).append((counter, entry))
            return Usage(used, reserved=True)

    def settle(self, holder: str, *, consumed: bool) -> None:
        """See `CounterStore.settle`."""
        with self._lock:
            held = self._holders.pop(holder, ())
            if consumed:
                return  # spent: the entries count until they leave their window
            for counter, entry in held:
                # An entry still in its window stops counting (one that left it, or
                # was swept with its counter, is already zero: nothing is subtracted).
                state = self._counters.get(counter)
                if state is not None:
                    state.total -= entry.amount
                    entry.amount = 0  # leaves the deque with the window

    def _sweep(self, now_ns: int) -> None:
        self._until_sweep = _SWEEP_EVERY
        for counter, state in list(self._counters.items()):
            state.prune(now_ns - state.window_ns)
            if not state.entries:
                del self._counters[counter]
