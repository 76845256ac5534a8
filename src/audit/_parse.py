"""Strict JSON for stored records: an object, UTF-8, no duplicate keys, no NaN.

Python's `json.loads` accepts ``NaN`` and keeps the last of two equal keys;
neither belongs in an audit record, where an ambiguous object could be read
two ways by two tools. Parsing never raises: it returns the problem instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from runtime import StrictJSONError, loads_strict

__all__ = ["parse_record"]


def parse_record(data: bytes) -> tuple[Mapping[str, Any] | None, str | None]:
    """Parse stored message bytes as a strict JSON object.

    Strict: UTF-8 only, no duplicate keys, no ``NaN``/``Infinity``.

    Returns:
        ``(record, None)`` with a read-only mapping, or ``(None, problem)``.
    """
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
