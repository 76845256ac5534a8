"""A rule's ``limit``: what it counts, per which key, over which window (ADR 0032).

``limit = { key = "agent", window_s = 3600, max_count = 20 }`` or
``limit = { key = ["agent", "args.currency"], window_s = 3600,
max_sum = "args.amount", sum_max = 500 }``. What this module holds, and may
not do:

1. **The terms**, validated once when the policy loads (`LimitSpec`): key
   parts are ``agent``, ``verb``, ``resource`` or ``args.<dotted path>``; the
   window a whole number of seconds; exactly one of ``max_count`` (a
   positive integer) or ``max_sum`` (an ``args.`` path) with ``sum_max``.
2. **The key of an action** (`LimitSpec.key_of`): the values of its key
   parts. A path that is missing or runs through a non-dict, or a value
   that is not a string, an integer or a boolean, raises `LimitError`: the
   action is denied, never counted under some other key.
3. **The amount of an action** (`LimitSpec.amount_of`), in micro-units (an
   exact integer: the budget never adds floats). An ``int`` counts as
   itself; a ``float`` as the decimal its shortest text spells (``0.1`` is
   ``0.1``, as the JSON said, not 0.1000000000000000055...). A bool, a
   string, NaN, a negative number, one above `MAX_AMOUNT`, or one with more
   than six decimal places raises `LimitError`, so no value counts as zero.

Pure: no clock, no I/O. The counting itself is `runtime._budget`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

from runtime._conditions import MISSING, PathBlocked, kind_of, lookup
from runtime._errors import LimitError

__all__ = [
    "MAX_AMOUNT",
    "MAX_WINDOW_S",
    "MICROS",
    "LimitSpec",
    "decimal_text",
    "micros_of",
]

MICROS: Final = 1_000_000
"""Amounts are counted in millionths: six decimal places, exactly."""
MAX_AMOUNT: Final = 10**12
"""The largest amount (and ``sum_max``) a budget counts, in whole units."""
MAX_WINDOW_S: Final = 366 * 24 * 3600
"""The longest window: a year (a counter store keeps every entry that long)."""
NAMES: Final = frozenset({"agent", "verb", "resource"})


@dataclass(frozen=True, slots=True)
class LimitSpec:
    """A rule's ``limit``: validated terms, with the key paths split once.

    Attributes:
        key: the key parts as the policy wrote them (``("agent", "args.currency")``).
        window_s: the sliding window, in whole seconds.
        max_count: for a count limit: how many actions a window may hold (else None).
        max_sum: for a sum limit: the ``args.`` path of the amount (else None).
        sum_max_micros: for a sum limit: the largest total a window may hold, in micro-units.
    """

    key: tuple[str, ...]
    window_s: int
    max_count: int | None = None
    max_sum: str | None = None
    sum_max_micros: int | None = None

    @property
    def window_ns(self) -> int:
        """The window in nanoseconds."""
        return self.window_s * 1_000_000_000

    @property
    def measure(self) -> str:
        """``"count"`` or ``"sum"``: what the limit adds up."""
        return "count" if self.max_count is not None else "sum"

    @property
    def maximum(self) -> int:
        """The most a window may hold: a count, or a sum in micro-units."""
        if self.max_count is not None:
            return self.max_count
        assert self.sum_max_micros is not None
        return self.sum_max_micros

    def key_of(
        self, rule: str, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[str | int | bool, ...]:
        """The values of the key parts for one action.

        Raises:
            LimitError: a key path is missing, runs through a non-dict, or holds
                a value that is not a string, an integer or a boolean.
        """
        names = {"agent": agent, "verb": verb, "resource": resource}
        values: list[str | int | bool] = []
        for part in self.key:
            if part in names:
                values.append(names[part])
                continue
            value = _at(rule, part, args)
            if type(value) not in (str, int, bool):
                raise LimitError(
                    rule, part, f"is a {kind_of(value)}; a key part is a string, integer or bool"
                )
            values.append(value)  # type: ignore[arg-type]  # checked just above
        return tuple(values)

    def amount_of(self, rule: str, args: Mapping[str, Any]) -> int:
        """The action's amount in micro-units: 1 for a count limit.

        Raises:
            LimitError: the amount is missing, or not an exact, finite,
                non-negative number of at most `MAX_AMOUNT` with at most six
                decimal places.
        """
        if self.max_sum is None:
            return 1
        value = _at(rule, self.max_sum, args)
        try:
            return micros_of(value)
        except ValueError as exc:
            raise LimitError(rule, self.max_sum, str(exc)) from None


def _at(rule: str, part: str, args: Mapping[str, Any]) -> object:
    path = tuple(part.split("."))[1:]  # the loader made sure it opens with "args."
    try:
        value = lookup(args, path)
    except PathBlocked as blocked:
        raise LimitError(rule, part, blocked.problem(path)) from None
    if value is MISSING:
        raise LimitError(rule, part, "is missing")
    return value


def micros_of(value: object) -> int:
    """An amount as an exact integer number of micro-units.

    Raises:
        ValueError: with a message that names the kind of the value, never the value.
    """
    kind = type(value)
    if kind is int:
        assert isinstance(value, int)
        _within_range(value)
        return value * MICROS
    if kind is not float:
        raise ValueError(f"is a {kind_of(value)}, not a number")
    assert isinstance(value, float)
    if not math.isfinite(value):
        raise ValueError("is not a finite number")
    exact = Decimal(repr(value))  # the shortest text that reads back as this float
    _within_range(exact)
    # Bounded and finite, so scaling is exact: no decimal signal can be raised here.
    scaled = exact.scaleb(6)
    if scaled != scaled.to_integral_value():
        raise ValueError("has more than six decimal places")
    return int(scaled)


def _within_range(exact: int | Decimal) -> None:
    if exact > MAX_AMOUNT:
        raise ValueError(f"is larger than {MAX_AMOUNT}, the most a budget counts")
    if exact < 0:
        raise ValueError("is negative; an amount spends, it never refunds a budget")


def decimal_text(micros: int) -> str:
    """Micro-units as the shortest decimal text (``1500000`` → ``"1.5"``), for the record."""
    sign = "-" if micros < 0 else ""
    whole, fraction = divmod(abs(micros), MICROS)
    if not fraction:
        return f"{sign}{whole}"
    return f"{sign}{whole}.{fraction:06d}".rstrip("0")
