"""`MemoryCounterStore` on its own: the sweep that bounds its memory, and exact totals.

`test_counter_store.py` holds both stores to the shared promises; this file
pins what only the memory store does: every 1,024th reservation sweeps the
counters whose window has passed (ADR 0032) and never a live one, a refused
ask on a fresh counter leaves nothing behind, and a release is subtracted
exactly once, however the window and the sweep run past it.
"""

from __future__ import annotations

import dataclasses

import pytest

from runtime import MemoryCounterStore, Usage

W = 1_000
SWEEP_EVERY = 1024  # the cadence ADR 0032 documents


def _ask(
    store: MemoryCounterStore,
    counter: str,
    holder: str,
    now: int,
    *,
    amount: int = 1,
    maximum: int = 10,
) -> tuple[int, bool]:
    usage = store.reserve(
        counter, holder, now_ns=now, window_ns=W, amount=amount, maximum=maximum, force=False
    )
    return usage.used, usage.reserved


def _others(store: MemoryCounterStore, count: int, now: int) -> None:
    """``count`` refused asks on fresh counters: they add no counter, but they tick the sweep."""
    for index in range(count):
        assert _ask(store, f"other-{now}-{index}", f"o-{now}-{index}", now, maximum=0) == (0, False)


def test_the_sweep_runs_on_exactly_every_1024th_reservation() -> None:
    store = MemoryCounterStore()
    assert _ask(store, "old", "a", 0) == (0, True)  # its window ends at W
    _others(store, SWEEP_EVERY - 2, W)
    assert set(store._counters) == {"old"}  # 1,023 asks so far: no sweep yet
    _others(store, 1, W)
    assert set(store._counters) == set()  # the 1,024th swept it
    assert _ask(store, "old", "b", W) == (0, True)
    _others(store, SWEEP_EVERY - 2, 2 * W)
    assert set(store._counters) == {"old"}  # the count started again at the sweep
    _others(store, 1, 2 * W)
    assert set(store._counters) == set()


def test_the_sweep_keeps_counters_still_in_their_window() -> None:
    store = MemoryCounterStore()
    assert _ask(store, "live", "a", 0, amount=4) == (0, True)
    _others(store, SWEEP_EVERY, W - 1)  # swept at W - 1: the entry still counts
    assert set(store._counters) == {"live"}
    assert _ask(store, "live", "b", W - 1, amount=6) == (4, True)
    assert _ask(store, "live", "c", W - 1, amount=1) == (10, False)


def test_a_refused_ask_on_a_fresh_counter_leaves_no_counter() -> None:
    store = MemoryCounterStore()
    assert _ask(store, "c", "a", 0, amount=5, maximum=4) == (0, False)
    assert store._counters == {}
    assert _ask(store, "c", "b", 0, amount=4, maximum=4) == (0, True)
    assert _ask(store, "c", "x", 1, amount=1, maximum=4) == (4, False)
    assert set(store._counters) == {"c"}  # a refusal beside live entries keeps them


def test_a_release_is_subtracted_once_then_the_window_passes_it_by() -> None:
    store = MemoryCounterStore()
    assert _ask(store, "c", "a", 0, amount=5) == (0, True)
    assert _ask(store, "c", "b", 10, amount=3) == (5, True)
    store.settle("a", consumed=False)
    assert _ask(store, "c", "x", 20, amount=0) == (3, True)
    # a leaves the window (at W) after its release: nothing more is subtracted.
    assert _ask(store, "c", "y", W, amount=0) == (3, True)
    assert _ask(store, "c", "z", W + 10, amount=0) == (0, True)  # b left too


def test_a_release_after_its_counter_was_swept_is_a_no_op() -> None:
    store = MemoryCounterStore()
    assert _ask(store, "c", "held", 0, amount=5) == (0, True)
    _others(store, SWEEP_EVERY, W)  # c's entry left its window; the sweep dropped c
    assert "c" not in store._counters
    store.settle("held", consumed=False)
    assert _ask(store, "c", "next", W + 1, amount=10) == (0, True)


def test_a_spent_holder_is_forgotten_and_its_entries_keep_counting() -> None:
    store = MemoryCounterStore()
    assert _ask(store, "c", "a", 0, amount=5) == (0, True)
    store.settle("a", consumed=True)
    assert store._holders == {}
    store.settle("a", consumed=False)  # settling is final: nothing to release any more
    assert _ask(store, "c", "b", 1, amount=6) == (5, False)


def test_usage_is_frozen() -> None:
    usage = Usage(3, reserved=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        usage.used = 4  # type: ignore[misc]
