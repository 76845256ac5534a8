"""`SpilledMap`: a map from text to small values that holds a bounded number in memory.

The link check must remember, across a whole run, every decision id it has
seen (a second decision with the same id is tampering, however far apart
the two are) -- a million entries in a run of a million decisions. A dict
of them grows with the run; a file crafted with ten million assessments and
no decisions would grow it further. `SpilledMap` keeps at most
``memory_entries`` in a dict; when that is full it moves them, in one batch,
to a private temporary SQLite database on disk (deleted when closed) and
remembers their keys in a Bloom filter of fixed size. A lookup that misses
the dict asks the filter first, and the database only when the filter says
the key may be there: so a run of fresh ids costs a few bit tests per
record, and memory stays at the dict, the filter and SQLite's bounded page
cache, whatever the run's size (ADR 0026).

The filter hashes keys with Python's `hash`, randomised per process
(SipHash), so a crafted file cannot aim its ids at one bit: at worst (a
full filter) every lookup reaches the database -- slower, never larger, and
never a wrong answer: the filter only ever sends a lookup on to the exact
store.

Order is kept: iteration yields values in the order their keys were first
put, as a dict's does (spilled ones first, then those in memory).
"""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Iterator
from typing import Final, Generic, TypeVar

__all__ = ["SpilledMap"]

V = TypeVar("V")

_MISSING: Final = object()
_CACHE_KIB: Final = 4096  # SQLite's page cache: 4 MiB
_PROBES: Final = 3


class SpilledMap(Generic[V]):
    """A ``str`` -> value map holding at most ``memory_entries`` values in memory.

    Args:
        memory_entries: how many entries stay in memory before all of them are
            moved to disk.
        filter_bits: the Bloom filter's size, a power of two (allocated at the
            first spill).

    Values are pickled to disk, so they must be picklable (tuples of plain
    values); the map pickles and unpickles only what it wrote itself.
    """

    __slots__ = ("_bits", "_db", "_filter", "_mask", "_memory_entries", "_next", "_recent", "_size")

    def __init__(self, *, memory_entries: int = 32_768, filter_bits: int = 2**26) -> None:
        if memory_entries < 1 or filter_bits < 8 or filter_bits & (filter_bits - 1):
            raise ValueError("memory_entries must be positive and filter_bits a power of two")
        self._memory_entries = memory_entries
        self._bits = filter_bits
        self._mask = filter_bits - 1
        self._recent: dict[str, V] = {}
        self._db: sqlite3.Connection | None = None
        self._filter = bytearray()
        self._next = 0  # the insertion number of the next entry moved to disk
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @property
    def spilled(self) -> bool:
        """Whether any entry has been moved to disk."""
        return self._db is not None

    def get(self, key: str) -> V | None:
        """Return the value of ``key``, or None."""
        value = self._recent.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[return-value]
        if self._db is None or not self._may_hold(key):
            return None
        row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        return None if row is None else self._load(row[0])

    def add(self, key: str, value: V) -> None:
        """Put ``key``, which the caller knows is not in the map (`get` returned None)."""
        self._recent[key] = value
        self._size += 1
        if len(self._recent) >= self._memory_entries:
            self._spill()

    def put(self, key: str, value: V) -> None:
        """Set ``key`` to ``value``; a key already present keeps its place in the order."""
        if key in self._recent:
            self._recent[key] = value
            return
        if self._db is not None and self._may_hold(key):
            cursor = self._db.execute(
                "UPDATE entries SET value = ? WHERE key = ?", (pickle.dumps(value), key)
            )
            if cursor.rowcount:
                return
        self.add(key, value)

    def pop(self, key: str) -> V | None:
        """Remove ``key`` and return its value, or None when it is not in the map."""
        value = self._recent.pop(key, _MISSING)
        if value is not _MISSING:
            self._size -= 1
            return value  # type: ignore[return-value]
        if self._db is None or not self._may_hold(key):
            return None
        row = self._db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self._db.execute("DELETE FROM entries WHERE key = ?", (key,))
        self._size -= 1
        return self._load(row[0])

    def values(self) -> Iterator[V]:
        """Yield the values in the order their keys were put."""
        if self._db is not None:
            for (data,) in self._db.execute("SELECT value FROM entries ORDER BY n"):
                yield self._load(data)
        yield from list(self._recent.values())

    def close(self) -> None:
        """Drop everything, and the database (SQLite deletes a private temporary one)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self._recent.clear()
        self._filter = bytearray()
        self._size = 0

    # -- disk ----------------------------------------------------------------------------

    def _spill(self) -> None:
        if self._db is None:
            # "": a private temporary database on disk, deleted when the connection closes.
            self._db = sqlite3.connect("", isolation_level=None)
            self._db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
            self._db.execute("PRAGMA journal_mode = OFF")
            self._db.execute("PRAGMA synchronous = OFF")
            self._db.execute(
                "CREATE TABLE entries (n INTEGER PRIMARY KEY, key TEXT UNIQUE, value BLOB)"
            )
            self._filter = bytearray(self._bits // 8)
        start = self._next
        rows = [
            (start + offset, key, pickle.dumps(value))
            for offset, (key, value) in enumerate(self._recent.items())
        ]
        self._next = start + len(rows)
        self._db.execute("BEGIN")
        self._db.executemany("INSERT INTO entries VALUES (?, ?, ?)", rows)
        self._db.execute("COMMIT")
        for key in self._recent:
            self._remember(key)
        self._recent.clear()

    @staticmethod
    def _load(data: bytes) -> V:
        value: V = pickle.loads(data)  # noqa: S301 - only what this map pickled itself
        return value

    # -- the Bloom filter ----------------------------------------------------------------

    def _remember(self, key: str) -> None:
        bits, mask = self._filter, self._mask
        hashed = hash(key)
        step = (hashed >> 32) | 1
        for _ in range(_PROBES):
            where = hashed & mask
            bits[where >> 3] |= 1 << (where & 7)
            hashed += step

    def _may_hold(self, key: str) -> bool:
        bits, mask = self._filter, self._mask
        hashed = hash(key)
        step = (hashed >> 32) | 1
        for _ in range(_PROBES):
            where = hashed & mask
            if not bits[where >> 3] & (1 << (where & 7)):
                return False
            hashed += step
        return True
