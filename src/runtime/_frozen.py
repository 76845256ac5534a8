"""Policy values: copied once on load, frozen while held, thawed fresh for each use.

A loaded `Policy` must not change when the mapping it was built from does
(SPEC §4), and the arguments a decision hands back must not share an object
with the policy (a caller mutating ``decision.args`` would rewrite a
``narrow.set`` value for every later call). So:

* `plain_copy` copies the caller's data first, before anything reads it:
  every mapping becomes a new ``dict`` with ``str`` keys, every list or tuple
  a new ``list``, and ``str``/``int``/``float`` subclasses (an ``Enum`` member)
  their base type. Other leaves are kept for the loader to reject by field.
* `freeze` turns a plain value into one nothing can mutate: tuples and
  read-only mappings over private dicts.
* `thaw` builds a fresh plain value from a frozen one, on every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from runtime._errors import PolicyError

__all__ = ["MAX_POLICY_DEPTH", "freeze", "plain_copy", "thaw"]

MAX_POLICY_DEPTH: Final = 64
"""Deepest nesting a policy document may have (a cycle ends here too)."""


def plain_copy(value: object, *, origin: str, where: str = "", depth: int = 0) -> Any:
    """Return a deep copy of policy data as plain ``dict``/``list``/scalars.

    Args:
        value: the caller's data.
        origin: the policy's source, for errors.
        where: the location so far, for errors (``rules[0].when``).
        depth: the nesting so far.

    Raises:
        PolicyError: a key is not a string, or the data nests deeper than
            `MAX_POLICY_DEPTH` (or is cyclic).
    """
    if depth > MAX_POLICY_DEPTH:
        raise PolicyError(
            f"nests deeper than {MAX_POLICY_DEPTH} levels (or is cyclic)",
            source=origin,
            field=where or None,
        )
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PolicyError(
                    f"a key of type {type(key).__name__} is not allowed (keys are strings)",
                    source=origin,
                    field=where or None,
                )
            name = str.__str__(key)
            inner = f"{where}.{name}" if where else name
            out[name] = plain_copy(item, origin=origin, where=inner, depth=depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [
            plain_copy(item, origin=origin, where=f"{where}[{index}]", depth=depth + 1)
            for index, item in enumerate(value)
        ]
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    return value


def freeze(value: object) -> Any:
    """Return an immutable copy of a plain value (tuples, read-only mappings)."""
    if isinstance(value, dict):
        return MappingProxyType({key: freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(freeze(item) for item in value)
    return value


def thaw(value: object) -> Any:
    """Return a fresh plain value (new ``dict``/``list`` objects) from a frozen one."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value
