"""Complexity checks without absolute times: compare two input sizes in one run.

``assert_linear(run, make, n)`` measures the CPU time of the calling thread for
``run(make(n))`` and ``run(make(10 * n))`` (not wall time: on a shared machine a
longer run is preempted more often, which would be measured as work), keeps
the least of several runs of each, and requires the larger to cost at most
``bound`` times the smaller. A linear algorithm lands near 10; a quadratic one near 100, a cubic
one near 1000, so the check separates them with a wide margin. A noisy
measurement is retried; a super-linear algorithm fails every attempt.

The default bound is 25, not 12: under a loaded machine's cache pressure a
linear pass over a 250 KB input measured 12-16 times the cost of one over
25 KB in every attempt (CPU time grows with cache misses, not only with
work). 25 is still a quarter of what a quadratic algorithm costs.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["assert_linear"]


def _fastest_ns(run: Callable[[T], object], value: T, repeat: int) -> int:
    best = None
    # The cyclic collector's pauses grow with everything the test session keeps
    # alive, not with the input: they would be measured instead of the algorithm.
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.thread_time_ns()
            run(value)
            elapsed = time.thread_time_ns() - start
            best = elapsed if best is None else min(best, elapsed)
    finally:
        gc.enable()
    assert best is not None
    return max(best, 1)


def assert_linear(
    run: Callable[[T], object],
    make: Callable[[int], T],
    n: int,
    *,
    factor: int = 10,
    bound: float = 25.0,
    repeat: int = 5,
    attempts: int = 8,
) -> None:
    """Assert that ``factor`` times the input costs at most ``bound`` times the work."""
    small, large = make(n), make(factor * n)
    ratios = []
    for _ in range(attempts):
        ratio = _fastest_ns(run, large, repeat) / _fastest_ns(run, small, repeat)
        if ratio <= bound:
            return
        ratios.append(round(ratio, 1))
    raise AssertionError(f"x{factor} input cost {ratios} times the work (bound x{bound})")
