"""A rule's ``when`` conditions: compiled once, evaluated fail-closed (SPEC §4, ADR 0009).

``when = { amount = { gt = 50 }, "to.domain" = { ne = "example.com" } }``:
every operator of every key must hold for the rule to match. Keys are dotted
paths into the arguments, through dicts only. A condition never quietly says
"does not apply" when it cannot tell:

1. A path is looked up through dicts. A step that meets anything else (a list,
   a string, a number) raises `ConditionError`: wrapping ``amount`` in a list
   must not sidestep an approval rule.
2. An absent path (a dict along it lacks the key) raises `ConditionError` too,
   unless the condition uses ``exists``, the way to test presence:
   ``exists = true`` holds when the path is present (a null value is present),
   and with other operators beside it an absent path makes the condition false
   — the author wrote "if present". ``exists = false`` holds when the path is
   absent, and stands alone. Under ``exists`` too, a path through a non-dict
   is an error: the arguments do not have the shape the policy expects.
3. Each operator takes one kind of value; another kind raises `ConditionTypeError`:

   * ``gt ge lt le``: a finite number (``int`` or ``float``; a ``bool`` is not a
     number; NaN and infinities are errors, never "false");
   * ``eq ne``: a value of the operand's kind — number, string, boolean, list
     or dict — compared strictly (``1 == 1.0``; ``True != 1``): ``"5000"``
     against ``eq = 5000`` is an error, not "not equal";
   * ``in``: a value of the kind of one of its candidates;
   * ``prefix``, ``match``: a string (``bytes`` are not text); ``match`` is an
     unanchored RE2 search, linear in the text.

Only exact built-in types count (the gate's snapshot produces nothing else);
anything else is an error of its own, named by kind, never by its text.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from runtime._errors import ConditionError, ConditionTypeError
from runtime._frozen import thaw
from runtime._re2 import Regex

__all__ = [
    "MISSING",
    "OPERATORS",
    "Condition",
    "ConditionError",
    "ConditionTypeError",
    "PathBlocked",
    "kind_of",
    "lookup",
    "strict_equal",
]

MISSING: Final = object()
"""What `lookup` returns for a path that is not in the arguments."""

OPERATORS: Final = frozenset(
    {"eq", "ne", "in", "gt", "ge", "lt", "le", "prefix", "match", "exists"}
)

_ORDERINGS: Final[Mapping[str, Callable[[Any, Any], bool]]] = {
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
}

_KINDS: Final[Mapping[type, str]] = {
    bool: "boolean",
    int: "number",
    float: "number",
    str: "string",
    bytes: "bytes value",
    list: "list",
    dict: "dict",
    type(None): "null",
}


def kind_of(value: object) -> str:
    """The kind of a plain value, as messages name it (never its text)."""
    return _KINDS.get(type(value), "value of an unsupported type")


class PathBlocked(Exception):
    """`lookup` met something other than a dict at ``depth`` (0: the arguments themselves)."""

    def __init__(self, depth: int, kind: str) -> None:
        self.depth = depth
        self.kind = kind
        super().__init__(depth, kind)

    def problem(self, path: tuple[str, ...]) -> str:
        """The phrase an error names it by: where the path was blocked, and by what kind."""
        if self.depth == 0:
            return f"the arguments are a {self.kind}, not a dict"
        return f"runs through a {self.kind} at {'.'.join(path[: self.depth])!r}"


def lookup(args: object, path: tuple[str, ...]) -> object:
    """Return the value at ``path`` in ``args``, or `MISSING` when a dict on the way lacks a key.

    Raises:
        PathBlocked: a step of the path meets something other than a ``dict``.
    """
    value = args
    for depth, key in enumerate(path):
        if type(value) is not dict:
            raise PathBlocked(depth, kind_of(value))
        if key not in value:
            return MISSING
        value = value[key]
    return value


def _is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def strict_equal(a: object, b: object, *, numbers_by_value: bool = True) -> bool:
    """Equality without Python's coercions: ``True != 1``, ``"1" != 1``, ``[1] != (1,)``.

    Recursion goes only as deep as both values nest alike, so it is bounded by
    the shallower one (a policy operand is at most `MAX_POLICY_DEPTH` deep).

    Args:
        a, b: the values.
        numbers_by_value: whether ``1 == 1.0`` (conditions: yes; deciding
            whether narrowing changed the arguments: no, that is a change).
    """
    if numbers_by_value and _is_number(a) and _is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(
            strict_equal(a[k], b[k], numbers_by_value=numbers_by_value) for k in a
        )
    if isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        return len(a) == len(b) and all(
            strict_equal(x, y, numbers_by_value=numbers_by_value) for x, y in zip(a, b, strict=True)
        )
    return a == b


@dataclass(frozen=True, slots=True)
class Condition:
    """One ``path = { op = operand, ... }`` entry of a rule's ``when``: every operator must hold.

    Attributes:
        rule: the id of the rule it belongs to (errors name it).
        path: the dotted argument path, split.
        operators: ``(op, operand)`` pairs as written, operands frozen.

    Raises (on construction):
        ValueError: an unknown operator, or an operand the operator cannot take
            (the policy loader checks first and names the field).
        RegexError: a ``match`` pattern RE2 cannot compile.
    """

    rule: str
    path: tuple[str, ...]
    operators: tuple[tuple[str, Any], ...]
    _tests: tuple[Callable[[object], bool], ...] = field(init=False, repr=False, compare=False)
    _exists: bool | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exists = next((v for op, v in self.operators if op == "exists"), None)
        if exists is not None and not isinstance(exists, bool):
            raise ValueError("exists needs true or false")
        tests = tuple(_make_test(self, op, v) for op, v in self.operators if op != "exists")
        if exists is False and tests:
            raise ValueError("exists = false cannot be combined with other operators")
        object.__setattr__(self, "_exists", exists)
        object.__setattr__(self, "_tests", tests)

    @property
    def dotted(self) -> str:
        """The path as the policy wrote it (``to.domain``)."""
        return ".".join(self.path)

    def holds(self, args: Mapping[str, Any]) -> bool:
        """Whether the condition holds for ``args`` (the snapshot's plain data).

        Raises:
            ConditionError: the path is missing (outside ``exists``) or runs
                through something other than a dict.
            ConditionTypeError: the value's kind does not fit an operator.
        """
        try:
            value = lookup(args, self.path)
        except PathBlocked as blocked:
            raise ConditionError(self.rule, self.dotted, blocked.problem(self.path)) from None
        if value is MISSING:
            if self._exists is None:
                raise ConditionError(
                    self.rule, self.dotted, "is missing (test presence with exists)"
                )
            return self._exists is False
        if self._exists is False:
            return False
        return all(test(value) for test in self._tests)

    def type_error(self, op: str, problem: str) -> ConditionTypeError:
        """The error for a value of the wrong kind under ``op``."""
        return ConditionTypeError(self.rule, self.dotted, problem, op)


def _finite_number(condition: Condition, op: str, value: object) -> float | int:
    if not _is_number(value):
        raise condition.type_error(op, f"needs a number, not a {kind_of(value)}")
    assert isinstance(value, int | float)
    if not math.isfinite(value):
        raise condition.type_error(op, "needs a finite number, not NaN or an infinity")
    return value


def _expect_kind(condition: Condition, op: str, value: object, kinds: frozenset[str]) -> None:
    kind = kind_of(value)
    if kind not in kinds:
        wanted = " or ".join(sorted(kinds))
        raise condition.type_error(op, f"needs a {wanted}, like its operand, not a {kind}")
    if kind == "number":
        _finite_number(condition, op, value)


def _text(condition: Condition, op: str, value: object) -> str:
    if type(value) is not str:
        raise condition.type_error(op, f"needs a string, not a {kind_of(value)}")
    return value


def _make_test(condition: Condition, op: str, frozen: Any) -> Callable[[object], bool]:
    """Compile one operator; the closures hold private plain copies of the operands."""
    operand = thaw(frozen)
    if op in _ORDERINGS:
        if not _is_number(operand) or not math.isfinite(operand):
            raise ValueError(f"{op} needs a finite number")
        compare = _ORDERINGS[op]

        def ordered(value: object) -> bool:
            return compare(_finite_number(condition, op, value), operand)

        return ordered
    if op in ("eq", "ne"):
        kinds = frozenset({kind_of(operand)})
        wanted = op == "eq"

        def equal(value: object) -> bool:
            _expect_kind(condition, op, value, kinds)
            return strict_equal(value, operand) is wanted

        return equal
    if op == "in":
        if not isinstance(operand, list) or not operand:
            raise ValueError("in needs a non-empty list")
        candidates = tuple(operand)
        kinds = frozenset(kind_of(item) for item in candidates)

        def member(value: object) -> bool:
            _expect_kind(condition, op, value, kinds)
            return any(strict_equal(value, item) for item in candidates)

        return member
    if op == "prefix":
        if not isinstance(operand, str):
            raise ValueError("prefix needs a string")

        def starts(value: object) -> bool:
            return _text(condition, op, value).startswith(operand)

        return starts
    if op == "match":
        if not isinstance(operand, str):
            raise ValueError("match needs a string")
        regex = Regex(operand)

        def search(value: object) -> bool:
            return regex.search(_utf8(condition, op, value))

        return search
    raise ValueError(f"unknown operator {op!r}")


def _utf8(condition: Condition, op: str, value: object) -> bytes:
    text = _text(condition, op, value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise condition.type_error(op, "needs valid Unicode text (a lone surrogate)") from None
