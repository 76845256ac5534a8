"""Strict W3C Trace Context parsing (https://www.w3.org/TR/trace-context/).

A ``traceparent`` header arrives from outside the process and is validated
before any use: a header that fails is never trusted, never logged raw, and
the gate records that it replaced it (ADR 0005). Error messages describe the
defect without echoing the text.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Final

from runtime._errors import TraceContextError

__all__ = [
    "TraceParent",
    "make_span_id",
    "make_trace_id",
    "parse_traceparent",
    "parse_tracestate",
]

_HTTP_WHITESPACE: Final = " \t"
_MAX_HEADER_CHARS: Final = 512  # a traceparent is 55 chars; future versions may add a little
_TRACEPARENT_00: Final = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE_ID: Final = "0" * 32
_ZERO_SPAN_ID: Final = "0" * 16

_TRACESTATE_MAX_MEMBERS: Final = 32
_TRACESTATE_MAX_CHARS: Final = 8192
_TRACESTATE_KEY: Final = re.compile(
    r"[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13}"
)
_TRACESTATE_VALUE: Final = re.compile(
    r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]"
)


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A validated ``traceparent``, re-emittable as version ``00``.

    Attributes:
        trace_id: 32 lowercase hex digits, not all zero.
        span_id: the caller's span (our parent): 16 lowercase hex digits, not all zero.
        trace_flags: the flags byte (bit 0 = sampled).
        version: the version the header was sent with (a future one is re-emitted as 00).
    """

    trace_id: str
    span_id: str
    trace_flags: int
    version: int = 0

    @property
    def sampled(self) -> bool:
        """Whether the caller sampled this trace (flag bit 0)."""
        return bool(self.trace_flags & 0x01)

    def header(self) -> str:
        """Return the version-00 header text for this trace parent.

        Only the ``sampled`` flag is kept: version 00 defines no other bit, and
        a participant does not forward bits it does not understand.
        """
        return f"00-{self.trace_id}-{self.span_id}-{self.trace_flags & 0x01:02x}"


def parse_traceparent(text: str) -> TraceParent:
    """Parse a ``traceparent`` header strictly.

    Surrounding spaces and tabs (HTTP optional whitespace) are trimmed. Version
    ``00`` must be exactly 55 characters; a higher version may carry more
    fields after a ``-``, which are ignored; version ``ff`` is invalid.

    Raises:
        TraceContextError: the header is not a valid traceparent. The message
            says why but does not repeat the header.
    """
    if not isinstance(text, str):
        raise TraceContextError("traceparent must be a string")
    if len(text) > _MAX_HEADER_CHARS:
        raise TraceContextError(f"traceparent is longer than {_MAX_HEADER_CHARS} characters")
    header = text.strip(_HTTP_WHITESPACE)
    match = _TRACEPARENT_00.match(header)
    if match is None:
        raise TraceContextError(
            "traceparent is not version-traceid-parentid-flags in lowercase hex (2-32-16-2 digits)"
        )
    version_hex, trace_id, span_id, flags_hex = match.groups()
    version = int(version_hex, 16)
    if version == 0xFF:
        raise TraceContextError("traceparent version ff is forbidden")
    if version == 0 and len(header) != 55:
        raise TraceContextError("traceparent version 00 carries data after the flags")
    if version > 0 and len(header) > 55 and header[55] != "-":
        raise TraceContextError("traceparent of a future version lacks a '-' after the flags")
    if trace_id == _ZERO_TRACE_ID:
        raise TraceContextError("traceparent trace-id is all zeros")
    if span_id == _ZERO_SPAN_ID:
        raise TraceContextError("traceparent parent-id is all zeros")
    return TraceParent(trace_id, span_id, int(flags_hex, 16), version)


def parse_tracestate(text: str) -> list[tuple[str, str]]:
    """Parse a ``tracestate`` header into its ``(key, value)`` members, in order.

    Empty members (``a=1,,b=2``) are skipped, as the W3C grammar allows.

    Raises:
        TraceContextError: the header must be dropped as a whole: a malformed
            member, a duplicate key, more than 32 members, or an oversized header.
    """
    if not isinstance(text, str):
        raise TraceContextError("tracestate must be a string")
    if len(text) > _TRACESTATE_MAX_CHARS:
        raise TraceContextError(f"tracestate is longer than {_TRACESTATE_MAX_CHARS} characters")
    members: list[tuple[str, str]] = []
    seen: set[str] = set()
    for index, raw in enumerate(text.split(",")):
        member = raw.strip(_HTTP_WHITESPACE)
        if not member:
            continue
        key, sep, value = member.partition("=")
        if not sep or _TRACESTATE_KEY.fullmatch(key) is None:
            raise TraceContextError(f"tracestate member {index} has an invalid key")
        if _TRACESTATE_VALUE.fullmatch(value) is None:
            raise TraceContextError(f"tracestate member {index} has an invalid value")
        if key in seen:
            raise TraceContextError(f"tracestate member {index} repeats a key")
        seen.add(key)
        members.append((key, value))
    if len(members) > _TRACESTATE_MAX_MEMBERS:
        raise TraceContextError(
            f"tracestate has {len(members)} members; at most {_TRACESTATE_MAX_MEMBERS} are allowed"
        )
    return members


def make_trace_id() -> str:
    """Return a new random trace id (32 lowercase hex digits, never all zero)."""
    while True:
        trace_id = os.urandom(16).hex()
        if trace_id != _ZERO_TRACE_ID:
            return trace_id


def make_span_id() -> str:
    """Return a new random span id (16 lowercase hex digits, never all zero)."""
    while True:
        span_id = os.urandom(8).hex()
        if span_id != _ZERO_SPAN_ID:
            return span_id
