"""Strict JSON for stored records: an object, UTF-8, no duplicate keys, no NaN.

Python's `json.loads` accepts ``NaN`` and keeps the last of two equal keys;
neither belongs in an audit record, where an ambiguous object could be read
two ways by two tools. Parsing never raises: it returns the problem instead.

Two paths, one answer (ADR 0026). The strict parser (`runtime.loads_strict`)
calls back into Python for every object, which is most of what reading a
record costs. ghost writes every record compact with sorted keys, so the
fast path parses with orjson and accepts its value only when orjson writes
that value back, sorted, as exactly the stored bytes. Then the bytes are
orjson's own output for that value: UTF-8, each key once per object (a
duplicate would be missing from the output), no ``NaN`` (orjson writes null),
and every number in the round-trip form Python reads back to the same
`int` or `float` (orjson reads an integer beyond 64 bits as a float, which
it writes back differently, so such bytes fail the test). So the strict
parser would accept the same bytes and build an equal value of the same
types. Anything else -- a record stored otherwise, or bytes orjson refuses
(a lone surrogate, a byte-order mark, deep nesting) -- takes the strict
parser, which decides as it always has. A hypothesis test holds the two
paths to the same result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import orjson

from runtime import StrictJSONError, loads_strict

__all__ = ["parse_record"]

_loads = orjson.loads
_dumps = orjson.dumps
_SORTED: Final = orjson.OPT_SORT_KEYS


def parse_record(data: bytes) -> tuple[Mapping[str, Any] | None, str | None]:
    """Parse stored message bytes as a strict JSON object.

    Strict: UTF-8 only, no duplicate keys, no ``NaN``/``Infinity``.

    Returns:
        ``(record, None)`` with a read-only mapping, or ``(None, problem)``.
    """
    fast = _compact(data)
    if fast is not None:
        return MappingProxyType(fast), None
    return _parse_strictly(data)


def _parse_strictly(data: bytes) -> tuple[Mapping[str, Any] | None, str | None]:
    """The strict parser's answer, which the fast path must equal (see the module docstring)."""
    try:
        value = loads_strict(data)
    except StrictJSONError as exc:
        return None, f"the message is not strict JSON: {exc}"
    except json.JSONDecodeError as exc:
        return None, f"the message is not valid JSON ({exc.msg} at offset {exc.pos})"
    except (ValueError, RecursionError) as exc:
        return None, f"the message cannot be parsed as JSON ({type(exc).__name__})"
    if not isinstance(value, dict):
        return None, f"the message is JSON {_json_kind(value)}, not an object"
    return MappingProxyType(value), None


def _compact(data: bytes) -> dict[str, Any] | None:
    """The object ``data`` holds, when ``data`` is orjson's sorted bytes for it; else None."""
    try:
        value = _loads(data)
        if type(value) is not dict or _dumps(value, option=_SORTED) != data:
            return None
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
        return None
    return value


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
