"""Check a record against its ghost schema, without a JSON Schema dependency.

ghost's schemas (`audit._schemas`) use a small subset of JSON Schema 2020-12:
``type`` (a name or a list), ``const``, ``enum``, ``pattern``, ``minimum``,
``maximum``, ``properties``, ``required``, ``additionalProperties: false``,
``items`` and ``anyOf``. This module checks exactly that subset, which keeps
the SDK free of a validator dependency; a test asserts that the schemas use no
other keyword, so this checker cannot silently ignore one.

JSON's types map onto Python's strictly: ``integer`` is an `int` that is not a
`bool`, and a `float` is never an integer (records hold no floats).

Patterns are ECMA-262 regular expressions, searched (not anchored) as JSON
Schema says. One difference from Python's `re` matters: ECMA's ``$`` matches
only at the very end of the text, Python's also before a final newline, so a
hash with a trailing ``\n`` would pass ``^[0-9a-f]{64}$``. A closing ``$``
is therefore compiled as ``\\Z``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any, Final

from audit._schemas import SCHEMAS

__all__ = ["SUPPORTED_KEYWORDS", "compiled_pattern", "schema_problems"]

SUPPORTED_KEYWORDS: Final = frozenset(
    {
        "$schema",
        "title",
        "description",
        "type",
        "const",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
    }
)
"""The JSON Schema keywords `schema_problems` understands."""

_MAX_PROBLEMS: Final = 20


def schema_problems(record: Mapping[str, Any]) -> tuple[str, ...]:
    """Return why ``record`` does not match the ghost schema its ``schema`` field names.

    Args:
        record: a parsed record (any mapping; nested values as `json.loads` makes them).

    Returns:
        Human-readable problems, each naming the JSON path (``$.stage_ns.policy``);
        empty when the record is valid. At most 20 are listed.
    """
    name = record.get("schema")
    if not isinstance(name, str):
        return ("$.schema: missing, or not a string",)
    schema = SCHEMAS.get(name)
    if schema is None:
        return (f"$.schema: {name!r} is not a ghost record schema",)
    problems: list[str] = []
    _check(record, schema, "$", problems)
    return tuple(problems[:_MAX_PROBLEMS])


def _type_matches(value: object, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list | tuple)
    if name == "object":
        return isinstance(value, Mapping)
    return False


@cache
def compiled_pattern(pattern: str) -> re.Pattern[str]:
    """Return a schema ``pattern`` compiled as ECMA-262 reads it (a closing ``$`` as ``\\Z``)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return re.compile(pattern)


def _describe(value: object) -> str:
    # Never echo a value: a record may hold text an operator should not see in an error.
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "an array"
    return f"a {type(value).__name__}"


def _check(value: object, schema: Mapping[str, Any], path: str, problems: list[str]) -> None:
    if len(problems) >= _MAX_PROBLEMS:
        return
    if "anyOf" in schema:
        branches: Sequence[Mapping[str, Any]] = schema["anyOf"]
        if not any(_valid(value, branch, path) for branch in branches):
            problems.append(f"{path}: {_describe(value)} matches none of the allowed forms")
        return
    if "type" in schema:
        names = schema["type"]
        names = (names,) if isinstance(names, str) else tuple(names)
        if not any(_type_matches(value, name) for name in names):
            problems.append(f"{path}: expected {' or '.join(names)}, got {_describe(value)}")
            return
    if "const" in schema and not _same(value, schema["const"]):
        problems.append(f"{path}: must be {schema['const']!r}")
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        options = ", ".join(repr(option) for option in schema["enum"])
        problems.append(f"{path}: must be one of {options}")
    if (
        isinstance(value, str)
        and "pattern" in schema
        and not compiled_pattern(schema["pattern"]).search(value)
    ):
        problems.append(f"{path}: does not match the pattern {schema['pattern']}")
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{path}: must be at most {schema['maximum']}")
    if isinstance(value, Mapping):
        _check_object(value, schema, path, problems)
    if isinstance(value, list | tuple) and "items" in schema:
        for index, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{index}]", problems)


def _check_object(
    value: Mapping[Any, Any], schema: Mapping[str, Any], path: str, problems: list[str]
) -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    problems.extend(
        f"{path}: missing field {key!r}" for key in schema.get("required", ()) if key not in value
    )
    for key, item in value.items():
        if key in properties:
            _check(item, properties[key], f"{path}.{key}", problems)
        elif schema.get("additionalProperties", True) is False:
            problems.append(f"{path}: unexpected field {key!r}")


def _valid(value: object, schema: Mapping[str, Any], path: str) -> bool:
    found: list[str] = []
    _check(value, schema, path, found)
    return not found


def _same(value: object, expected: object) -> bool:
    # JSON equality: true is not 1, and 1 is not true.
    return type(value) is type(expected) and value == expected
