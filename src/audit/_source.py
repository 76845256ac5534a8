"""`ByteSource`: a file's bytes, read once, in order, hashed as they are read.

The reader parses exactly the bytes it hashes. A live sink may be appending
while the file is read, so the source fixes the file's size when it is
opened and never reads past it: what it reads is a prefix the writer had
finished (records are only ever appended), and `source_sha256` names that
prefix. Bytes appended later are not read; a file cut by a crash is read to
where it ends.

Besides SHA-256, the source keeps two running CRC-32s for the MCAP checks:
one over every byte from the start of the file (the data-section CRC covers
the file up to its DataEnd record) and one from a mark (the summary CRC
covers the summary section, which starts where DataEnd ends).

Opening never blocks: the file is opened non-blocking and checked to be a
regular file before a byte is read, so a FIFO or a device is refused, not
waited on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

from audit._errors import LogFormatError
from audit._mcap_records import MAGIC

__all__ = ["ByteSource", "open_source"]

_BLOCK: Final = 1024 * 1024
_BUFFER: Final = 64 * 1024


class ByteSource:
    """A file's first ``size`` bytes, read sequentially and hashed as read.

    Attributes:
        size: how many bytes the source will read (the file's size when opened,
            or less if the file shrank while it was read).
        position: how many bytes have been read.
        crc: CRC-32 of bytes ``[0, position)``.
        crc_since_mark: CRC-32 of the bytes read since the last `mark`, or None
            before the first.
    """

    __slots__ = ("_file", "_sha256", "crc", "crc_since_mark", "path", "position", "size")

    def __init__(self, path: Path, file: BinaryIO, size: int) -> None:
        self.path = path
        self._file = file
        self._sha256 = hashlib.sha256()
        self.size = size
        self.position = 0
        self.crc = 0
        self.crc_since_mark: int | None = None

    @property
    def remaining(self) -> int:
        """How many bytes are left to read."""
        return self.size - self.position

    def read(self, count: int) -> bytes:
        """Read ``count`` bytes, or fewer only at the end; hash and CRC them."""
        wanted = min(count, self.size - self.position)
        data = self._file.read(wanted) if wanted > 0 else b""
        if len(data) < wanted:
            # The file shrank under us: its end is here now.
            self.size = self.position + len(data)
        self._account(data)
        return data

    def read_magic(self) -> None:
        """Read the leading MCAP magic.

        Raises:
            LogFormatError: the file is empty, cut inside the magic, or does not
                start with it.
        """
        head = self.read(len(MAGIC))
        if not head:
            raise LogFormatError(self.path, "the file is empty")
        if len(head) < len(MAGIC) and MAGIC.startswith(head):
            raise LogFormatError(
                self.path, f"the file is cut inside the MCAP magic: it holds only {len(head)} bytes"
            )
        if head != MAGIC:
            raise LogFormatError(
                self.path, "it is not an MCAP file (it does not start with the MCAP magic)"
            )

    def skip(self, count: int) -> None:
        """Read past ``count`` bytes (or to the end) without holding more than a block."""
        left = min(count, self.size - self.position)
        while left > 0:
            block = self.read(min(left, _BLOCK))
            if not block:
                return
            left -= len(block)

    def drain(self) -> None:
        """Read (hash) the rest of the file."""
        self.skip(self.size - self.position)

    def mark(self) -> None:
        """Start `crc_since_mark` afresh at the current position."""
        self.crc_since_mark = 0

    def sha256_hex(self) -> str:
        """Return the SHA-256 hex of the bytes read so far."""
        return self._sha256.hexdigest()

    def read_at(self, offset: int, count: int) -> bytes:
        """Read up to ``count`` bytes at ``offset`` (within ``size``) without hashing them.

        For recovery only: the bytes are read again by the sequential pass,
        which alone hashes them. The sequential position is kept.
        """
        count = max(0, min(count, self.size - offset))
        if offset < 0 or count == 0:
            return b""
        resume = self._file.tell()
        try:
            self._file.seek(offset)
            return self._file.read(count)
        finally:
            self._file.seek(resume)

    def _account(self, data: bytes) -> None:
        self.position += len(data)
        self._sha256.update(data)
        self.crc = zlib.crc32(data, self.crc)
        if self.crc_since_mark is not None:
            self.crc_since_mark = zlib.crc32(data, self.crc_since_mark)


@contextlib.contextmanager
def open_source(path: Path) -> Iterator[ByteSource]:
    """Open ``path`` for one sequential read; close it when done.

    Raises:
        LogFormatError: the file is missing, a directory, not a regular file,
            or cannot be opened (the message gives the operating system's reason).
    """
    descriptor = _open_for_reading(path)
    try:
        mode = os.fstat(descriptor)
        if stat.S_ISDIR(mode.st_mode):
            raise LogFormatError(path, "it is a directory, not a file")
        if not stat.S_ISREG(mode.st_mode):
            raise LogFormatError(path, "it is not a regular file")
        file = os.fdopen(descriptor, "rb", buffering=_BUFFER)
    except BaseException:
        os.close(descriptor)
        raise
    with file:
        yield ByteSource(path, file, mode.st_size)


def _open_for_reading(path: Path) -> int:
    # Non-blocking, so that opening a FIFO returns at once (and fstat refuses it).
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise LogFormatError(path, "there is no such file") from None
    except PermissionError:
        raise LogFormatError(path, "permission denied: the file cannot be read") from None
    except OSError as exc:
        raise LogFormatError(path, f"the file cannot be read ({exc.strerror or exc})") from None
