"""A rule's ``when`` conditions: operators on argument values, compiled once.

``when = { amount = { gt = 50 }, "to.domain" = { ne = "example.com" } }``:
every operator of every key must hold for the rule to match. Keys are dotted
paths into the arguments (through nested objects only).

A missing path makes every operator false except ``exists = false``. A value
of the wrong type for its operator (``gt`` on a string, ``match`` on a number)
is not "false": it raises `ConditionTypeError`, which the gate turns into
``deny`` (ADR 0002, fail closed), so that an approval rule cannot be sidestepped
by sending ``"amount": "5000"`` instead of ``5000``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["MISSING", "OPERATORS", "Condition", "ConditionTypeError", "lookup", "strict_equal"]

MISSING: Final = object()
"""What `lookup` returns for a path that is not in the arguments."""

OPERATORS: Final = frozenset(
    {"eq", "ne", "in", "gt", "ge", "lt", "le", "prefix", "match", "exists"}
)


class ConditionTypeError(TypeError):
    """An argument's type does not fit a condition's operator (the gate denies)."""


def lookup(args: Mapping[str, Any], path: tuple[str, ...]) -> object:
    """Return the value at a dotted ``path`` in ``args``, or a private sentinel when absent."""
    value: object = args
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return MISSING
        value = value[key]
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def strict_equal(a: object, b: object, *, numbers_by_value: bool = True, depth: int = 0) -> bool:
    """Equality without Python's coercions: ``True != 1``, ``"1" != 1``.

    Args:
        a, b: the values.
        numbers_by_value: whether ``1 == 1.0`` (conditions: yes; deciding
            whether narrowing changed the arguments: no, that is a change).
        depth: recursion depth so far.

    Raises:
        ConditionTypeError: the values nest deeper than 64 levels.
    """
    if depth > 64:
        raise ConditionTypeError("value nests too deeply to compare")
    if numbers_by_value and _is_number(a) and _is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, Mapping):
        assert isinstance(b, Mapping)
        return a.keys() == b.keys() and all(
            strict_equal(a[k], b[k], numbers_by_value=numbers_by_value, depth=depth + 1) for k in a
        )
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(
            strict_equal(x, y, numbers_by_value=numbers_by_value, depth=depth + 1)
            for x, y in zip(a, b, strict=True)
        )
    return a == b


def _number(value: object, op: str) -> float | int:
    if not _is_number(value):
        raise ConditionTypeError(f"operator {op!r} needs a number")
    assert isinstance(value, int | float)
    return value


def _text(value: object, op: str) -> str:
    if not isinstance(value, str):
        raise ConditionTypeError(f"operator {op!r} needs a string")
    return value


def _make_test(op: str, operand: Any) -> Callable[[object], bool]:
    if op == "eq":
        return lambda v: strict_equal(v, operand)
    if op == "ne":
        return lambda v: not strict_equal(v, operand)
    if op == "in":
        return lambda v: any(strict_equal(v, item) for item in operand)
    if op == "gt":
        return lambda v: _number(v, op) > operand
    if op == "ge":
        return lambda v: _number(v, op) >= operand
    if op == "lt":
        return lambda v: _number(v, op) < operand
    if op == "le":
        return lambda v: _number(v, op) <= operand
    if op == "prefix":
        return lambda v: _text(v, op).startswith(operand)
    if op == "match":
        regex = re.compile(operand)
        return lambda v: regex.search(_text(v, op)) is not None
    raise ValueError(f"unknown operator {op!r}")  # the policy loader checked; unreachable


@dataclass(frozen=True, slots=True)
class Condition:
    """One ``path = { op = operand }`` entry: every operator must hold.

    Attributes:
        path: the dotted argument path, split.
        operators: ``(op, operand)`` pairs as written.
    """

    path: tuple[str, ...]
    operators: tuple[tuple[str, Any], ...]
    _tests: tuple[Callable[[object], bool], ...] = field(init=False, repr=False, compare=False)
    _exists: bool | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exists = next((bool(v) for op, v in self.operators if op == "exists"), None)
        tests = tuple(_make_test(op, v) for op, v in self.operators if op != "exists")
        object.__setattr__(self, "_exists", exists)
        object.__setattr__(self, "_tests", tests)

    def holds(self, args: Mapping[str, Any]) -> bool:
        """Whether the condition holds for ``args``.

        Raises:
            ConditionTypeError: the value's type does not fit an operator.
        """
        value = lookup(args, self.path)
        if value is MISSING:
            return self._exists is False
        if self._exists is False:
            return False
        return all(test(value) for test in self._tests)
