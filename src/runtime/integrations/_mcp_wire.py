"""The MCP gateway's wire: newline-delimited JSON-RPC over a byte stream (MCP stdio transport).

The gateway parses every message the client sends and forwards what it
parsed, re-encoded, never the bytes it received: a child whose JSON parser
reads a duplicated key differently (first wins where Python's last wins)
must see exactly the message the gate judged. Parsing is strict JSON (no
``NaN``/``Infinity`` literals, and no number too large for a float, such as
``1e400``: it would parse as infinity and could not be sent on) and bounded:
a line past the size limit is dropped unread, and nesting deep enough to
exhaust the parser is a parse error, not a crash. A parsed message nested
too deeply to be encoded again is `MalformedMessage` from `encode`, for the
relay to answer, never an exception that ends the session.
"""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any, Final

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "MalformedMessage",
    "encode",
    "error_response",
    "parse",
    "read_line",
    "tool_refusal",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INTERNAL_ERROR: Final = -32603
_JSONRPC: Final = "2.0"


class MalformedMessage(ValueError):
    """A line that is not one JSON-RPC message the gateway can judge; the message says why."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _OutOfRange(ValueError):
    """A JSON number a float cannot hold (it would be infinity)."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange
    return value


_DECODER: Final = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite_float)


def parse(line: bytes) -> Any:
    """Parse one line as strict JSON.

    Raises:
        MalformedMessage: not UTF-8, not JSON, a non-standard constant, a
            number out of a float's range, or nested past what the parser can
            follow.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessage("the message is not UTF-8") from None
    try:
        return _DECODER.decode(text.strip())
    except RecursionError:
        raise MalformedMessage("the message is nested too deeply") from None
    except _OutOfRange:
        raise MalformedMessage("the message holds a number out of range") from None
    except ValueError:  # JSONDecodeError, a NaN literal, an int past the digit limit
        raise MalformedMessage("the message is not JSON") from None


def encode(message: Any) -> bytes:
    """One message as a JSON line: compact UTF-8 (``\\u`` escapes for lone surrogates).

    Raises:
        MalformedMessage: the message cannot be encoded (nested too deeply
            for the encoder at this depth of the stack, which can be less than
            the parser's).
    """
    try:
        text = json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate came in escaped: send it escaped
            data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (RecursionError, ValueError, TypeError):
        raise MalformedMessage("the message is nested too deeply to relay") from None
    return data + b"\n"


def error_response(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response (``id`` null when the request's id is unknown)."""
    return {"jsonrpc": _JSONRPC, "id": request_id, "error": {"code": code, "message": message}}


def tool_refusal(request_id: Any, text: str) -> dict[str, Any]:
    """The response to a ``tools/call`` that does not run: a tool result with ``isError``.

    ``resultType`` is required on the 2026-07-28 wire and ignored by older peers.
    """
    return {
        "jsonrpc": _JSONRPC,
        "id": request_id,
        "result": {
            "content": [{"type": "text", "text": text}],
            "isError": True,
            "resultType": "complete",
        },
    }


async def read_line(reader: asyncio.StreamReader) -> bytes | None:
    """The next line of ``reader`` (its size bounded by the reader's limit).

    Returns:
        The line, or None when it was longer than the limit (it is skipped to
        its end, unread).

    Raises:
        EOFError: the stream ended.
    """
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            return exc.partial  # the last line, without its newline
        raise EOFError from None
    except asyncio.LimitOverrunError as exc:
        consumed = exc.consumed
    while True:  # drop the over-long line, a limit's worth at a time
        await reader.readexactly(consumed)
        try:
            await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            return None  # the stream ends inside it: the next read says so
        except asyncio.LimitOverrunError as exc:
            consumed = exc.consumed
            continue
        return None
