"""Names of JSON value types, for error messages about records and reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["JSON_TYPE_NAMES", "json_type_name"]

JSON_TYPE_NAMES: Final[Mapping[type, str]] = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}
"""How a message names a value of each type `json.loads` produces."""


def json_type_name(value: object) -> str:
    """Return how a message names the JSON type of ``value`` (``"null"``, ``"a string"``, ...)."""
    if value is None:
        return "null"
    return JSON_TYPE_NAMES.get(type(value), f"a {type(value).__name__}")
