"""The audit daemon's wire protocol: length-prefixed frames of canonical JSON (ADR 0034).

A frame is a 4-byte big-endian length, then that many bytes: one JSON object
with sorted keys and compact separators (a record inside it is in the same
form, so the bytes a gate sends are the canonical form ghost stores). A
frame longer than the daemon's limit (default `MAX_FRAME_BYTES`) is refused
before its body is read. Parsing is strict (`audit._parse.parse_record`: UTF-8,
no duplicate keys, no ``NaN``).

Requests (gate to daemon) carry ``op`` and ``n``: ``n`` is 0 for ``open``
and goes up by one per request, so a frame out of order is detected.

* ``{"op": "open", "n": 0, "protocol": PROTOCOL, "run": {...}}`` — the
  `runtime.RunStart` fields, ``policy_source`` in standard base64.
* ``{"op": "append", "n": k, "topic": T, "record": {...}}``
* ``{"op": "pair", "n": k, "topic": T, "record": {...}, "then_topic": U,
  "then": {...}, "link": F}`` — ``then`` gets field ``F`` set to the content
  address of ``record`` (the gate's assessment and its decision, ADR 0025).
* ``{"op": "close", "n": k}`` — seal the run.

Answers (daemon to gate): ``{"ok": true, "n": k, "records": [{"seq", "prev_sha256",
"sha256"}, ...]}`` — one entry per record written for the request, in
order (``open``: the ``/run`` record, with ``run_id`` and ``file``; ``close``:
the seal) — or ``{"ok": false, "n": k, "error": "...", "fatal": bool}``.
A fatal error ends the connection; a refused record (``fatal: false``) does not.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Mapping
from typing import Any, Final

import orjson

from audit._parse import parse_record

__all__ = [
    "MAX_FRAME_BYTES",
    "PROTOCOL",
    "FrameError",
    "encode_frame",
    "read_frame",
]

PROTOCOL: Final = "ghost.audit-wire/1"
"""The protocol a gate names in its ``open`` frame."""

MAX_FRAME_BYTES: Final = 8 * 1024 * 1024
"""The default largest frame body, in bytes (a policy source travels in ``open``)."""

_HEADER: Final = struct.Struct(">I")
_SORTED: Final = orjson.OPT_SORT_KEYS


class FrameError(Exception):
    """A frame that breaks the protocol: cut, oversized, not strict JSON, not an object.

    Attributes:
        kind: ``eof`` (the peer closed mid-frame), ``oversized`` or ``malformed``.
        detail: what was wrong, in words (never the frame's content).
    """

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


def _plain(value: object) -> object:
    # orjson writes dicts; a record may arrive as another Mapping (a read-only view).
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} has no JSON form")


def encode_frame(message: Mapping[str, Any], *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """Return ``message`` as one frame: its length, then its sorted compact JSON.

    Raises:
        FrameError: ``message`` has no JSON form (a float that is not finite, a
            non-string key, an integer beyond 64 bits, ...), or is longer than
            ``max_bytes``.
    """
    try:
        body = orjson.dumps(message, option=_SORTED, default=_plain)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise FrameError("malformed", f"the message has no JSON form ({exc})") from None
    if len(body) > max_bytes:
        raise FrameError("oversized", f"{len(body)} bytes, more than the {max_bytes} allowed")
    return _HEADER.pack(len(body)) + body


def read_frame(
    sock: socket.socket, *, max_bytes: int = MAX_FRAME_BYTES, deadline_ns: int | None = None
) -> Mapping[str, Any] | None:
    """Read one frame from ``sock`` and parse it; None when the peer closed between frames.

    Args:
        sock: a connected stream socket.
        max_bytes: the largest body accepted.
        deadline_ns: a `time.monotonic_ns` instant by which the whole frame
            must have arrived (`TimeoutError` otherwise); None: wait as long
            as the socket's own timeout allows.

    Raises:
        FrameError: the peer closed inside a frame, the frame is longer than
            ``max_bytes`` (its body is not read), or is not a strict JSON object.
        OSError: the socket failed.
    """
    header = _read_exactly(sock, _HEADER.size, at_start=True, deadline_ns=deadline_ns)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    if length > max_bytes:
        raise FrameError(
            "oversized", f"a frame of {length} bytes, more than the {max_bytes} allowed"
        )
    body = _read_exactly(sock, length, at_start=False, deadline_ns=deadline_ns)
    assert body is not None  # only a read at a frame boundary ends in None
    message, problem = parse_record(body)
    if message is None:
        raise FrameError("malformed", problem or "not a JSON object")
    return message


def _read_exactly(
    sock: socket.socket, size: int, *, at_start: bool, deadline_ns: int | None
) -> bytes | None:
    if size == 0:
        return b""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        if deadline_ns is not None:
            left_ns = deadline_ns - time.monotonic_ns()
            if left_ns <= 0:
                raise TimeoutError(f"the deadline passed {got} bytes into a {size}-byte read")
            sock.settimeout(left_ns / 1e9)
        count = sock.recv_into(view[got:])
        if count == 0:
            if at_start and got == 0:
                return None
            raise FrameError("eof", f"the connection closed {got} bytes into a {size}-byte read")
        got += count
    return bytes(buffer)
