"""Redacting one text: resolve overlapping candidates, insert markers, reach the fixpoint.

What is redacted (the resolution rule, ADR 0010): candidates are taken in
`Candidate` order (leftmost claim, longest, blocking first, catalogue order)
while the set U of redacted bytes grows:

* a candidate whose claim does not touch U is a finding: its secret joins U;
* a blocking candidate is always a finding (blocking findings are never
  dropped), and its secret joins U;
* a redacting candidate whose claim touches U is part of an earlier finding,
  and dropped, when its secret is already in U or its claim lies inside the
  claim of an earlier finding (the JWT that is a bearer token, the
  ``password@host.tld`` of a connection string);
* otherwise it reaches beyond what is redacted (a card that runs past a
  phone-like prefix): it is a finding too, and its secret joins U.

Each connected run of U becomes one ``[REDACTED:<detector>]`` marker, named by
the first finding in it. So every candidate either is redacted or has a byte
of its match redacted, and cannot match again in the output.

The fixpoint. A marker could still change what a neighbour matches: its
edges ``[`` and ``]`` are non-word characters where the secret's were word
characters. The catalogue is written so that this changes nothing (word
boundaries at both ends of every candidate), and a marker whose neighbours
cannot begin or end a candidate (space, quotes, ``=``, ``,``, ``/``, ``@``...)
provably needs no further look. Around the others ("sticky" neighbours:
word characters and ``. % ~ + -``) the text is scanned again locally, a
window reaching as far as the longest bounded candidate; anything found
there is redacted in a further round. After `MAX_ROUNDS` rounds that still
find something the text is refused (`ScrubLimitExceeded`, bound
``"fixpoint"``): a secret is never returned because a budget ran out.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Final

from runtime._detectors import DETECTORS
from runtime._errors import ScrubLimitExceeded
from runtime._scanner import Candidate, Meter, Plan

__all__ = ["FINDING_COST", "MAX_ROUNDS", "VERIFY_COST", "Hit", "redact"]

MAX_ROUNDS: Final = 4
"""Redaction rounds one text may take before it is refused (bound ``"fixpoint"``)."""

FINDING_COST: Final = 3072
"""Budget bytes charged per finding (fingerprint, marker, finding record)."""

VERIFY_COST: Final = 256
"""Budget bytes charged per local rescan window, on top of its length."""

REACH_BEFORE: Final = 800
"""How far before a marker a candidate touching it can start: the longest bounded
candidate (a URL's scheme, 256-byte user and password and 253-byte host; an
email's 64-byte local part and 575-byte domain)."""

REACH_AFTER: Final = 72
"""How far after a marker the hint of a candidate starting at it can lie (an email's
hint is its ``@``, at most 64 bytes into it)."""

Hit = tuple[int, bytes, bool]
"""One finding in a text: (catalogue index, the secret's bytes, blocking?)."""

MARKERS: Final[tuple[bytes, ...]] = tuple(
    f"[REDACTED:{detector.name}]".encode() for detector in DETECTORS
)

_WORD: Final = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"
# Bytes that may end a candidate whose end looks at the next byte (a word boundary,
# a URL host's delimiter), and bytes that may start one whose start looks back.
_STICKY_BEFORE: Final = frozenset(_WORD + b".~%-")
_STICKY_AFTER: Final = frozenset(_WORD + b".%+-")


def redact(
    plan: Plan, text: bytes, found: list[Candidate], meter: Meter
) -> tuple[bytes, list[Hit]]:
    """Redact the candidates ``found`` in ``text`` and return the fixpoint and its findings.

    Args:
        plan: the detectors that found the candidates (and scan the rounds after).
        text: the text, as bytes; candidate offsets are offsets into it.
        found: the candidates (non-empty); sorted in place.
        meter: charged for every finding and every local rescan.

    Returns:
        The redacted text, in which no detector of ``plan`` finds anything,
        and the findings in resolution order, round after round.

    Raises:
        ScrubLimitExceeded: the budget ran out, or the fixpoint was not reached
            within `MAX_ROUNDS` rounds.
    """
    hits: list[Hit] = []
    for _ in range(MAX_ROUNDS):
        before = len(hits)
        text, markers = _apply(text, found, hits)
        meter.charge(FINDING_COST * (len(hits) - before))
        found = []
        for low, high in _windows(text, markers):
            meter.charge(VERIFY_COST + high - low)
            plan.scan(text, low, high, meter, found)
        if not found:
            return text, hits
    raise ScrubLimitExceeded("fixpoint", MAX_ROUNDS)


def _apply(text: bytes, found: list[Candidate], hits: list[Hit]) -> tuple[bytes, list[int]]:
    """One round: resolve ``found`` (see the module docstring), append its findings to
    ``hits``, and return the redacted text and the offsets (start, end, start, end...)
    of the markers in it."""
    if len(found) == 1:  # the common case: one candidate, one finding, one marker
        _, _, redacting, index, start, end = found[0]
        hits.append((index, text[start:end], not redacting))
        marker = MARKERS[index]
        return text[:start] + marker + text[end:], [start, start + len(marker)]
    found.sort()
    lows: list[int] = []  # U: disjoint, sorted runs [lows[i], highs[i])
    highs: list[int] = []
    labels: list[int] = []
    reach = -1  # the furthest end of a finding's claim
    for claim_start, minus_end, redacting, index, start, end in found:
        claim_end = -minus_end
        run = bisect_right(highs, claim_start)  # the first run ending after the claim starts
        if redacting and run < len(lows) and lows[run] < claim_end:
            if reach >= claim_end:
                continue  # inside an earlier finding's claim
            run = bisect_right(highs, start)
            if run < len(lows) and lows[run] <= start and end <= highs[run]:
                continue  # its secret is already redacted
        hits.append((index, text[start:end], not redacting))
        reach = max(reach, claim_end)
        _add(lows, highs, labels, start, end, index)
    parts: list[bytes] = []
    markers: list[int] = []
    cursor = size = 0
    for low, high, label in zip(lows, highs, labels, strict=True):
        parts.append(text[cursor:low])
        size += low - cursor
        marker = MARKERS[label]
        parts.append(marker)
        markers += (size, size + len(marker))
        size += len(marker)
        cursor = high
    parts.append(text[cursor:])
    return b"".join(parts), markers


def _add(
    lows: list[int], highs: list[int], labels: list[int], low: int, high: int, label: int
) -> None:
    """Add [low, high) to the runs, merging the runs it overlaps (touching runs stay apart)."""
    first = bisect_right(highs, low)
    last = first
    while last < len(lows) and lows[last] < high:
        last += 1
    if first < last:
        low, high, label = min(low, lows[first]), max(high, highs[last - 1]), labels[first]
    lows[first:last] = [low]
    highs[first:last] = [high]
    labels[first:last] = [label]


def _windows(text: bytes, markers: list[int]) -> list[tuple[int, int]]:
    """The local rescan windows: around each marker with a sticky neighbour, merged."""
    windows: list[tuple[int, int]] = []
    size = len(text)
    for position in range(0, len(markers), 2):
        start, end = markers[position], markers[position + 1]
        if (start > 0 and text[start - 1] in _STICKY_BEFORE) or (
            end < size and text[end] in _STICKY_AFTER
        ):
            low, high = max(0, start - REACH_BEFORE), min(size, end + REACH_AFTER)
            if windows and low <= windows[-1][1]:
                windows[-1] = (windows[-1][0], high)
            else:
                windows.append((low, high))
    return windows
