"""`SpilledChunkIndexes`: the MCAP writer's chunk indexes kept on disk, not in memory.

The ``mcap`` writer keeps one ``ChunkIndex`` per finished chunk in a list and
writes them all in the summary when the file is finished. In ``process`` and
``fsync`` durability every decision finishes a chunk, so that list grows by
about 560 bytes a decision: 804 MiB after a million, without end for a
long-lived agent. This class takes the list's place. Each index is packed into
a few dozen bytes, the bytes are appended to an anonymous temporary file in
64 KiB batches, and they are read back one by one when the summary is written.
Memory stays bounded by the batch, whatever the run's length.

The writer reaches the list through a name-mangled attribute
(`Writer._Writer__chunk_indices`). `spill_chunk_indexes` replaces it only when
the attribute is there as a list; otherwise it leaves the writer alone and
says so. A test pins the replacement, so an ``mcap`` release that renames the
attribute fails it visibly instead of growing silently.
"""

from __future__ import annotations

import io
import struct
import tempfile
from collections.abc import Iterator
from typing import IO, Final

from mcap.records import ChunkIndex
from mcap.writer import Writer

__all__ = ["SpilledChunkIndexes", "spill_chunk_indexes"]

_ATTRIBUTE: Final = "_Writer__chunk_indices"
_BATCH_BYTES: Final = 64 * 1024
# message_start_time, message_end_time, chunk_start_offset, chunk_length,
# message_index_length, compressed_size, uncompressed_size, then the number of
# message index offsets and the length of the compression name.
_FIXED: Final = struct.Struct("<7QHB")
_OFFSET: Final = struct.Struct("<HQ")


class SpilledChunkIndexes:
    """A list of ``ChunkIndex`` that holds its items in a temporary file.

    It offers only what the writer uses: ``append``, and iteration in the order
    of appending (while iterating, no append is made). The file is anonymous
    (unlinked at creation), so it disappears with the process, crash included.
    """

    __slots__ = ("_count", "_file", "_pending")

    def __init__(self) -> None:
        self._file: IO[bytes] | None = None
        self._pending = bytearray()
        self._count = 0

    def append(self, index: ChunkIndex) -> None:
        """Keep ``index`` (packed; written out once a batch has gathered)."""
        offsets = index.message_index_offsets
        compression = index.compression.encode()
        pending = self._pending
        pending += _FIXED.pack(
            index.message_start_time,
            index.message_end_time,
            index.chunk_start_offset,
            index.chunk_length,
            index.message_index_length,
            index.compressed_size,
            index.uncompressed_size,
            len(offsets),
            len(compression),
        )
        for channel_id, offset in offsets.items():
            pending += _OFFSET.pack(channel_id, offset)
        pending += compression
        self._count += 1
        if len(pending) >= _BATCH_BYTES:
            self._spill()

    def __len__(self) -> int:
        return self._count

    @property
    def pending_bytes(self) -> int:
        """How many packed bytes wait in memory for the next batch."""
        return len(self._pending)

    def __iter__(self) -> Iterator[ChunkIndex]:
        if self._file is not None:
            self._file.seek(0)
            yield from _unpack_all(self._file)
            self._file.seek(0, 2)
        yield from _unpack_all(io.BytesIO(bytes(self._pending)))

    def close(self) -> None:
        """Drop the temporary file (the writer has finished with the indexes)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._pending = bytearray()

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="ghost-chunk-indexes-")  # noqa: SIM115 - lives as long as the writer
        self._file.write(self._pending)
        self._pending = bytearray()


def _unpack_all(source: IO[bytes]) -> Iterator[ChunkIndex]:
    """Every packed index in ``source``, from where it stands to its end."""
    read = source.read
    while fixed := read(_FIXED.size):
        start, end, offset, length, index_length, compressed, uncompressed, count, name = (
            _FIXED.unpack(fixed)
        )
        offsets: dict[int, int] = {}
        for _ in range(count):
            channel_id, channel_offset = _OFFSET.unpack(read(_OFFSET.size))
            offsets[channel_id] = channel_offset
        yield ChunkIndex(
            message_start_time=start,
            message_end_time=end,
            chunk_start_offset=offset,
            chunk_length=length,
            message_index_offsets=offsets,
            message_index_length=index_length,
            compression=read(name).decode(),
            compressed_size=compressed,
            uncompressed_size=uncompressed,
        )


def spill_chunk_indexes(writer: Writer) -> SpilledChunkIndexes | None:
    """Have ``writer`` keep its chunk indexes in a `SpilledChunkIndexes`; None if it cannot.

    Call before the first chunk is finished (right after constructing the writer).
    """
    current = getattr(writer, _ATTRIBUTE, None)
    if type(current) is not list or current:
        return None
    spilled = SpilledChunkIndexes()
    setattr(writer, _ATTRIBUTE, spilled)
    return spilled
