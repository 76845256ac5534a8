"""Walking plain data for the scrubber: collect every text, then rebuild what changed.

The scrubber sees only the gate's snapshot of an action: plain data of exact
built-in types (SPEC §3). `collect` walks it once, with its own stack (no
nesting can reach Python's recursion limit), and

* checks that every value is plain data -- ``dict`` with ``str`` keys,
  ``list``, ``str``, ``bytes``, ``int``, finite ``float``, ``bool``, ``None``,
  exact types only -- and raises `UnsupportedValue` for anything else (a
  subclass, a tuple, NaN, a non-``str`` key);
* enforces the depth bound (the value is at depth 0, a container's items one
  deeper; a container deeper than ``max_depth`` raises, and so does a cycle);
* charges the size budget: `VALUE_COST` per value, `KEY_COST` per key, and the
  UTF-8 bytes of every text -- before anything is scanned;
* lists the texts to scan, in walk order (a key before its value): strings
  (UTF-8, lone surrogates escaped with ``surrogatepass`` so they are scanned
  and fingerprinted, never crashed on), bytes as they are, dict keys, and the
  decimal text of numbers that could hold a card or phone number
  (`runtime._detectors.NUMBER_DIGITS`; ``bool`` is never scanned).

Each text goes to the full plan or, inside a ``scrub_exempt`` subtree, to the
blocking plan only. `Walk.rebuild` then makes the output copy-on-write: a
container in which nothing changed is the same object, a changed one a new
``dict``/``list``; the input is never mutated. A redacted string stays a
``str``, redacted bytes stay ``bytes``, and a number with a finding becomes
the redacted ``str`` of its decimal text. When two keys of a dict redact to the
same text, the later one gets a `` (2)``, `` (3)``... suffix, so no entry is lost.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeAlias

from runtime._errors import ScrubLimitExceeded, UnsupportedValue
from runtime._scanner import Meter

__all__ = [
    "CONTAINER_COST",
    "KEY",
    "KEY_COST",
    "NUMBER",
    "VALUE",
    "VALUE_COST",
    "Exempt",
    "Text",
    "Walk",
    "replacement",
]

VALUE_COST: Final = 96
"""Budget bytes charged per value walked (the walk's own work per value)."""

CONTAINER_COST: Final = 384
"""Budget bytes charged per dict or list, on top of `VALUE_COST`."""

KEY_COST: Final = 96
"""Budget bytes charged per dict key, on top of its UTF-8 length and its value's `VALUE_COST`."""

Exempt: TypeAlias = "dict[str, Exempt] | bool | None"
"""An exemption trie node: None (nothing exempt at or below), True (exempt here
and everywhere below), or the children of a dict whose keys lead to exemptions."""


# Numbers below this cannot hold 11 digits before the point; at or above the upper
# bound an int has 21+ digits and a float is written with an exponent: neither
# holds a digit run a detector can match (a test holds the catalogue to this).
_NUMBER_LOW: Final = 10**10
_NUMBER_HIGH: Final = 10**20


Text: TypeAlias = tuple[int, object, int, bytes, object, bool]
"""One text to scan: (containing node index or -1 for the value itself, its key or
index there, kind (`VALUE`, `KEY` or `NUMBER`), the bytes to scan, the original
value, inside an exempt subtree?)."""

VALUE: Final = 0
KEY: Final = 1
NUMBER: Final = 2


def replacement(text: Text, redacted: bytes) -> object:
    """The value (or key) that replaces a text's original once redacted."""
    if type(text[4]) is bytes:
        return redacted
    return redacted.decode("utf-8", "surrogatepass")


class _Node:
    __slots__ = ("changes", "final", "parent", "renames", "slot", "src")

    def __init__(self, src: dict[str, Any] | list[Any], parent: int, slot: object) -> None:
        self.src = src
        self.parent = parent
        self.slot = slot
        self.changes: dict[object, object] | None = None
        self.renames: dict[str, str] | None = None
        self.final: dict[str, str] | None = None  # original key -> key in the output


class Walk:
    """The state of one scrub call's walk: containers, texts, and the budget.

    Args:
        max_depth: the deepest container accepted.
        meter: the call's budget.
        name_key: turns a dict key into the text used in a path (redacted with
            every detector), for `UnsupportedValue` paths.
    """

    __slots__ = ("_max_depth", "_meter", "_name_key", "nodes", "texts")

    def __init__(self, max_depth: int, meter: Meter, name_key: Callable[[str], str]) -> None:
        self._max_depth = max_depth
        self._meter = meter
        self._name_key = name_key
        self.nodes: list[_Node] = []
        self.texts: list[Text] = []

    def collect(self, root: object, exempt: Exempt) -> None:
        """Walk ``root``: check it, charge it, and list its texts (see the module docstring).

        Raises:
            UnsupportedValue: a value that is not plain data.
            ScrubLimitExceeded: too deep (or cyclic), or over the size budget.
        """
        meter = self._meter
        nodes = self.nodes
        add = self.texts.append
        max_depth = self._max_depth
        # A stack of open containers: (their remaining (slot, item) pairs, node index,
        # depth, exemption, dict?). Scalars are handled where they are met; a container
        # is opened and walked first, and its parent resumes where it stopped, so texts
        # come in walk order (depth first, a key before its value). The value itself
        # sits in a pseudo-container at depth -1.
        frames: list[tuple[Iterator[tuple[Any, Any]], int, int, Exempt, bool]] = [
            (iter(((None, root),)), -1, -1, exempt, False)
        ]
        # VALUE_COST (and a key's KEY_COST) is charged when a container is opened, for
        # all its items at once: a huge list is refused before anything in it is read.
        left = meter.left - VALUE_COST
        while frames:
            items, node, depth, here, keyed = frames[-1]
            for slot, value in items:
                inner = here
                if keyed:
                    if type(slot) is not str:
                        name = self._name(type(slot).__name__)
                        raise UnsupportedValue(
                            name, self.path(node, None), f"a dict key of type {name}, not a str"
                        )
                    if isinstance(here, dict):
                        inner = here.get(slot)
                    data = slot.encode("utf-8", "surrogatepass")
                    left -= len(data)
                    add((node, slot, KEY, data, slot, inner is True))
                kind = type(value)
                if kind is str:
                    data = value.encode("utf-8", "surrogatepass")
                    left -= len(data)
                    add((node, slot, VALUE, data, value, inner is True))
                elif kind is dict or kind is list:
                    if depth >= max_depth:
                        raise ScrubLimitExceeded("max_depth", max_depth)
                    if kind is dict:
                        left -= CONTAINER_COST + (VALUE_COST + KEY_COST) * len(value)
                        opened = iter(dict.items(value))
                    else:
                        left -= CONTAINER_COST + VALUE_COST * len(value)
                        opened = enumerate(value)
                    # Opened even when over budget: the check below refuses it before
                    # anything in it is read.
                    frames.append((opened, len(nodes), depth + 1, inner, kind is dict))
                    nodes.append(_Node(value, node, slot))
                    break
                elif kind is bytes:
                    left -= len(value)
                    add((node, slot, VALUE, value, value, inner is True))
                elif kind is int:
                    if _NUMBER_LOW <= abs(value) < _NUMBER_HIGH:
                        data = int.__repr__(value).encode("ascii")
                        left -= len(data)
                        add((node, slot, NUMBER, data, value, inner is True))
                elif kind is float:
                    if not math.isfinite(value):
                        problem = "a NaN float" if value != value else "an infinite float"
                        raise UnsupportedValue("float", self.path(node, slot), problem)
                    if _NUMBER_LOW <= abs(value) < _NUMBER_HIGH:
                        data = float.__repr__(value).encode("ascii")
                        left -= len(data)
                        add((node, slot, NUMBER, data, value, inner is True))
                elif value is not None and kind is not bool:
                    raise UnsupportedValue(self._name(kind.__name__), self.path(node, slot))
                if left < 0:
                    break
            else:
                frames.pop()
            if left < 0:
                raise ScrubLimitExceeded("max_bytes", meter.limit)
        meter.left = left  # what the scan may still spend

    def _name(self, text: str) -> str:
        name: str = self._name_key(text)
        return name

    def change(self, text: Text, value: object) -> None:
        """Record that ``text`` (in a container) is replaced by ``value`` (a key: by that key)."""
        node = self.nodes[text[0]]
        slot = text[1]
        if text[2] == KEY:
            if node.renames is None:
                node.renames = {}
            assert isinstance(slot, str)
            assert isinstance(value, str)
            node.renames[slot] = value
        else:
            if node.changes is None:
                node.changes = {}
            node.changes[slot] = value

    def rebuild(self, root: object) -> object:
        """The output value: ``root`` with every recorded change, copy-on-write."""
        nodes = self.nodes
        for index in range(len(nodes) - 1, -1, -1):
            node = nodes[index]
            if node.changes is None and node.renames is None:
                continue
            copy = _copy(node)
            if node.parent < 0:
                return copy
            parent = nodes[node.parent]
            if parent.changes is None:
                parent.changes = {}
            parent.changes[node.slot] = copy
        return root

    def path(self, node: int, slot: object, *, key: bool = False) -> str:
        """The JSONPath-like path of ``slot`` in container ``node`` (-1, None: the value).

        Dict keys are written as they are in the output (renamed keys and their
        suffixes included), redacted by every detector; ``#key`` marks a finding
        inside the key itself.
        """
        segments: list[str] = []
        while node >= 0:
            if slot is not None:
                segments.append(self._segment(node, slot))
            container = self.nodes[node]
            node, slot = container.parent, container.slot
        return "$" + "".join(reversed(segments)) + ("#key" if key else "")

    def _segment(self, node: int, slot: object) -> str:
        if isinstance(slot, int):
            return f"[{slot}]"
        assert isinstance(slot, str)
        final = self.nodes[node].final
        shown = self._name(final.get(slot, slot) if final is not None else slot)
        if shown.isidentifier() and shown.isascii():
            return "." + shown
        return "[" + _quote(shown) + "]"


def _copy(node: _Node) -> dict[str, Any] | list[Any]:
    src = node.src
    changes = node.changes or {}
    if isinstance(src, list):
        out = list(src)
        for position, value in changes.items():
            assert isinstance(position, int)
            out[position] = value
        return out
    renames = node.renames
    if renames is None:
        result = dict(src)
        for key, value in changes.items():
            assert isinstance(key, str)
            result[key] = value
        return result
    final: dict[str, str] = {}
    renamed: dict[str, Any] = {}
    for key, value in src.items():
        new = renames.get(key)
        if new is None:
            new = key
        elif new != key:
            candidate, number = new, 1
            while candidate in src or candidate in renamed:
                number += 1
                candidate = f"{new} ({number})"
            new = candidate
        final[key] = new
        renamed[new] = changes.get(key, value)
    node.final = final
    return renamed


def _quote(text: str) -> str:
    """``text`` as a JSON string literal, ASCII only (a lone surrogate is escaped too)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
    out.append('"')
    return "".join(out)
