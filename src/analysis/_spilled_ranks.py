"""`SpilledRanks`: exact nearest-rank statistics of integers in groups, in bounded memory.

The decision trace's latency statistics are exact (`analysis._trace_stats`):
the p-th percentile is the value at rank ``ceil(p * n / 100)`` of the sorted
values, so every value must be kept until the end -- a million latencies in
a run of a million decisions, more for a crafted file. `SpilledRanks` keeps
at most ``memory_values`` of them in memory, in one of two ways:

1. **Sorted runs** (every value so far in the signed 64-bit range: every
   latency a gate writes). Values gather per group in arrays of 64-bit
   integers; when they number ``memory_values``, each group's array is
   sorted and appended to a private temporary file (unlinked at once) as a
   *run*. At the end the file is mapped and each rank found by bisecting on
   the value: the k-th smallest is the least ``v`` that at least ``k``
   values are at or below, and how many are is a ``bisect`` in each sorted
   run -- some sixty-four rounds of one bisection per run, touching a few
   pages of the file each.
2. **SQLite** (from the first value beyond 64 bits on; a crafted file). Every
   value, those already held and spilled included, goes to a private
   temporary SQLite database (deleted when closed), and each rank is read at
   the end with ``ORDER BY ... LIMIT 1 OFFSET rank - 1`` from an index (from
   whichever end is nearer), holding at most SQLite's page cache. SQLite's
   integers are 64-bit, so a value is stored as a class and a datum that sort
   together as the integers do: class 0 and the integer itself inside the
   signed 64-bit range; beyond it, class 1 and a BLOB of the magnitude's
   length (4 bytes) and its big-endian bytes, which ``memcmp`` orders as the
   numbers; below it, class -1 and the same with every byte complemented, so
   that a larger magnitude sorts first.

What stays in memory besides the values held: per group a count and, in
the first way, one offset and length per run (a run per ``memory_values``
values added: a few hundred bytes per million).
"""

from __future__ import annotations

import itertools
import mmap
import sqlite3
import tempfile
from array import array
from bisect import bisect_right
from collections.abc import Hashable, Iterator
from typing import IO, Final, Generic, TypeVar

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
_ALL_FROM_LOWEST: Final = "SELECT class, datum FROM ranked ORDER BY class, datum LIMIT 1 OFFSET ?"
_ALL_FROM_HIGHEST: Final = (
    "SELECT class, datum FROM ranked ORDER BY class DESC, datum DESC LIMIT 1 OFFSET ?"
)

_Row = tuple[int, int, int | bytes]


class SpilledRanks(Generic[G]):
    """Integers in groups, and each group's count, min, max and nearest-rank percentiles.

    Args:
        memory_values: how many values stay in memory before they move to disk.

    Add every value, then ask for `stats` (of a group) or `stats_of_all`;
    `close` drops what is on disk.
    """

    __slots__ = (
        "_batch",
        "_counts",
        "_db",
        "_file",
        "_held",
        "_held_count",
        "_ids",
        "_indexed",
        "_memory_values",
        "_runs",
    )

    def __init__(self, *, memory_values: int = 1 << 17) -> None:
        if memory_values < 1:
            raise ValueError("memory_values must be positive")
        self._memory_values = memory_values
        self._counts: dict[G, int] = {}
        # Sorted runs: values held per group, and the runs on file (offset, count) per group.
        self._held: dict[G, array[int]] = {}
        self._held_count = 0
        self._file: IO[bytes] | None = None
        self._runs: dict[G, list[tuple[int, int]]] = {}
        # SQLite, once a value beyond 64 bits came.
        self._db: sqlite3.Connection | None = None
        self._ids: dict[G, int] = {}
        self._batch: list[_Row] = []
        self._indexed: set[str] = set()  # the indexes made

    @property
    def spilled(self) -> bool:
        """Whether values have moved to disk (to sorted runs, or to SQLite)."""
        return self._file is not None or self._db is not None

    def groups(self) -> Iterator[G]:
        """The groups that hold a value, in the order of their first."""
        return iter(self._counts)

    def add(self, group: G, value: int) -> None:
        """Add ``value`` to ``group``."""
        counts = self._counts
        counts[group] = counts.get(group, 0) + 1
        if self._db is not None:
            self._batch.append(_row(self._id(group), value))
            if len(self._batch) >= _BATCH:
                self._flush()
            return
        if not _INT64_MIN <= value <= _INT64_MAX:
            self._to_sqlite()
            self._batch.append(_row(self._id(group), value))
            return
        held = self._held.get(group)
        if held is None:
            held = self._held[group] = array("q")
        held.append(value)
        self._held_count += 1
        if self._held_count >= self._memory_values:
            self._spill_runs()

    def stats(self, group: G) -> LatencyStats | None:
        """The statistics of ``group``'s values (`LatencyStats`); None when it has none."""
        count = self._counts.get(group, 0)
        if not count:
            return None
        if self._db is not None:
            return self._stats_from_sqlite(group, count)
        if self._file is None:
            return LatencyStats.of(self._held[group])
        self._spill_runs()  # everything in runs, so that one search covers it
        return self._stats_from_runs(group, count)

    def stats_of_all(self) -> LatencyStats | None:
        """The statistics of every group's values together; None when there are none."""
        count = sum(self._counts.values())
        if not count:
            return None
        if self._db is not None:
            return self._stats_from_sqlite(None, count)
        if self._file is None:
            return LatencyStats.of(itertools.chain.from_iterable(self._held.values()))
        self._spill_runs()
        return self._stats_from_runs(None, count)

    def close(self) -> None:
        """Drop every value, and what is on disk."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._db is not None:
            self._db.close()
            self._db = None
        self._held.clear()
        self._held_count = 0
        self._runs.clear()
        self._counts.clear()
        self._batch.clear()

    # -- sorted runs ---------------------------------------------------------------------

    def _spill_runs(self) -> None:
        if not self._held_count:
            return
        if self._file is None:
            # TemporaryFile: unlinked at once on POSIX, so nothing outlives the process.
            self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        stream = self._file
        stream.seek(0, 2)
        for group, values in self._held.items():
            if values:
                run = array("q", sorted(values))
                self._runs.setdefault(group, []).append((stream.tell(), len(run)))
                run.tofile(stream)
        self._held.clear()
        self._held_count = 0

    def _stats_from_runs(self, group: G | None, count: int) -> LatencyStats:
        # group None: every group's runs together.
        stream = self._file
        assert stream is not None
        stream.flush()
        where = (
            [run for runs in self._runs.values() for run in runs]
            if group is None
            else self._runs[group]
        )
        with mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            whole = memoryview(mapped).cast("B").cast("q")
            width = whole.itemsize
            runs = [whole[start // width : start // width + size] for start, size in where]
            try:
                kth = _kth_of_runs
                return LatencyStats(
                    count=count,
                    min_ns=min(run[0] for run in runs),
                    p50_ns=kth(runs, percentile_rank(count, 50)),
                    p90_ns=kth(runs, percentile_rank(count, 90)),
                    p99_ns=kth(runs, percentile_rank(count, 99)),
                    max_ns=max(run[-1] for run in runs),
                )
            finally:
                for run in runs:
                    run.release()
                whole.release()

    # -- SQLite --------------------------------------------------------------------------

    def _to_sqlite(self) -> None:
        # "": a private temporary database on disk, deleted when the connection closes.
        db = sqlite3.connect("", isolation_level=None)
        db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("CREATE TABLE ranked (grp INTEGER, class INTEGER, datum)")
        self._db = db
        for group, values in self._spilled_values():
            group_id = self._id(group)
            for value in values:
                self._batch.append((group_id, 0, value))
                if len(self._batch) >= _BATCH:
                    self._flush()
        self._flush()
        self._held.clear()
        self._held_count = 0
        self._runs.clear()
        if self._file is not None:
            self._file.close()
            self._file = None

    def _spilled_values(self) -> Iterator[tuple[G, array[int]]]:
        stream = self._file
        if stream is not None:
            stream.flush()
            for group, runs in self._runs.items():
                for start, size in runs:
                    stream.seek(start)
                    run = array("q")
                    run.fromfile(stream, size)
                    yield group, run
        yield from self._held.items()

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

    def _stats_from_sqlite(self, group: G | None, count: int) -> LatencyStats:
        # group None: every group's values together, through an index of their own.
        assert self._db is not None
        self._flush()
        index = "everything" if group is None else "grouped"
        if index not in self._indexed:
            columns = "class, datum" if group is None else "grp, class, datum"
            self._db.execute(f"CREATE INDEX {index} ON ranked ({columns})")
            self._indexed.add(index)
        group_id = None if group is None else self._ids[group]
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

    def _value_at(self, group_id: int | None, rank: int, count: int) -> int:
        assert self._db is not None
        # Walk the index from whichever end is nearer the rank.
        lowest = rank - 1 <= count - rank
        offset = rank - 1 if lowest else count - rank
        if group_id is None:
            query = _ALL_FROM_LOWEST if lowest else _ALL_FROM_HIGHEST
            row = self._db.execute(query, (offset,)).fetchone()
        else:
            query = _FROM_LOWEST if lowest else _FROM_HIGHEST
            row = self._db.execute(query, (group_id, offset)).fetchone()
        assert row is not None  # the group holds `count` values
        return _value(row[0], row[1])


def _kth_of_runs(runs: list[memoryview], rank: int) -> int:
    """The ``rank``-th smallest (1-based) value of sorted runs, by bisecting on the value."""
    low, high = min(run[0] for run in runs), max(run[-1] for run in runs)
    while low < high:
        middle = (low + high) // 2
        if sum(bisect_right(run, middle) for run in runs) >= rank:
            high = middle
        else:
            low = middle + 1
    return int(low)


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
