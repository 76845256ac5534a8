"""A ``narrow`` rule's narrowings, applied copy-on-write to the arguments (SPEC §4, ADR 0009).

Applied in this order within a rule:

1. ``keep``: top-level argument keys not listed are dropped.
2. ``clamp``: a number above its bound is lowered to the bound. The value must
   be a finite ``int`` or ``float`` (a ``bool`` is not a number; NaN is an
   error, never "not above"); an absent path has nothing to clamp.
3. ``set``: the value is forced, as a fresh plain copy of the policy's value on
   every call, so decision arguments never share an object with the policy;
   missing dicts on the way are created.
4. ``within``: a string path is confined under a directory: relative paths
   are taken under it, ``.``/``..`` and repeated ``/`` resolved, and anything
   that resolves outside, or could be read differently (NUL, leading ``//`` or
   ``~``, backslash, percent-encoded or fullwidth dots and slashes: see
   `runtime._paths`), raises `NarrowingEscape`; an absent path has nothing to
   confine.

A path that runs through anything but a dict, or a value of the wrong type,
raises `NarrowingError` naming the rule and the path: the gate denies. The
input is never mutated: the dicts on a changed path are copied, the rest is
shared. Each change is reported as ``(kind, dotted path)``; a no-op (a value
already within bounds, already set to the same value of the same type) is
not a change, so that ``narrow`` means the arguments really differ (SPEC §3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime._conditions import MISSING, PathBlocked, kind_of, lookup, strict_equal
from runtime._errors import NarrowingError, NarrowingEscape
from runtime._frozen import thaw
from runtime._paths import PathProblem, check_prefix, confine_path

__all__ = ["Narrowing", "NarrowingError", "NarrowingEscape"]

Path = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Narrowing:
    """What one rule narrows. Paths are dotted argument paths, split.

    Attributes:
        keep: the top-level keys kept, or None to keep all.
        clamp: ``(path, bound)`` pairs; bounds are finite numbers.
        set: ``(path, value)`` pairs; values frozen.
        within: ``(path, prefix)`` pairs; prefixes canonical absolute paths.

    Raises (on construction):
        ValueError: a bound that is not a finite number, or a prefix that is
            not a canonical absolute path (the loader checks first, by field).
    """

    keep: tuple[str, ...] | None = None
    clamp: tuple[tuple[Path, int | float], ...] = ()
    set: tuple[tuple[Path, Any], ...] = ()
    within: tuple[tuple[Path, str], ...] = ()
    _keep: frozenset[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for _, bound in self.clamp:
            if type(bound) not in (int, float) or not math.isfinite(bound):
                raise ValueError("a clamp bound must be a finite number")
        for _, prefix in self.within:
            problem = check_prefix(prefix) if isinstance(prefix, str) else "must be a string"
            if problem is not None:
                raise ValueError(f"a within prefix {problem}")
        object.__setattr__(self, "_keep", None if self.keep is None else frozenset(self.keep))

    def apply(
        self, rule: str, args: dict[str, Any], changes: list[tuple[str, str]]
    ) -> dict[str, Any]:
        """Return the narrowed arguments (a new dict when anything changed).

        Args:
            rule: the rule's id, for errors.
            args: the arguments so far (plain data); never mutated.
            changes: receives ``(kind, dotted path)`` for every change made.

        Raises:
            NarrowingEscape: a ``within`` path cannot be confined under its prefix.
            NarrowingError: the arguments are not a dict, a path runs through
                something other than a dict, a clamped value is not a finite
                number, or a confined value is not a string.
        """
        if type(args) is not dict:
            raise NarrowingError(rule, "", "", f"the arguments are a {kind_of(args)}, not a dict")
        out = args
        if self._keep is not None:
            dropped = [key for key in args if key not in self._keep]
            if dropped:
                out = {k: v for k, v in args.items() if k in self._keep}
                changes.extend(("keep", key) for key in dropped)
        for path, bound in self.clamp:
            value = _find(rule, "clamp", out, path)
            if value is MISSING:
                continue
            if type(value) is not int and type(value) is not float:
                raise NarrowingError(
                    rule, ".".join(path), "clamp", f"needs a number, not a {kind_of(value)}"
                )
            if not math.isfinite(value):
                raise NarrowingError(
                    rule, ".".join(path), "clamp", "needs a finite number, not NaN or an infinity"
                )
            if value > bound:
                out = _put(out, path, bound)
                changes.append(("clamp", ".".join(path)))
        for path, frozen in self.set:
            forced = thaw(frozen)
            current = _find(rule, "set", out, path)
            if current is MISSING or not strict_equal(current, forced, numbers_by_value=False):
                out = _put(out, path, forced)
                changes.append(("set", ".".join(path)))
        for path, prefix in self.within:
            value = _find(rule, "within", out, path)
            if value is MISSING:
                continue
            dotted = ".".join(path)
            if type(value) is not str:
                raise NarrowingError(
                    rule, dotted, "within", f"needs a string path, not a {kind_of(value)}"
                )
            try:
                confined = confine_path(value, prefix)
            except PathProblem as exc:
                raise NarrowingEscape(rule, dotted, prefix, exc.problem) from None
            if confined != value:
                out = _put(out, path, confined)
                changes.append(("within", dotted))
        return out


def _find(rule: str, kind: str, args: object, path: Path) -> object:
    try:
        return lookup(args, path)
    except PathBlocked as blocked:
        raise NarrowingError(rule, ".".join(path), kind, blocked.problem(path)) from None


def _put(args: Mapping[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """Return a copy of ``args`` with ``value`` at ``path``, copying only the dicts on the way.

    A dict missing on the way is created; `_find` has already checked that
    nothing but dicts lie on the path.
    """
    out = dict(args)
    node = out
    for key in path[:-1]:
        child = dict(node[key]) if key in node else {}
        node[key] = child
        node = child
    node[path[-1]] = value
    return out
