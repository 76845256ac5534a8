"""Finding candidates in UTF-8 bytes: one RE2 pass over every hint, then anchored checks.

A `Plan` is a set of detectors compiled for scanning (once per detector set,
shared by every scrubber that runs that set). `Plan.scan` finds every
candidate in a range of a buffer:

1. One RE2 search over the *hints* of all the plan's rules (short, linear-time
   expressions: literal prefixes with a word boundary, or the whole pattern for
   bounded numeric detectors) finds the leftmost position where any rule may
   start. RE2 runs a DFA over the bytes: no backtracking, no super-linear input.
2. At that position, each rule whose hint can start with that byte (a
   256-entry dispatch table, derived from the hints when the plan is built)
   matches its anchored pattern and validates the match (`Rule.span`).
3. The search resumes one byte later, so overlapping candidates of different
   detectors (a JWT inside a bearer token, a card inside a phone-like run)
   are all found; the redaction step decides between them.

Every step is charged to a `Meter` (ADR 0010, the cost model): a fixed cost per
hint hit and per anchored attempt, plus the bytes each RE2 call scans again
(the reverse scan of a hit, a rescan of text an earlier search already
covered, the length of an anchored match). So the work of a scan is bounded by
the budget whatever the input, and an input dense with candidates is refused
(`ScrubLimitExceeded`) instead of being slow. Costs are in *budget bytes*,
calibrated so that one budget byte costs at most about twice the time of
scanning one byte of ordinary text (bench/scrub.py measures it).

Buffers are bytes in RE2's Latin-1 mode: ASCII classes match ASCII bytes only,
so a UTF-8 (or surrogate-escaped) multi-byte character is never part of a
token. NUL never is either: the scrubber joins many texts into one buffer with
NUL between them and scans them in one call.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Final, TypeAlias

import re2

from runtime._detectors import DETECTORS, Rule, SpanFunction
from runtime._errors import ScrubLimitExceeded

__all__ = [
    "ATTEMPT_COST",
    "HIT_COST",
    "Candidate",
    "Meter",
    "Plan",
    "make_plan",
]

HIT_COST: Final = 1536
"""Budget bytes charged per hint hit (one RE2 search call and its dispatch)."""

ATTEMPT_COST: Final = 384
"""Budget bytes charged per anchored pattern tried (one RE2 call and validation)."""

_UNANCHORED: Final = re2._re2.RE2.Anchor.UNANCHORED
_ANCHORED: Final = re2._re2.RE2.Anchor.ANCHOR_START

Candidate: TypeAlias = tuple[int, int, bool, int, int, int]
"""One validated candidate, in the order that resolves overlaps:

(claim start, minus claim end, not blocking, catalogue index, secret start, secret end).
Sorting these tuples orders candidates leftmost first, then longest, then
blocking before redacting, then by catalogue order.
"""


class Meter:
    """The budget of one scrub call, in budget bytes; `charge` raises when it runs out."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int, left: int | None = None) -> None:
        self.limit = limit
        self.left = limit if left is None else left

    def charge(self, cost: int) -> None:
        """Take ``cost`` from the budget.

        Raises:
            ScrubLimitExceeded: the budget is exhausted (bound ``"max_bytes"``).
        """
        self.left -= cost
        if self.left < 0:
            raise ScrubLimitExceeded("max_bytes", self.limit)


def _options() -> re2.Options:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.never_capture = True
    options.log_errors = False
    return options


def _compile(source: str) -> re2._re2.RE2:
    regexp = re2._re2.RE2(source.encode("ascii"), _options())
    if not regexp.ok():
        raise ValueError(f"bad detector expression: {regexp.error().decode()}")
    return regexp


def _first_bytes(hint: re2._re2.RE2) -> range:
    """The bytes a match of ``hint`` may start with (a superset, from RE2's match range)."""
    ok, low, high = hint.PossibleMatchRange(4)
    if not ok or not low or not high:
        return range(256)
    return range(low[0], high[0] + 1)


# One compiled rule: (rule number in the plan, anchored Match method, span function,
# the bytes that cannot lead it or None, peek offset, the one-byte strings allowed
# there or None, longest match or 0, runs?, catalogue index, blocking?).
_Entry: TypeAlias = tuple[
    int, Any, SpanFunction, bytes | None, int, frozenset[bytes] | None, int, bool, int, bool
]


class Plan:
    """A set of detectors compiled for scanning; see the module docstring.

    Args:
        entries: (catalogue index, blocking?) for each detector to run.
    """

    __slots__ = ("_dispatch", "_pairs", "_rules", "_search", "entries")

    def __init__(self, entries: Sequence[tuple[int, bool]]) -> None:
        self.entries = tuple(entries)
        rules: list[tuple[Rule, int, bool]] = [
            (rule, index, blocking)
            for index, blocking in self.entries
            for rule in DETECTORS[index].rules
        ]
        dispatch: list[list[_Entry]] = [[] for _ in range(256)]
        self._rules = len(rules)
        for number, (rule, index, blocking) in enumerate(rules):
            skip = bytes(b for b in range(256) if b not in rule.lead) if rule.lead else None
            offset, allowed = rule.peek if rule.peek is not None else (0, None)
            # One-byte strings: a peek past the end of the buffer reads b"", never allowed.
            peek = None if allowed is None else frozenset(bytes([byte]) for byte in allowed)
            entry: _Entry = (
                number,
                _compile(rule.pattern).Match,
                rule.span,
                skip,
                offset,
                peek,
                rule.max_length or 0,
                rule.runs,
                index,
                blocking,
            )
            for byte in rule.first or _first_bytes(_compile(rule.hint)):
                dispatch[byte].append(entry)
        self._dispatch: tuple[tuple[_Entry, ...], ...] = tuple(map(tuple, dispatch))
        # The rules a hit's first two bytes leave (`_narrowed`), filled as pairs are met:
        # at most 65,792 keys, so the cache is bounded whatever the input.
        self._pairs: dict[bytes, tuple[_Entry, ...]] = {}
        self._search = (
            _compile("|".join(f"(?:{rule.hint})" for rule, _, _ in rules)).Match if rules else None
        )

    def scan(
        self,
        buf: bytes,
        low: int,
        high: int,
        meter: Meter,
        found: list[Candidate],
        *,
        end: int | None = None,
    ) -> None:
        """Append to ``found`` every candidate whose hint lies in ``buf[low:high]``.

        Args:
            buf: the bytes; everything outside ``low:high`` is context (word
                boundaries look at it) and anchored matches may run past ``high``.
            low, high: the range in which hints are searched.
            meter: charged for the work (see the module docstring).
            found: receives the candidates, in the order they are found.
            end: where anchored matches must stop (default: the end of ``buf``).

        Raises:
            ScrubLimitExceeded: the budget ran out.
        """
        search = self._search
        if search is None:
            return
        limit = len(buf) if end is None else end
        pairs = self._pairs
        pos = low
        scanned = low  # how far earlier searches have read; reading it again is charged
        # Per rule, the end of its last match; read only for rules marked `runs`.
        covered = [0] * self._rules
        while pos < high:
            hit_start, hit_end = search(_UNANCHORED, buf, pos, high)[0]
            if hit_start < 0:
                return
            # The forward scan re-reads [pos, scanned) and the reverse scan the hit itself.
            cost = HIT_COST + hit_end - hit_start
            if scanned > pos:
                cost += (scanned if scanned < hit_end else hit_end) - pos
            if hit_end > scanned:
                scanned = hit_end
            pair = buf[hit_start : hit_start + 2]
            entries = pairs.get(pair)
            if entries is None:
                entries = pairs[pair] = self._narrowed(pair)
            for entry in entries:
                number, match, span, skip, offset, allowed, longest, runs, index, blocking = entry
                if runs and hit_start < covered[number]:
                    continue  # inside this rule's previous match: nothing new
                if (
                    allowed is not None
                    and buf[hit_start + offset : hit_start + offset + 1] not in allowed
                ):
                    continue  # the byte there rules this rule out
                if skip is not None and not buf[hit_start : hit_start + 3].translate(None, skip):
                    continue  # none of the first three bytes can lead this rule's number
                stop_at = min(limit, hit_start + longest) if longest else limit
                start, stop = match(_ANCHORED, buf, hit_start, stop_at)[0]
                cost += ATTEMPT_COST
                if start < 0:
                    continue
                covered[number] = stop
                cost += stop - start
                claim = span(buf, start, stop)
                if claim is not None:
                    claim_start, claim_end, secret_start, secret_end = claim
                    cost += start - claim_start  # read back beyond the match (email), or 0
                    found.append(
                        (claim_start, -claim_end, not blocking, index, secret_start, secret_end)
                    )
            meter.left -= cost
            if meter.left < 0:
                raise ScrubLimitExceeded("max_bytes", meter.limit)
            pos = hit_start + 1

    def _narrowed(self, pair: bytes) -> tuple[_Entry, ...]:
        """The rules a hit starting with ``pair`` (its first two bytes, or the last
        byte of the buffer) may be: those its first byte dispatches to, less those
        whose `peek` at offset 1 the second byte rules out. A peek the pair passes,
        and a `lead` test one of its bytes passes, are done: the entry drops them."""
        narrowed: list[_Entry] = []
        for entry in self._dispatch[pair[0]]:
            skip, offset, allowed = entry[3], entry[4], entry[5]
            if offset == 1 and allowed is not None:
                if pair[1:] not in allowed:
                    continue  # b"" (the end of the buffer) is never allowed
                allowed = None
            if skip is not None and pair.translate(None, skip):
                skip = None  # a byte of the pair can lead the number: the test passes
            narrowed.append((*entry[:3], skip, offset, allowed, *entry[6:]))
        return tuple(narrowed)


@functools.cache
def make_plan(entries: tuple[tuple[int, bool], ...]) -> Plan:
    """The `Plan` for these (catalogue index, blocking?) entries, compiled once per process."""
    return Plan(entries)
