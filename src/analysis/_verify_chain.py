"""The checks of a run's shape: topics, ``/run`` first, ``seq``, ``prev_sha256``, seal, MCAP fields.

Each is a `RecordCheck` (ADR 0013) and holds one rule:

* `KnownTopicsCheck` — every record is on a topic this verifier can judge;
  a record it cannot judge is not passed as verified.
* `RunRecordCheck` — the first record is ``/run`` and no other is; a file
  with ghost's channels but no record at all is no run.
* `SeqCheck` — ``seq`` is 0 for the first record and goes up by exactly one
  per record in file order: a gap is a deletion, a repeat or a step back a
  duplicate or a reordering.
* `ChainCheck` — every ``prev_sha256`` is the content address of the record
  stored just before it (null for the first): any deletion, insertion,
  reordering or edit breaks a link.
* `SealCheck` — a ``/seal`` counts the records before it and names the last
  of them; nothing follows it; a complete file without one lost it.
* `McapFieldsCheck` — MCAP ``log_time`` is the record's ``stamp_ns`` and
  ``sequence`` its ``seq`` modulo 2^32, as the sink writes them.

The checks read records only through `RecordFacts`; none does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from analysis._run_facts import (
    RUN_TOPIC,
    SEAL_TOPIC,
    RecordFacts,
    RunEnd,
    seal_problems,
    shown,
)
from analysis._verify_model import IntegrityCheck, RunProblem

__all__ = [
    "ChainCheck",
    "KnownTopicsCheck",
    "McapFieldsCheck",
    "RunRecordCheck",
    "SealCheck",
    "SeqCheck",
]

SEQUENCE_MODULUS: Final = 2**32


class KnownTopicsCheck:
    """Every record is on a topic whose records this verifier knows how to check."""

    __slots__ = ("_known",)

    def __init__(self, known: Iterable[str]) -> None:
        self._known = frozenset(known)

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        if facts.topic in self._known:
            return ()
        return (
            facts.problem(
                IntegrityCheck.TOPIC,
                f"this verifier does not know how to check records on {facts.topic},"
                " so the record is not verified",
            ),
        )

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        return ()


class RunRecordCheck:
    """The ``/run`` record is the first record of the file, and the only one."""

    __slots__ = ()

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        if facts.position == 0 and facts.topic != RUN_TOPIC:
            return (
                facts.problem(
                    IntegrityCheck.RUN,
                    f"the first record is on {facts.topic}, but a run begins with its /run"
                    " record: the /run record was removed or moved",
                ),
            )
        if facts.position > 0 and facts.topic == RUN_TOPIC:
            return (
                facts.problem(
                    IntegrityCheck.RUN,
                    f"a /run record at position {facts.position}: only a run's first record is"
                    " /run (records were reordered, or another run was spliced in)",
                ),
            )
        return ()

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        if end.record_count == 0 and not end.truncated:
            return (
                RunProblem(
                    IntegrityCheck.RUN,
                    "the file holds ghost's channels but not a single record, so no /run"
                    " record: it is not a verifiable run (every record was removed, or the"
                    " sink was closed before the gate opened a run)",
                ),
            )
        return ()


class SeqCheck:
    """``seq`` starts at 0 and goes up by one per record, in file order."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: int | None = None

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        expected = 0 if self._last is None else self._last + 1
        seq = facts.seq
        if seq is None:
            # Unreadable: the json or schema check names it. Assume it took its
            # place, so that the records after it are not all reported too.
            self._last = expected
            return ()
        self._last = seq
        if seq == expected:
            return ()
        if facts.position == 0:
            why = f"the first record has seq {seq}, but a run's first record is seq 0"
        elif seq > expected:
            missing = seq - expected
            why = (
                f"seq jumps from {expected - 1} to {seq}: {missing} record"
                f"{'' if missing == 1 else 's'} missing before it"
            )
        else:
            why = f"seq {seq} follows seq {expected - 1}: a record repeated or out of order"
        return (facts.problem(IntegrityCheck.SEQ, why),)

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        return ()


class ChainCheck:
    """``prev_sha256`` is the content address of the record stored before it."""

    __slots__ = ("_previous",)

    def __init__(self) -> None:
        self._previous: RecordFacts | None = None

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        previous, self._previous = self._previous, facts
        record = facts.record
        if record is None or "prev_sha256" not in record:
            return ()  # the json or schema check names it
        named = record["prev_sha256"]
        if previous is None:
            if named is None:
                return ()
            why = (
                f"its prev_sha256 is {shown(named)}, but no record precedes it in the file:"
                " the records before it were removed"
            )
        elif named != previous.address:
            why = (
                f"its prev_sha256 is {shown(named)}, but the record before it,"
                f" {previous.label}, has content address {previous.address}: that record"
                " was altered, or this link was, or records between them were removed"
            )
        else:
            return ()
        return (facts.problem(IntegrityCheck.CHAIN, why),)

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        return ()


class SealCheck:
    """A ``/seal`` counts and names the records before it; nothing follows it."""

    __slots__ = ("_previous", "_seal")

    def __init__(self) -> None:
        self._previous: RecordFacts | None = None
        self._seal: RecordFacts | None = None

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        previous, self._previous = self._previous, facts
        if self._seal is not None:
            return (
                facts.problem(
                    IntegrityCheck.SEAL,
                    f"it follows the seal ({self._seal.label}): nothing may follow a run's"
                    " seal, so it was added after the run was closed",
                ),
            )
        if facts.topic != SEAL_TOPIC:
            return ()
        self._seal = facts
        if facts.record is None:
            return ()  # the json check names it
        return tuple(
            facts.problem(IntegrityCheck.SEAL, why)
            for why in seal_problems(facts.record, facts.position, previous)
        )

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        if self._seal is None and end.record_count > 0 and not end.truncated:
            return (
                RunProblem(
                    IntegrityCheck.SEAL,
                    "the file is complete (it has its MCAP footer) but holds no readable /seal"
                    " record; a ghost sink seals the run before it finishes the file, so the"
                    " seal was removed or damaged",
                ),
            )
        return ()


class McapFieldsCheck:
    """MCAP ``log_time`` is the record's ``stamp_ns``; ``sequence`` is ``seq`` mod 2^32."""

    __slots__ = ()

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        problems: list[RunProblem] = []
        stamp = facts.integer("stamp_ns")
        logged = facts.logged
        if stamp is not None and logged.log_time_ns != stamp:
            problems.append(
                facts.problem(
                    IntegrityCheck.MCAP,
                    f"its MCAP log_time is {logged.log_time_ns}, but its stamp_ns is {stamp}",
                )
            )
        if facts.seq is not None and logged.sequence != facts.seq % SEQUENCE_MODULUS:
            problems.append(
                facts.problem(
                    IntegrityCheck.MCAP,
                    f"its MCAP sequence is {logged.sequence}, but its seq {facts.seq} makes it"
                    f" {facts.seq % SEQUENCE_MODULUS}",
                )
            )
        return problems

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        return ()
