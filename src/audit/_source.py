"""`ByteSource`: a file's bytes, read once, in order, hashed as they are read.

The reader parses exactly the bytes it hashes. A live sink may be appending
while the file is read, so the source fixes the file's size when it is
opened and never reads past it: what it reads is a prefix the writer had
finished (records are only ever appended), and `source_sha256` names that
prefix. Bytes appended later are not read; a file cut by a crash is read to
where it ends.

Besides SHA-256, the source gives two CRC-32s for the MCAP checks: over
every byte from the start of the file to an offset (the data-section CRC
covers the file up to its DataEnd record), and from a mark to an offset (the
summary CRC covers the summary section, which starts where DataEnd ends).

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

_BLOCK: Final = 256 * 1024


class ByteSource:
    """A file's first ``size`` bytes, read sequentially and hashed as read.

    Records are served from a window of the file (one block, or the record
    when larger), so that hashing and CRCs run per block, not per record.
    The bytes before the window have been hashed; `crc_at` and
    `crc_since_mark_at` give the CRCs at any offset still in the window, which
    `ensure` keeps at the start of the record being read.

    Attributes:
        path: the file.
        size: how many bytes the source will read (the file's size when opened,
            or less if the file shrank while it was read).
    """

    __slots__ = (
        "_at",
        "_crc",
        "_file",
        "_mark",
        "_mark_crc",
        "_sha256",
        "_start",
        "_window",
        "path",
        "size",
    )

    def __init__(self, path: Path, file: BinaryIO, size: int) -> None:
        self.path = path
        self.size = size
        self._file = file
        self._sha256 = hashlib.sha256()
        self._window = b""
        self._start = 0  # file offset of the window's first byte
        self._at = 0  # how much of the window has been read
        self._crc = 0  # CRC-32 of [0, _start)
        self._mark: int | None = None
        self._mark_crc = 0  # CRC-32 of [_mark, _start) once the window has moved past the mark

    @property
    def position(self) -> int:
        """How many bytes have been read."""
        return self._start + self._at

    @property
    def remaining(self) -> int:
        """How many bytes are left to read."""
        return self.size - self._start - self._at

    def read(self, count: int) -> bytes:
        """Read ``count`` bytes, or fewer only at the end."""
        end = self._at + count
        if end <= len(self._window):
            self._at = end
            return self._window[end - count : end]
        wanted = min(count, self.remaining)
        if wanted > _BLOCK:
            # Larger than a block: read it whole, past the window.
            head = self._window[self._at :]
            self._at = len(self._window)
            self._retire(self._at)
            body = self._fetch(wanted - len(head))
            self._account(body)
            self._start += len(body)
            return head + body
        self.ensure(wanted)
        data = self._window[self._at : self._at + wanted]
        self._at += len(data)
        return data

    def ensure(self, count: int) -> None:
        """Keep at least ``count`` bytes (or all that are left) ahead in the window."""
        ahead = len(self._window) - self._at
        if ahead >= count or ahead >= self.remaining:
            return
        carried = self._window[self._at :]
        self._retire(self._at)
        more = min(max(_BLOCK, count) - len(carried), self.size - self._start - len(carried))
        self._window = carried + self._fetch(more)

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
        count = min(count, self.remaining)
        if self._at + count <= len(self._window):
            self._at += count
            return
        count -= len(self._window) - self._at
        self._at = len(self._window)
        self._retire(self._at)
        while count > 0:
            block = self._fetch(min(count, _BLOCK))
            if not block:
                return
            self._account(block)
            self._start += len(block)
            count -= len(block)

    def drain(self) -> None:
        """Read (hash) the rest of the file."""
        self.skip(self.remaining)

    def mark(self) -> None:
        """Start the CRC that `crc_since_mark_at` reports at the current position."""
        self._mark = self.position

    def crc_at(self, offset: int) -> int:
        """CRC-32 of bytes ``[0, offset)``, for an ``offset`` in the window read so far."""
        return zlib.crc32(self._window[: self._in_window(offset)], self._crc)

    def crc_since_mark_at(self, offset: int) -> int | None:
        """CRC-32 of bytes ``[mark, offset)``, or None before any `mark`."""
        if self._mark is None:
            return None
        end = self._in_window(offset)
        if self._mark >= self._start:
            return zlib.crc32(self._window[self._mark - self._start : end])
        return zlib.crc32(self._window[:end], self._mark_crc)

    def sha256_hex(self) -> str:
        """Return the SHA-256 hex of the bytes read so far."""
        digest = self._sha256.copy()
        digest.update(self._window[: self._at])
        return digest.hexdigest()

    def read_at(self, offset: int, count: int) -> bytes:
        """Read up to ``count`` bytes at ``offset`` (within ``size``) without hashing them.

        For recovery only: the sequential pass alone hashes the file.
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

    def _in_window(self, offset: int) -> int:
        at = offset - self._start
        if not 0 <= at <= self._at:
            raise ValueError(f"offset {offset} is not in the window read so far")
        return at

    def _fetch(self, count: int) -> bytes:
        """Read ``count`` bytes from the file, after the window (fewer at its end)."""
        parts: list[bytes] = []
        got = 0
        while got < count:
            part = self._file.read(count - got)
            if not part:
                # The file shrank under us: its end is here now.
                self.size = self._start + len(self._window) + got
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def _retire(self, upto: int) -> None:
        """Hash the window's first ``upto`` bytes and drop them."""
        done = self._window[:upto]
        self._account(done)
        self._window = self._window[upto:]
        self._at -= upto
        self._start += upto

    def _account(self, data: bytes) -> None:
        # Called with the bytes at [_start, _start + len(data)), before _start moves past them.
        self._sha256.update(data)
        if self._mark is not None and self._mark < self._start + len(data):
            if self._mark >= self._start:
                self._mark_crc = zlib.crc32(data[self._mark - self._start :])
            else:
                self._mark_crc = zlib.crc32(data, self._mark_crc)
        self._crc = zlib.crc32(data, self._crc)


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
        file = os.fdopen(descriptor, "rb", buffering=0)
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
