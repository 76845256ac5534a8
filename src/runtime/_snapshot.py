"""The action snapshot: the plain data the gate decides on, taken first (SPEC §3, ADR 0008).

Before anything else, `Gate.check` copies the action into plain built-in data,
and from then on matching, narrowing, scrubbing, hashing and ``decision.args``
see that copy and nothing else. So an argument object that answers
differently on a second read, a subclass that overrides ``__eq__``,
``__iter__`` or ``items``, or a caller that mutates its arguments after
``check`` returns cannot change what was decided, what was hashed, or what runs.

What the snapshot holds, and how each value gets there:

* ``agent``, ``verb``, ``resource``: exact ``str`` of at most ``max_name_chars``
  characters (4,096 by default), valid Unicode, with no control character
  (C0, DEL, C1) and no bidirectional override or isolate (they make a name
  read differently in a log than it matches). Anything else is
  `InvalidAction`.
* ``args``: a ``dict`` with ``str`` keys, whose values are, recursively,
  ``dict`` (``str`` keys only), ``list``, ``str`` (valid Unicode), ``bytes``,
  ``int`` (at most `MAX_INT_DIGITS` decimal digits), finite ``float``,
  ``bool`` and ``None``. A subclass of one of these is converted to its base
  type through the base type's own methods (``dict.items``, ``str.__str__``,
  ...), so none of its overrides runs; a ``tuple`` becomes a ``list``.
  Anything else -- a dataclass, an Enum that is not a str or int subclass, a
  set, a generator, a view, a memoryview, a non-``str`` key, NaN or ±inf --
  is `UnsupportedValue`, naming its type and where it was, unless the host
  passed ``to_data``: then ``to_data(value)`` is called once for that value
  and its result must be plain data (it is snapshotted in turn, without a
  second call to ``to_data``).
* Bounds, as the scrubber's (the policy's ``[scrub]`` table): containers
  nest at most ``max_depth`` deep (the arguments themselves are depth 0; a
  cycle is infinitely deep), and the whole costs at most ``max_bytes``: one
  per value, plus the UTF-8 length of every string and key, the length of
  every bytes value, 8 for a float, and for an integer an upper bound of its
  digit count read off its bit length, one more than ``floor(bits * 0.30103)``
  (so never converting it to text). Exceeding either
  is `SnapshotLimitExceeded`, before the rest is copied.

Every mutable container in the snapshot is a new object; immutable leaves
(``str``, ``bytes``, numbers) may be the caller's own objects, which nobody
can change. All errors are `EvaluationError`s: the gate records a ``deny``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from runtime._errors import EvaluationError, UnsupportedValue
from runtime._recorded import type_name

__all__ = [
    "MAX_INT_DIGITS",
    "ActionSnapshot",
    "InvalidAction",
    "SnapshotLimitExceeded",
    "Snapshotter",
    "ToData",
]

MAX_INT_DIGITS: Final = 4300
"""Longest integer accepted, in decimal digits: Python's own int/str conversion limit."""

# An integer of more than this many bits may have more than MAX_INT_DIGITS digits;
# below it, int.__repr__ cannot fail, so the exact digit count is computed only rarely.
_INT_BITS_FAST: Final = 14_000
_INT_LIMIT: Final = 10**MAX_INT_DIGITS

# C0 controls, DEL, C1 controls, lone surrogates, bidi embeddings/overrides/isolates.
_FORBIDDEN_IN_NAMES: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]"
)

ToData = Callable[[object], object]
"""A host's converter from its own argument types to plain data."""


class InvalidAction(EvaluationError, TypeError):
    """An action's agent, verb or resource is not an acceptable name (the gate denies it).

    Attributes:
        field: ``"agent"``, ``"verb"``, ``"resource"``, ``"args"``, or ``"action"``.
        problem: what is wrong, without the offending text.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"action {field} {problem}")


class SnapshotLimitExceeded(EvaluationError, ValueError):
    """The arguments nest too deeply (or are cyclic) or are too large to decide on.

    Attributes:
        bound: ``"max_depth"`` or ``"max_bytes"``.
        limit: the configured limit that was exceeded.
    """

    def __init__(self, bound: Literal["max_depth", "max_bytes"], limit: int) -> None:
        self.bound = bound
        self.limit = limit
        if bound == "max_depth":
            what = f"nest deeper than max_depth {limit} (or are cyclic)"
        else:
            what = f"exceed max_bytes {limit} (UTF-8 bytes of text, plus one per value)"
        super().__init__(f"the arguments {what}; the gate cannot decide on them")


@dataclass(frozen=True, slots=True)
class ActionSnapshot:
    """An action as plain data: what every stage of a check sees.

    Attributes:
        agent, verb, resource: validated names (exact ``str``).
        args: the arguments as fresh plain data.
    """

    agent: str
    verb: str
    resource: str
    args: dict[str, Any]


class Snapshotter:
    """Takes snapshots under one gate's bounds; built once per gate.

    Args:
        max_name_chars: the longest agent, verb or resource accepted.
        max_depth: the deepest container nesting accepted (arguments are depth 0).
        max_bytes: the size budget (see the module docstring).
        to_data: the host's converter for values that are not plain data, or None.

    Raises:
        ValueError: a bound is not a positive integer.
    """

    __slots__ = ("_max_bytes", "_max_depth", "_max_name_chars", "_to_data")

    def __init__(
        self,
        *,
        max_name_chars: int = 4096,
        max_depth: int = 32,
        max_bytes: int = 1 << 20,
        to_data: ToData | None = None,
    ) -> None:
        for name, value in (
            ("max_name_chars", max_name_chars),
            ("max_depth", max_depth),
            ("max_bytes", max_bytes),
        ):
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if to_data is not None and not callable(to_data):
            raise TypeError("to_data must be callable")
        self._max_name_chars = max_name_chars
        self._max_depth = max_depth
        self._max_bytes = max_bytes
        self._to_data = to_data

    def name(self, field: str, value: object) -> str:
        """Return ``value`` as a validated exact ``str`` name.

        Raises:
            InvalidAction: not a string, too long, or holding a forbidden character.
        """
        if not isinstance(value, str):
            raise InvalidAction(field, f"must be a string, not {type_name(value)}")
        text = str.__str__(value)
        if len(text) > self._max_name_chars:
            raise InvalidAction(
                field, f"is {len(text)} characters long; at most {self._max_name_chars} are allowed"
            )
        found = _FORBIDDEN_IN_NAMES.search(text)
        if found is not None:
            code = ord(found.group())
            kind = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "a control character"
            raise InvalidAction(field, f"holds {kind} (U+{code:04X}) at index {found.start()}")
        return text

    def take(self, agent: object, verb: object, resource: object, args: object) -> ActionSnapshot:
        """Snapshot one action's fields (see the module docstring for the rules).

        Safe to call from several threads at once: each call has its own walk state.

        Raises:
            InvalidAction: a name is unacceptable, or ``args`` is not a dict.
            UnsupportedValue: an argument value is not plain data.
            SnapshotLimitExceeded: the arguments are too deep or too large.
        """
        agent_text = self.name("agent", agent)
        verb_text = self.name("verb", verb)
        resource_text = self.name("resource", resource)
        if not isinstance(args, dict) and self._to_data is None:
            raise InvalidAction(
                "args",
                f"must be a dict, not {type_name(args)} (a host can convert its own"
                " types with Gate(to_data=...))",
            )
        walk = _Walk(self._max_depth, self._max_bytes, self._to_data)
        try:
            plain = walk.value(args, 0)
        except _Reject as reject:
            raise reject.error() from None
        if type(plain) is not dict:
            raise InvalidAction("args", f"must be a dict, not {type_name(plain)}")
        return ActionSnapshot(agent_text, verb_text, resource_text, plain)


class _Reject(Exception):
    """An unsupported value on its way up the walk, collecting its path as it goes."""

    def __init__(self, type_name: str, problem: str | None) -> None:
        self.type_name = type_name
        self.problem = problem
        self.segments: list[str] = []  # innermost first

    def error(self) -> UnsupportedValue:
        return UnsupportedValue(
            self.type_name, "$" + "".join(reversed(self.segments)), self.problem
        )


class _Walk:
    """The state of one snapshot: its bounds, the remaining budget, the host's converter."""

    __slots__ = ("budget", "max_bytes", "max_depth", "to_data")

    def __init__(self, max_depth: int, max_bytes: int, to_data: ToData | None) -> None:
        self.max_depth = max_depth
        self.max_bytes = max_bytes
        self.budget = max_bytes
        self.to_data = to_data

    def spend(self, cost: int) -> None:
        self.budget -= cost
        if self.budget < 0:
            raise SnapshotLimitExceeded("max_bytes", self.max_bytes)

    def value(self, value: object, depth: int) -> Any:
        # Exact types first: they are nearly everything, and need no conversion.
        kind = type(value)
        if kind is str:
            return self.text(value)  # type: ignore[arg-type]
        if kind is int:
            return self.integer(value)  # type: ignore[arg-type]
        if value is None or kind is bool:
            self.spend(1)
            return value
        if kind is float:
            return self.number(value)  # type: ignore[arg-type]
        if kind is dict:
            return self.mapping(value, depth)  # type: ignore[arg-type]
        if kind is list or kind is tuple:
            return self.sequence(value, depth)  # type: ignore[arg-type]
        if kind is bytes:
            self.spend(1 + len(value))  # type: ignore[arg-type]
            return value
        return self.other(value, depth)

    def other(self, value: object, depth: int) -> Any:
        # Subclasses of plain types: the base type's value, read through the base
        # type's own methods, so that no override runs.
        if isinstance(value, str):
            return self.text(str.__str__(value))
        if isinstance(value, int):  # bool cannot be subclassed: bool was handled
            return self.integer(int.__int__(value))
        if isinstance(value, float):
            return self.number(float.__float__(value))
        if isinstance(value, dict):
            return self.mapping(value, depth)
        if isinstance(value, list | tuple):
            return self.sequence(value, depth)
        if isinstance(value, bytes):
            plain = bytes.__getitem__(value, slice(None))
            self.spend(1 + len(plain))
            return plain
        if self.to_data is not None:
            converted = self.to_data(value)
            # The converter runs once per value: what it returns must be plain data.
            if not isinstance(converted, _PLAIN):
                raise _Reject(
                    type_name(converted),
                    f"what to_data returned for a {type_name(value)}:"
                    f" a {type_name(converted)}, which is not plain data",
                )
            return self.value(converted, depth)
        raise _Reject(type_name(value), None)

    def text(self, value: str) -> str:
        if value.isascii():
            self.spend(1 + len(value))
            return value
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise _Reject(
                "str", f"a string with a lone surrogate at index {exc.start} (not Unicode text)"
            ) from None
        self.spend(1 + size)
        return value

    def integer(self, value: int) -> int:
        bits = value.bit_length()
        # Compared, never converted: a host may have lifted Python's own int/str
        # conversion limit, and converting a huge integer is quadratic.
        if bits > _INT_BITS_FAST and abs(value) >= _INT_LIMIT:
            raise _Reject("int", f"an integer of more than {MAX_INT_DIGITS} digits")
        self.spend(2 + (bits * 30103) // 100_000)  # one per value, plus its digit count
        return value

    def number(self, value: float) -> float:
        if not math.isfinite(value):
            what = "NaN" if math.isnan(value) else "an infinite float"
            raise _Reject("float", f"{what} (floats must be finite)")
        self.spend(1 + 8)
        return value

    def mapping(self, value: dict[Any, Any], depth: int) -> dict[str, Any]:
        if depth > self.max_depth:
            raise SnapshotLimitExceeded("max_depth", self.max_depth)
        self.spend(1)
        out: dict[str, Any] = {}
        for index, (key, item) in enumerate(dict.items(value)):
            try:
                if type(key) is not str:
                    if not isinstance(key, str):
                        name = type_name(key)
                        raise _Reject(name, f"a key of type {name} (keys must be strings)")
                    key = str.__str__(key)
                key = self.text(key)
                if key in out:
                    # Two subclass keys that differ as objects but not as text: which
                    # one a tool would see is anyone's guess, so neither is decided on.
                    raise _Reject("str", "a key whose text repeats another key of the same dict")
            except _Reject as reject:
                reject.segments.append(f"{{key #{index}}}")
                raise
            try:
                out[key] = self.value(item, depth + 1)
            except _Reject as reject:
                reject.segments.append(_key_segment(key))
                raise
        return out

    def sequence(self, value: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
        if depth > self.max_depth:
            raise SnapshotLimitExceeded("max_depth", self.max_depth)
        items = list.copy(value) if isinstance(value, list) else list(tuple.__iter__(value))
        self.spend(1)
        index = 0
        try:
            for index, item in enumerate(items):
                items[index] = self.value(item, depth + 1)
        except _Reject as reject:
            reject.segments.append(f"[{index}]")
            raise
        return items


# What `to_data` may return: plain values, or containers whose items are checked in turn.
_PLAIN: Final = (str, int, float, dict, list, tuple, bytes, type(None))

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _key_segment(key: str) -> str:
    # The path names where an unsupported value was; the gate scrubs and escapes
    # it before recording, and long keys are shortened.
    if _IDENTIFIER.fullmatch(key):
        return f".{key}"
    shown = key if len(key) <= 64 else key[:61] + "..."
    return '["' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"]'
