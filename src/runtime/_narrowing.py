"""A ``narrow`` rule's narrowings, applied copy-on-write to the arguments.

Applied in this order within a rule: ``keep`` (drop other top-level keys),
``clamp`` (lower numbers above a bound), ``set`` (force values), ``within``
(confine a path under a prefix). Each change is reported as
``(kind, path)``; a no-op (a value already within bounds, already set to the
same value of the same type) is not a change, so that ``narrow`` means the
arguments really differ (SPEC §3).
"""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime._conditions import MISSING, ConditionTypeError, lookup, strict_equal
from runtime._errors import GhostError

__all__ = ["Narrowing", "NarrowingEscape"]


class NarrowingEscape(GhostError):
    """An argument escapes a ``within`` confinement: the action is denied."""

    def __init__(self, rule: str, path: str) -> None:
        self.rule = rule
        self.path = path
        super().__init__(
            f"argument {path!r} escapes the directory that rule {rule!r} confines it to"
        )


@dataclass(frozen=True, slots=True)
class Narrowing:
    """What one rule narrows. Paths are dotted argument paths, split."""

    keep: tuple[str, ...] | None = None
    clamp: tuple[tuple[tuple[str, ...], int | float], ...] = ()
    set: tuple[tuple[tuple[str, ...], Any], ...] = ()
    within: tuple[tuple[tuple[str, ...], str], ...] = ()

    def apply(
        self, rule: str, args: dict[str, Any], changes: list[tuple[str, str]]
    ) -> dict[str, Any]:
        """Return the narrowed arguments (a new dict when anything changed).

        Args:
            rule: the rule's id, for errors.
            args: the arguments so far; never mutated.
            changes: receives ``(kind, dotted path)`` for every change made.

        Raises:
            NarrowingEscape: a ``within`` path resolves outside its prefix.
            ConditionTypeError: a clamped value is not a number, a confined
                value is not a string, or a ``set`` path runs through a non-object.
        """
        out = args
        if self.keep is not None:
            dropped = [key for key in args if key not in self.keep]
            if dropped:
                out = {k: v for k, v in args.items() if k in self.keep}
                changes.extend(("keep", key) for key in dropped)
        for path, bound in self.clamp:
            value = lookup(out, path)
            if value is MISSING:
                continue
            if not isinstance(value, int | float) or isinstance(value, bool):
                raise ConditionTypeError(f"clamp of {'.'.join(path)!r} needs a number")
            if value > bound:
                out = _put(out, path, bound)
                changes.append(("clamp", ".".join(path)))
        for path, forced in self.set:
            current = lookup(out, path)
            if not strict_equal(current, forced, numbers_by_value=False):
                out = _put(out, path, copy.deepcopy(forced))
                changes.append(("set", ".".join(path)))
        for path, prefix in self.within:
            value = lookup(out, path)
            if value is MISSING:
                continue
            if not isinstance(value, str):
                raise ConditionTypeError(f"within of {'.'.join(path)!r} needs a string path")
            confined = _confine(value, prefix)
            if confined is None:
                raise NarrowingEscape(rule, ".".join(path))
            if confined != value:
                out = _put(out, path, confined)
                changes.append(("within", ".".join(path)))
        return out


def _confine(value: str, prefix: str) -> str | None:
    """Normalise ``value`` (relative paths are taken under ``prefix``); None if it escapes."""
    if "\x00" in value:
        return None
    joined = value if value.startswith("/") else posixpath.join(prefix, value)
    normal = posixpath.normpath(joined)
    if normal.startswith("//"):  # POSIX keeps a leading '//'; it is not under any prefix
        return None
    root = prefix.rstrip("/") or "/"
    if normal == root or normal.startswith(root if root == "/" else root + "/"):
        return normal
    return None


def _put(args: Mapping[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """Return a copy of ``args`` with ``value`` at ``path``, copying only the dicts on the way."""
    head, *rest = path
    out = dict(args)
    if not rest:
        out[head] = value
        return out
    child = out.get(head, {})
    if not isinstance(child, Mapping):
        raise ConditionTypeError(f"path {'.'.join(path)!r} runs through a non-object")
    out[head] = _put(child, tuple(rest), value)
    return out
