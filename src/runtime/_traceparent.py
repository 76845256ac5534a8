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
    "PROPAGATED_TRACESTATE_MAX_CHARS",
    "TraceParent",
    "bound_tracestate",
    "is_level1_key",
    "join_tracestate",
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

# tracestate (ADR 0018): W3C Trace Context Level 2, section "tracestate Header Field Values".
_TRACESTATE_MAX_MEMBERS: Final = 32
_TRACESTATE_MAX_CHARS: Final = 8192  # what is read at all; a parse-cost bound, as OpenTelemetry's
_TRACESTATE_MAX_KEY_CHARS: Final = 256
_TRACESTATE_MAX_VALUE_CHARS: Final = 256
_LCALPHA: Final = "abcdefghijklmnopqrstuvwxyz"
_KEY_FIRST: Final = frozenset(_LCALPHA + "0123456789")
_KEY_CHARS: Final = _KEY_FIRST | frozenset("_-*/@")
# printable ASCII except "," and "="; the last character is not a space, which holds by
# construction: a member is stripped of optional whitespace before its value is read.
_VALUE_CHARS: Final = frozenset(chr(c) for c in range(0x20, 0x7F)) - frozenset(",=")
# The Level 1 key grammar, which OpenTelemetry's `TraceState` still enforces.
_L1_PLAIN_CHARS: Final = _KEY_CHARS - frozenset("@")
_L1_TENANT_MAX_CHARS: Final = 241
_L1_SYSTEM_MAX_CHARS: Final = 14
# Propagation: W3C asks for at least 512 characters and, when truncating, whole entries,
# those over 128 characters first, then from the end.
PROPAGATED_TRACESTATE_MAX_CHARS: Final = 512
_TRACESTATE_LARGE_ENTRY_CHARS: Final = 128


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

    The grammar is W3C Trace Context Level 2's: a key is 1-256 characters of
    ``a-z 0-9 _ - * / @`` beginning with a letter or a digit (so ``tenant@system``,
    ``1abc`` and ``foo@`` are keys); a value is 1-256 printable ASCII characters
    other than ``,`` and ``=``, not ending in a space. Spaces and tabs around a
    member are optional whitespace, and empty members (``a=1,,b=2``) are skipped.
    The parser scans each character a bounded number of times (no regex), so
    crafted text costs linear time.

    Args:
        text: the combined header value.

    Returns:
        the members, in the order received (at most 32).

    Raises:
        TraceContextError: the header must be dropped as a whole: a malformed
            member, a duplicate key, more than 32 members, or more than 8,192
            characters. The message names the member's position, never its text.
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
        if len(members) == _TRACESTATE_MAX_MEMBERS:
            raise TraceContextError(
                f"tracestate has more than {_TRACESTATE_MAX_MEMBERS} members;"
                f" at most {_TRACESTATE_MAX_MEMBERS} are allowed"
            )
        key, sep, value = member.partition("=")
        if not sep or not _is_key(key):
            raise TraceContextError(f"tracestate member {index} has an invalid key")
        if not _is_value(value):
            raise TraceContextError(f"tracestate member {index} has an invalid value")
        if key in seen:
            raise TraceContextError(f"tracestate member {index} repeats a key")
        seen.add(key)
        members.append((key, value))
    return members


def _is_key(key: str) -> bool:
    """Whether ``key`` is a Level 2 tracestate key (one pass over it)."""
    return (
        0 < len(key) <= _TRACESTATE_MAX_KEY_CHARS
        and key[0] in _KEY_FIRST
        and _KEY_CHARS.issuperset(key)
    )


def _is_value(value: str) -> bool:
    """Whether ``value`` (already stripped of trailing whitespace) is a tracestate value."""
    return 0 < len(value) <= _TRACESTATE_MAX_VALUE_CHARS and _VALUE_CHARS.issuperset(value)


def is_level1_key(key: str) -> bool:
    """Whether a valid Level 2 ``key`` also fits the Level 1 grammar OpenTelemetry enforces.

    Level 1 allows a simple key (a letter, then up to 255 characters without
    ``@``) or ``tenant@system``: a tenant of 1-241 characters beginning with a
    letter or digit, and a system of 1-14 beginning with a letter.
    (A Level 2 key never begins with ``@``, so the tenant is never empty.)
    """
    tenant, at, system = key.partition("@")
    if not at:
        return key[0] in _LCALPHA
    return (
        len(tenant) <= _L1_TENANT_MAX_CHARS
        and 0 < len(system) <= _L1_SYSTEM_MAX_CHARS
        and system[0] in _LCALPHA
        and _L1_PLAIN_CHARS.issuperset(system)
    )


def bound_tracestate(
    members: list[tuple[str, str]], max_chars: int = PROPAGATED_TRACESTATE_MAX_CHARS
) -> list[tuple[str, str]]:
    """The members to propagate: at most ``max_chars`` once joined as ``k=v,k=v``.

    W3C Trace Context (tracestate Limits) asks a vendor that truncates to
    remove whole entries: those longer than 128 characters first, then from the
    end. Among the long ones, ghost removes the right-most first (the left of
    the list holds the most recently updated entries), and only as many as it
    takes.

    Args:
        members: validated members, in order.
        max_chars: the longest header to propagate (512).

    Returns:
        a new list: ``members`` in order, less what had to go.
    """
    kept = list(members)
    long_ones = [i for i, m in enumerate(kept) if len(_entry(m)) > _TRACESTATE_LARGE_ENTRY_CHARS]
    for index in reversed(long_ones):  # right to left, so the indexes left of it hold
        if len(join_tracestate(kept)) <= max_chars:
            return kept
        del kept[index]
    while len(join_tracestate(kept)) > max_chars:
        kept.pop()
    return kept


def join_tracestate(members: list[tuple[str, str]]) -> str:
    """``members`` as a header: ``k=v`` entries joined by ``,``, without whitespace."""
    return ",".join(map(_entry, members))


def _entry(member: tuple[str, str]) -> str:
    return f"{member[0]}={member[1]}"


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
