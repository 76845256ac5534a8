"""UUIDv7 identifiers (RFC 9562): unique, and sortable by creation time."""

from __future__ import annotations

import os
import uuid

__all__ = ["make_uuid7"]


def make_uuid7(time_ns: int) -> str:
    """Return a new UUIDv7 string whose 48-bit timestamp is ``time_ns`` in milliseconds.

    The remaining 74 bits are random (`os.urandom`), so ids minted in the same
    millisecond are unique with overwhelming probability; within a millisecond
    their order is arbitrary.
    """
    unix_ms = (time_ns // 1_000_000) & 0xFFFF_FFFF_FFFF
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = rand >> 68  # 12 bits
    rand_b = rand & ((1 << 62) - 1)  # 62 bits
    value = (unix_ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))
