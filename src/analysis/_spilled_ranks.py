"""`SpilledRanks`: exact nearest-rank statistics of integers in groups, in bounded memory.

The decision trace's latency statistics are exact (`analysis._trace_stats`):
the p-th percentile is the value at rank ``ceil(p * n / 100)`` of the sorted
values, so every value must be kept until the end -- a million latencies in
a run of a million decisions, more for a crafted file. `SpilledRanks` keeps
values in lists while they number fewer than ``memory_values``; then it moves
them all, and every later one, to a private temporary SQLite database
(deleted when closed), and at the end indexes them and reads each wanted rank
with ``ORDER BY ... LIMIT 1 OFFSET rank - 1`` (from whichever end is nearer):
a walk along the index inside SQLite, holding at most its page cache.

The values are any Python integers, as JSON gives them. SQLite's integers
are 64-bit, so a value is stored as a class and a datum that sort together
as the integers do: class 0 and the integer itself inside the signed 64-bit
range; beyond it, class 1 and a BLOB of the magnitude's length (4 bytes) and
its big-endian bytes, which ``memcmp`` orders as the numbers; below it, class
-1 and the same with every byte complemented, so that a larger magnitude
sorts first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Hashable, Iterator
from typing import Final, Generic, TypeVar

from analysis._trace_stats import LatencyStats, percentile_rank

__all__ = ["SpilledRanks"]

G = TypeVar("G", bound=Hashable)

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_LENGTH_LIMIT: Final = 2**32 - 1
_COMPLEMENT: Final = bytes(range(255, -1, -1))
_CACHE_KIB: Final = 4096  # SQLite's page cache (and sorter): 4 MiB
_BATCH: Final = 8192
_PERCENTS: Final = (50, 90, 99)
_FROM_LOWEST: Final = (
    "SELECT class, datum FROM ranked WHERE grp = ? ORDER BY class, datum LIMIT 1 OFFSET ?"
)
_FROM_HIGHEST: Final = (
    "SELECT class, datum FROM ranked WHERE grp = ? ORDER BY class DESC, datum DESC LIMIT 1 OFFSET ?"
)

_Row = tuple[int, int, int | bytes]


class SpilledRanks(Generic[G]):
    """Integers in groups, and each group's count, min, max and nearest-rank percentiles.

    Args:
        memory_values: how many values stay in memory before all of them move
            to disk.

    Add every value, then ask for `stats`; `close` drops the database.
    """

    __slots__ = (
        "_batch",
        "_counts",
        "_db",
        "_held",
        "_held_count",
        "_ids",
        "_indexed",
        "_memory_values",
    )

    def __init__(self, *, memory_values: int = 1 << 17) -> None:
        if memory_values < 1:
            raise ValueError("memory_values must be positive")
        self._memory_values = memory_values
        self._held: dict[G, list[int]] = {}
        self._held_count = 0
        self._counts: dict[G, int] = {}
        self._ids: dict[G, int] = {}
        self._db: sqlite3.Connection | None = None
        self._batch: list[_Row] = []
        self._indexed = False

    @property
    def spilled(self) -> bool:
        """Whether the values have moved to disk."""
        return self._db is not None

    def groups(self) -> Iterator[G]:
        """The groups that hold a value, in the order of their first."""
        return iter(self._counts)

    def add(self, group: G, value: int) -> None:
        """Add ``value`` to ``group``."""
        counts = self._counts
        counts[group] = counts.get(group, 0) + 1
        if self._db is None:
            self._held.setdefault(group, []).append(value)
            self._held_count += 1
            if self._held_count >= self._memory_values:
                self._spill()
            return
        batch = self._batch
        batch.append(_row(self._id(group), value))
        if len(batch) >= _BATCH:
            self._flush()

    def stats(self, group: G) -> LatencyStats | None:
        """The statistics of ``group``'s values (`LatencyStats`); None when it has none."""
        count = self._counts.get(group, 0)
        if not count:
            return None
        if self._db is None:
            return LatencyStats.of(self._held[group])
        self._flush()
        if not self._indexed:
            self._db.execute("CREATE INDEX ordered ON ranked (grp, class, datum)")
            self._indexed = True
        group_id = self._ids[group]
        at = self._value_at
        p50, p90, p99 = (at(group_id, percentile_rank(count, p), count) for p in _PERCENTS)
        return LatencyStats(
            count=count,
            min_ns=at(group_id, 1, count),
            p50_ns=p50,
            p90_ns=p90,
            p99_ns=p99,
            max_ns=at(group_id, count, count),
        )

    def close(self) -> None:
        """Drop every value, and the database."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self._held.clear()
        self._held_count = 0
        self._counts.clear()
        self._batch.clear()

    # -- disk ----------------------------------------------------------------------------

    def _spill(self) -> None:
        # "": a private temporary database on disk, deleted when the connection closes.
        db = sqlite3.connect("", isolation_level=None)
        db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("CREATE TABLE ranked (grp INTEGER, class INTEGER, datum)")
        self._db = db
        for group, values in self._held.items():
            group_id = self._id(group)
            self._batch.extend(_row(group_id, value) for value in values)
            self._flush()
        self._held.clear()
        self._held_count = 0

    def _id(self, group: G) -> int:
        found = self._ids.get(group)
        if found is None:
            found = self._ids[group] = len(self._ids)
        return found

    def _flush(self) -> None:
        if self._batch and self._db is not None:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO ranked VALUES (?, ?, ?)", self._batch)
            self._db.execute("COMMIT")
            self._batch.clear()

    def _value_at(self, group_id: int, rank: int, count: int) -> int:
        assert self._db is not None
        # Walk the index from whichever end is nearer the rank.
        if rank - 1 <= count - rank:
            query, offset = _FROM_LOWEST, rank - 1
        else:
            query, offset = _FROM_HIGHEST, count - rank
        row = self._db.execute(query, (group_id, offset)).fetchone()
        assert row is not None  # the group holds `count` values
        return _value(row[0], row[1])


def _row(group_id: int, value: int) -> _Row:
    if _INT64_MIN <= value <= _INT64_MAX:
        return group_id, 0, value
    magnitude = abs(value)
    size = (magnitude.bit_length() + 7) // 8
    if size > _LENGTH_LIMIT:  # pragma: no cover - more digits than any JSON parser reads
        raise ValueError("an integer too large to rank")
    data = size.to_bytes(4, "big") + magnitude.to_bytes(size, "big")
    if value > 0:
        return group_id, 1, data
    return group_id, -1, data.translate(_COMPLEMENT)


def _value(kind: int, datum: int | bytes) -> int:
    if kind == 0:
        assert isinstance(datum, int)
        return datum
    assert isinstance(datum, bytes)
    if kind < 0:
        datum = datum.translate(_COMPLEMENT)
    magnitude = int.from_bytes(datum[4:], "big")
    return magnitude if kind > 0 else -magnitude
