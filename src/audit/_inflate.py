"""Bounded decompression of MCAP chunk data: never more than the chunk's stated size plus one byte.

A chunk states its uncompressed size; the reader has already refused a claim
over `ReadLimits.max_chunk_bytes`. Here the compressed bytes are inflated
incrementally with an output cap of that size plus one byte, so a chunk
that inflates beyond its claim (a decompression bomb: a few kilobytes that
expand to gigabytes) is caught after at most one byte too many, and never
allocates more than its claim. A zstd frame that asks for a window larger
than the largest chunk is refused by the decompressor before it allocates.

The decompressors are optional dependencies of `mcap` (zstandard, lz4); one
that is not installed makes its chunks unsupported, a reported problem.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from audit._problems import ProblemKind

__all__ = ["InflateError", "Inflater"]


def _optional(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


zstandard: Final = _optional("zstandard")
lz4_frame: Final = _optional("lz4.frame")

# How much zstd output to ask for at a time.
_ZSTD_READ: Final = 256 * 1024


class InflateError(Exception):
    """A chunk's data cannot be inflated to its stated size; ``kind`` says why."""

    def __init__(self, kind: ProblemKind, why: str) -> None:
        self.kind = kind
        self.why = why
        super().__init__(why)


class Inflater:
    """Inflates chunk data with an output bound; one per read (the zstd context is reused).

    Args:
        max_bytes: the largest uncompressed chunk accepted; also the largest
            zstd window the decompressor will allocate.
    """

    __slots__ = ("_zstd",)

    def __init__(self, max_bytes: int) -> None:
        window = 1 << max(10, (max_bytes - 1).bit_length())
        self._zstd = (
            zstandard.ZstdDecompressor(max_window_size=window) if zstandard is not None else None
        )

    def inflate(self, compression: str, data: memoryview, size: int) -> bytes | memoryview:
        """Return ``data`` inflated, exactly ``size`` bytes.

        Raises:
            InflateError: unsupported compression; the data inflates to more
                than ``size`` bytes (CHUNK_OVERFLOW: inflation stops one byte
                past it) or to fewer, or does not decompress (CHUNK_CORRUPT).
        """
        if compression == "":
            if len(data) != size:
                raise InflateError(
                    ProblemKind.CHUNK_CORRUPT,
                    f"it is uncompressed but holds {len(data)} bytes, not the {size} it states",
                )
            return data
        if compression == "zstd":
            out = self._zstd_inflate(data, size)
        elif compression == "lz4":
            out = _lz4_inflate(data, size)
        else:
            raise InflateError(
                ProblemKind.CHUNK_COMPRESSION_UNSUPPORTED,
                f"its compression {compression!r} is not one ghost can read",
            )
        if len(out) > size:
            raise InflateError(
                ProblemKind.CHUNK_OVERFLOW,
                f"it inflates beyond the {size} bytes it states (decompression stopped there)",
            )
        if len(out) < size:
            raise InflateError(
                ProblemKind.CHUNK_CORRUPT,
                f"it inflates to {len(out)} bytes, not the {size} it states",
            )
        return out

    def _zstd_inflate(self, data: memoryview, size: int) -> bytes:
        if self._zstd is None:
            raise InflateError(
                ProblemKind.CHUNK_COMPRESSION_UNSUPPORTED,
                "it is zstd, and zstandard is not installed",
            )
        parts: list[bytes] = []
        got = 0
        try:
            with self._zstd.stream_reader(data, read_across_frames=True) as reader:
                while got <= size:
                    part = reader.read(min(_ZSTD_READ, size + 1 - got))
                    if not part:
                        break
                    parts.append(part)
                    got += len(part)
        except zstandard.ZstdError as exc:
            raise InflateError(ProblemKind.CHUNK_CORRUPT, f"zstd: {exc}") from None
        return b"".join(parts)


def _lz4_inflate(data: memoryview, size: int) -> bytes:
    if lz4_frame is None:
        raise InflateError(
            ProblemKind.CHUNK_COMPRESSION_UNSUPPORTED, "it is lz4, and lz4 is not installed"
        )
    parts: list[bytes] = []
    got = 0
    pending: bytes | memoryview = data
    try:
        # One frame at a time: a decompressor stops at the end of its frame.
        while pending and got <= size:
            decompressor = lz4_frame.LZ4FrameDecompressor()
            part = decompressor.decompress(pending, max_length=size + 1 - got)
            parts.append(part)
            got += len(part)
            if not decompressor.eof and got <= size:
                raise InflateError(ProblemKind.CHUNK_CORRUPT, "lz4: the frame is cut short")
            # A frame stopped past the claim is not at its end either; `got > size` ends the loop.
            pending = decompressor.unused_data
    except (RuntimeError, ValueError) as exc:
        raise InflateError(ProblemKind.CHUNK_CORRUPT, f"lz4: {exc}") from None
    return b"".join(parts)
