"""Latency statistics of a decision trace: count, min, nearest-rank percentiles, max.

Every statistic is an integer number of nanoseconds taken from the values
themselves, never interpolated: the p-th percentile is the nearest rank, the
smallest value such that at least p % of the values are at or below it --
``sorted(values)[ceil(p * n / 100) - 1]``. So a percentile is always a latency
that some decision really had, and a report built twice from one run is equal
bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LatencyStats",
    "StatsByKey",
    "limit_denials",
    "limit_denied_rule",
    "nearest_rank",
    "percentile_rank",
    "stats_by_key",
]

# The suffix the gate gives a reason when the deciding rule was a limited one (ADR 0032).
_OVER_LIMIT = " (over its limit)"


def percentile_rank(count: int, percent: int) -> int:
    """The 1-based rank of the ``percent``-th percentile of ``count`` values, by nearest rank.

    Raises:
        ValueError: ``count`` is below 1 or ``percent`` is not in 1..100.
    """
    if count < 1:
        raise ValueError("a percentile of no values")
    if not 1 <= percent <= 100:
        raise ValueError(f"a percentile is from 1 to 100, not {percent}")
    return -(-percent * count // 100)  # ceil without floats: exact for any n


def nearest_rank(ordered: list[int], percent: int) -> int:
    """The ``percent``-th percentile of ``ordered`` (sorted, not empty), by nearest rank.

    Raises:
        ValueError: ``ordered`` is empty or ``percent`` is not in 1..100.
    """
    return ordered[percentile_rank(len(ordered), percent) - 1]


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """The spread of some durations, in integer nanoseconds.

    Attributes:
        count: how many values (at least 1).
        min_ns, max_ns: the smallest and the largest.
        p50_ns, p90_ns, p99_ns: nearest-rank percentiles (`nearest_rank`).

    Raises:
        ValueError: a field is not an integer, ``count`` is below 1, or the
            values are out of order (min <= p50 <= p90 <= p99 <= max).
    """

    count: int
    min_ns: int
    p50_ns: int
    p90_ns: int
    p99_ns: int
    max_ns: int

    def __post_init__(self) -> None:
        values = (self.count, self.min_ns, self.p50_ns, self.p90_ns, self.p99_ns, self.max_ns)
        if any(type(value) is not int for value in values):
            raise ValueError("latency statistics are integers")
        if self.count < 1:
            raise ValueError("latency statistics need at least one value")
        if not self.min_ns <= self.p50_ns <= self.p90_ns <= self.p99_ns <= self.max_ns:
            raise ValueError("latency statistics must be in order: min <= p50 <= p90 <= p99 <= max")

    @classmethod
    def of(cls, values: Iterable[int]) -> LatencyStats | None:
        """The statistics of ``values``; None when there are none."""
        ordered = sorted(values)
        if not ordered:
            return None
        return cls(
            count=len(ordered),
            min_ns=ordered[0],
            p50_ns=nearest_rank(ordered, 50),
            p90_ns=nearest_rank(ordered, 90),
            p99_ns=nearest_rank(ordered, 99),
            max_ns=ordered[-1],
        )


class StatsByKey(Mapping[str, LatencyStats]):
    """An immutable, hashable mapping of names to `LatencyStats`, iterated in key order.

    Equal to any mapping with the same items (a plain ``dict`` included).
    """

    __slots__ = ("_items", "_lookup")

    _items: tuple[tuple[str, LatencyStats], ...]
    _lookup: dict[str, LatencyStats]

    def __init__(self, stats: Mapping[str, LatencyStats] | None = None) -> None:
        self._items = tuple(sorted((stats or {}).items()))
        self._lookup = dict(self._items)

    def __getitem__(self, key: str) -> LatencyStats:
        return self._lookup[key]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StatsByKey):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._lookup == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"StatsByKey({self._lookup!r})"


def stats_by_key(pairs: Iterable[tuple[str, int]]) -> StatsByKey:
    """The statistics of the values under each key, as a read-only mapping in key order."""
    grouped: dict[str, list[int]] = {}
    for key, value in pairs:
        grouped.setdefault(key, []).append(value)
    stats: dict[str, LatencyStats] = {}
    for key in sorted(grouped):
        found = LatencyStats.of(grouped[key])
        assert found is not None  # every group holds a value
        stats[key] = found
    return StatsByKey(stats)


def limit_denials(records: Iterable[Any]) -> dict[str, int]:
    """How many decisions each limited rule denied over its limit, by rule id, sorted.

    Args:
        records: the decision trace's records (`DecisionTraceRecord`).
    """
    counts: dict[str, int] = {}
    for record in records:
        rule = limit_denied_rule(record)
        if rule is not None:
            counts[rule] = counts.get(rule, 0) + 1
    return dict(sorted(counts.items()))


def limit_denied_rule(record: Any) -> str | None:
    """The limited rule that denied ``record`` over its limit, or None (see `limit_denials`)."""
    rule: str | None = record.matched_policy
    if (
        record.decision_kind == "deny"
        and rule is not None
        and record.decision_reason.endswith(_OVER_LIMIT)
    ):
        return rule
    return None
