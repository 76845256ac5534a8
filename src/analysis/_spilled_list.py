"""`SpilledList`: byte strings appended under a sort key, read back in key order, in bounded memory.

The streamed decision trace (ADR 0026, addendum) writes a run's decisions,
approvals, problems and pending ids in file order, however many there are.
The reader yields records in file order, save the rare one whose channel a
damaged file defines late, so each item is appended with its file-order key
and read back in ``(key, order appended)`` order: what a stable sort by key
gives, as `TraceBuilder` sorts in memory.

Storage: items stay in a list until they hold ``memory_bytes``; then all of
them, and every later one, go to a private temporary file (unlinked when
made, so it is gone when closed or when the process ends, however it ends).
Reading back keys that came in order -- the common case -- is one sequential
pass over the file. Keys that did not come in order are sorted by SQLite in a
private temporary database, whose sorter holds at most its page cache in
memory and spills the rest to its own temporary files.
"""

from __future__ import annotations

import sqlite3
import struct
import tempfile
from collections.abc import Iterator
from typing import IO, Final

__all__ = ["SpilledList"]

_HEADER: Final = struct.Struct(">QQQ")  # the key's high and low 64 bits, the payload's length
_LOW: Final = 2**64 - 1
_KEY_LIMIT: Final = 2**128
_ITEM_OVERHEAD: Final = 100  # what a held item costs beyond its bytes (tuple, bytes header, int)
_FILE_BUFFER: Final = 1 << 20
_CACHE_KIB: Final = 4096  # SQLite's page cache, and so its sorter's memory: 4 MiB


class SpilledList:
    """Byte strings with integer keys, read back ordered by key, then by when they were appended.

    Args:
        memory_bytes: how many bytes of items stay in memory before all of
            them move to a temporary file.

    Append everything first, then iterate (as often as needed); `close` drops
    the temporary file. Keys are integers from 0 to 2**128 - 1 (a file-order
    key of the trace, `analysis._decision_trace._file_order`, fits).
    """

    __slots__ = ("_count", "_file", "_held", "_held_bytes", "_in_order", "_last", "_memory_bytes")

    def __init__(self, *, memory_bytes: int = 4 << 20) -> None:
        if memory_bytes < 1:
            raise ValueError("memory_bytes must be positive")
        self._memory_bytes = memory_bytes
        self._held: list[tuple[int, bytes]] = []
        self._held_bytes = 0
        self._file: IO[bytes] | None = None
        self._in_order = True
        self._last = 0
        self._count = 0

    def __len__(self) -> int:
        return self._count

    @property
    def in_order(self) -> bool:
        """Whether the keys came in order (each at least the one before)."""
        return self._in_order

    @property
    def spilled(self) -> bool:
        """Whether the items are in a temporary file rather than in memory."""
        return self._file is not None

    def append(self, key: int, payload: bytes) -> None:
        """Add ``payload`` under ``key``.

        Raises:
            ValueError: ``key`` is negative or not below 2**128.
        """
        if not 0 <= key < _KEY_LIMIT:
            raise ValueError(f"a key is from 0 to 2**128 - 1, not {key}")
        if key < self._last:
            self._in_order = False
        self._last = key
        self._count += 1
        if self._file is not None:
            self._file.write(b"".join((_HEADER.pack(key >> 64, key & _LOW, len(payload)), payload)))
            return
        self._held.append((key, payload))
        self._held_bytes += len(payload) + _ITEM_OVERHEAD
        if self._held_bytes >= self._memory_bytes:
            self._spill()

    def __iter__(self) -> Iterator[bytes]:
        """Yield the payloads by key, those of one key in the order they were appended."""
        if self._file is None:
            held = self._held if self._in_order else sorted(self._held, key=_key)
            return (payload for _, payload in held)
        return self._read() if self._in_order else self._sorted()

    def close(self) -> None:
        """Drop every item, and the temporary file."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._held = []
        self._held_bytes = 0
        self._count = 0

    def _spill(self) -> None:
        # TemporaryFile: unlinked at once on POSIX, so nothing outlives the process.
        stream = tempfile.TemporaryFile(buffering=_FILE_BUFFER)  # noqa: SIM115 - closed in close()
        pack, write = _HEADER.pack, stream.write
        for key, payload in self._held:
            write(pack(key >> 64, key & _LOW, len(payload)))
            write(payload)
        self._file = stream
        self._held = []
        self._held_bytes = 0

    def _entries(self) -> Iterator[tuple[int, bytes]]:
        stream = self._file
        assert stream is not None
        stream.flush()
        stream.seek(0)
        read, size, unpack = stream.read, _HEADER.size, _HEADER.unpack
        while header := read(size):
            high, low, length = unpack(header)
            yield (high << 64) | low, read(length)
        stream.seek(0, 2)  # back to the end, should anything be appended after all

    def _read(self) -> Iterator[bytes]:
        for _, payload in self._entries():
            yield payload

    def _sorted(self) -> Iterator[bytes]:
        # "": a private temporary database on disk, deleted when the connection closes.
        db = sqlite3.connect("", isolation_level=None)
        try:
            db.execute(f"PRAGMA cache_size = -{_CACHE_KIB}")
            db.execute("PRAGMA journal_mode = OFF")
            db.execute("PRAGMA synchronous = OFF")
            db.execute("CREATE TABLE items (n INTEGER PRIMARY KEY, key BLOB, payload BLOB)")
            db.execute("BEGIN")
            db.executemany(
                "INSERT INTO items (key, payload) VALUES (?, ?)",
                ((key.to_bytes(16, "big"), payload) for key, payload in self._entries()),
            )
            db.execute("COMMIT")
            for (payload,) in db.execute("SELECT payload FROM items ORDER BY key, n"):
                yield payload
        finally:
            db.close()


def _key(item: tuple[int, bytes]) -> int:
    return item[0]
