"""The decision trace report written as the run is read: ``ghost trace-decisions``, bounded memory.

``encode_decision_trace_report_to_bytes(build_decision_trace_report(path))``
holds the whole run -- every record, assessment, approval and problem, then
one document of them all. `stream_trace` gives the same bytes, byte for byte,
for every file, while what it holds stays bounded whatever the run holds
(ADR 0026, addendum):

1. One pass over `audit.iter_run`, each record read by the trace's own
   readers (`analysis._decision_trace`). Each assessment is held in a
   `SpilledMap` under its decision id (the last one logged wins, ADR-0022),
   with whether a decision of that id has come yet. Each decision is paired
   with the assessment held for its id when it comes, encoded at once as it
   appears in the report, and appended with its file-order key to a
   `SpilledList`; approvals, problems and pending decision ids go to
   `SpilledList`s as well, and the tallies (`analysis._trace_tallies`) are
   counted as records come.
2. A decision's pairing is final unless an assessment of its id comes after
   it and takes the place of the one it was paired with (it came first, or
   it is a later duplicate): those ids are noted, in a `SpilledMap`. Only if
   there are some, or the reader yielded decisions out of file order, a
   second pass over the spilled records re-pairs the decisions of those ids
   (`_repaired`, as `TraceBuilder` does), puts the records in file order and
   counts again what depends on pairing or order.
3. Every field but the four lists is known before a byte is written. They
   are encoded by the in-memory report's own encoder (`head_document`), the
   four lists empty, and each list is then written into its place, item by
   item, as `encode_decision_trace_report_to_bytes` would have indented it
   (`list_item_bytes`). Every item is encoded when it is read, so a value no
   encoder can write fails before any output.

What stays in memory: the tallies, keyed by distinct values (a count per
verdict, policy id, rule, agent, detector, trace origin, stage, shadow rule:
a crafted run with a million distinct agents holds a million counts), at
most twenty ids per shadow verdict pair, the bounded memory parts of the
spilled stores (`SpillLimits`), and one record. What goes to disk: private
temporary files and SQLite databases, deleted when the trace is closed, or
with the process.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import IO, TYPE_CHECKING, Final

from analysis._decision_trace import (
    APPROVALS_TOPIC,
    ASSESSMENTS_TOPIC,
    DECISIONS_TOPIC,
    AssessmentFields,
    _describe,
    _file_order,
    _LoggedAssessment,
    _LoggedDecision,
    _pair,
    _read_approval,
    _read_assessment,
    _read_decision,
    _repaired,
    _schema_notes,
    _UnreadableRecordError,
    assessment_fields,
    assessment_of,
)
from analysis._run_facts import SealWatch
from analysis._spilled_list import SpilledList
from analysis._spilled_map import SpilledMap
from analysis._trace_json import (
    LIST_FIELDS,
    _approval_to_json,
    _indented_bytes,
    _record_from_json,
    _record_to_json,
    head_document,
    list_item_bytes,
)
from analysis._trace_model import ANALYSIS_VERSION, ChainStatus, DecisionTraceRecord
from analysis._trace_tallies import ApprovalTallies, DecisionTallies, PairingTallies, ReportHead
from runtime import RuntimeVerdict

if TYPE_CHECKING:
    from audit import LoggedRecord, RunItem

__all__ = ["SpillLimits", "TraceStream", "stream_trace"]

# What the trace holds of a decision id: where its assessment is in the file, whether a
# decision of that id has come, and the assessment (None: a decision came, no assessment).
_Held = tuple[int, bool, AssessmentFields | None]
_NOWHERE: Final = -1  # before every file-order key
_NOTED: Final = True  # the value of a map used as a set
_ID_LENGTH: Final = struct.Struct(">I")
_WRITE_BYTES: Final = 1 << 20  # what is gathered before one write to the output


@dataclass(frozen=True, slots=True)
class SpillLimits:
    """How much each store of the streamed report keeps in memory before it spills to disk.

    Attributes:
        map_entries: entries of each `SpilledMap` (the assessments by decision
            id, the ids to re-pair, the resolved and the listed pending ids).
            A decision usually comes right after its assessment, so a few
            thousand suffice; each held assessment costs about a kilobyte.
        id_filter_bits: the Bloom filter of the assessments' map, which holds
            one key per decision id (8 MiB; allocated at its first spill).
        filter_bits: the Bloom filter of each of the other maps (1 MiB).
        list_bytes: bytes of each `SpilledList` (the records, approvals,
            problems and pending ids).
        rank_values: values of each `SpilledRanks` (latencies, stage times, waits).
    """

    map_entries: int = 8_192
    id_filter_bits: int = 2**26
    filter_bits: int = 2**23
    list_bytes: int = 4 << 20
    rank_values: int = 1 << 17


def stream_trace(items: Iterable[RunItem], *, limits: SpillLimits | None = None) -> TraceStream:
    """Read a run as `audit.iter_run` streams it, ready to write its decision trace report.

    Args:
        items: the stream, consumed up to its `audit.ReadEnd`.
        limits: what the stores keep in memory (the defaults unless testing).

    Returns:
        The trace, finished: say `TraceStream.truncated` and
        `TraceStream.sealed`, `TraceStream.write` the report, then close it
        (it is a context manager).

    Raises:
        audit.LogFormatError: as `audit.iter_run`.
        ValueError: ``items`` ends without a `audit.ReadEnd`.
    """
    from audit import LoggedRecord, ReadEnd, ReadProblem

    trace = TraceStream(limits)
    try:
        for item in items:
            if isinstance(item, LoggedRecord):
                trace.record(item)
            elif isinstance(item, ReadProblem):
                trace.read_problem(item.message)
            elif isinstance(item, ReadEnd):
                trace.finish(source_sha256=item.source_sha256, truncated=item.truncated)
                return trace
    except BaseException:
        trace.close()
        raise
    trace.close()
    raise ValueError("the stream ended without a ReadEnd: it is not what audit.iter_run yields")


class TraceStream:
    """A run's decision trace, read one record at a time and written as its report's JSON.

    Feed it records and reader problems in the order the reader yields them
    (`record`, `read_problem`; `stream_trace` does), call `finish` once, then
    `write` the report. The bytes are those of
    ``encode_decision_trace_report_to_bytes`` of `TraceBuilder`'s report of
    the same items. `close` (or the end of a ``with`` block) deletes what
    went to disk.

    Args:
        limits: what the stores keep in memory (`SpillLimits`).
    """

    __slots__ = (
        "_approval_tallies",
        "_approvals",
        "_decisions",
        "_duplicates",
        "_end",
        "_held",
        "_last",
        "_limits",
        "_pairing",
        "_pending",
        "_read_problems",
        "_record_problems",
        "_records",
        "_repair",
        "_seal",
    )

    def __init__(self, limits: SpillLimits | None = None) -> None:
        limits = limits or SpillLimits()
        self._limits = limits
        entries, bits = limits.map_entries, limits.filter_bits
        self._held: SpilledMap[_Held] = SpilledMap(
            memory_entries=entries, filter_bits=limits.id_filter_bits
        )
        # The ids whose decisions may have been paired with an assessment that is not the last.
        self._repair: SpilledMap[bool] = SpilledMap(memory_entries=entries, filter_bits=bits)
        # The assessment held last, as read: a decision usually follows its assessment at once.
        self._last: tuple[str, int, _LoggedAssessment] | None = None
        self._duplicates = 0
        lists = limits.list_bytes
        self._records = SpilledList(memory_bytes=lists)  # decision id + its record's JSON
        self._pending = SpilledList(memory_bytes=lists)  # ids of pending decisions
        self._approvals = SpilledList(memory_bytes=lists)
        self._read_problems = SpilledList(memory_bytes=lists)
        self._record_problems = SpilledList(memory_bytes=lists)
        values = limits.rank_values
        self._decisions = DecisionTallies(memory_values=values)
        self._pairing = PairingTallies(memory_values=values)
        self._approval_tallies = ApprovalTallies(
            memory_values=values, memory_entries=entries, filter_bits=bits
        )
        self._seal = SealWatch()
        self._end: tuple[str, bool, bool] | None = None  # source SHA-256, truncated, sealed

    def __enter__(self) -> TraceStream:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- reading -------------------------------------------------------------------------

    def read_problem(self, message: str) -> None:
        """Note damage the reader found (listed first among the report's problems)."""
        self._read_problems.append(0, list_item_bytes(message))

    def record(self, logged: LoggedRecord) -> None:
        """Trace one record on a ghost topic."""
        at = _file_order(logged)
        self._seal.see(logged)
        topic = logged.topic
        if topic == ASSESSMENTS_TOPIC:
            try:
                decision_id, assessment = _read_assessment(logged)
            except _UnreadableRecordError as exc:
                self._problem(at, _describe(logged, str(exc)))
                return
            self._notes(at, logged)
            self._hold(at, decision_id, assessment)
        elif topic == DECISIONS_TOPIC:
            try:
                decision = _read_decision(logged)
            except _UnreadableRecordError as exc:
                self._problem(at, _describe(logged, str(exc)))
                return
            self._notes(at, logged)
            self._decide(at, decision)
        elif topic == APPROVALS_TOPIC:
            try:
                approval = _read_approval(logged)
            except _UnreadableRecordError as exc:
                self._problem(at, _describe(logged, str(exc)))
                return
            self._notes(at, logged)
            self._approvals.append(at, list_item_bytes(_approval_to_json(approval)))
            self._approval_tallies.add(approval)

    def finish(self, *, source_sha256: str, truncated: bool) -> None:
        """End the reading: settle the pairings and the order, if need be.

        Args:
            source_sha256: the SHA-256 of the bytes read (`audit.ReadEnd`).
            truncated: the file ends as a crash leaves it.
        """
        from audit import TOPICS

        self._end = (source_sha256, truncated, self._seal.sealed(TOPICS))
        if len(self._repair) or not self._records.in_order:
            self._settle()
        # Every pairing is final: what they were decided by is needed no longer.
        self._held.close()
        self._repair.close()
        self._last = None

    @property
    def truncated(self) -> bool:
        """The reader found the run cut short (`DecisionTraceReport.truncated`)."""
        return self._finished()[1]

    @property
    def sealed(self) -> bool:
        """The run ends with its seal (`DecisionTraceReport.sealed`)."""
        return self._finished()[2]

    @property
    def limit_denials(self) -> dict[str, int]:
        """The decisions denied over a limit, by rule, sorted (as `_trace_stats.limit_denials`)."""
        return dict(sorted(self._decisions.limit_denials.items()))

    # -- writing -------------------------------------------------------------------------

    def write(self, stream: IO[bytes]) -> None:
        """Write the report's canonical JSON to ``stream``, a megabyte or so at a time.

        Raises:
            OSError: as ``stream.write``.
        """
        document = head_document(self._head())
        document.update((name, []) for name in LIST_FIELDS)  # each written into its place
        head = _indented_bytes(document)
        lists: dict[str, Iterable[bytes | memoryview]] = {
            "approvals": self._approvals,
            "problems": itertools.chain(self._read_problems, self._record_problems),
            "records": map(_record_bytes, self._records),
            "unresolved_pending_decision_ids": self._unresolved(),
        }
        out = _Gathered(stream)
        start = 0
        for name in LIST_FIELDS:
            # The empty list of a top-level key: a newline and two spaces start no other line.
            marker = b'\n  "' + name.encode("ascii") + b'": []'
            at = head.index(marker, start) + len(marker) - 2
            out.write(head[start:at])
            _write_items(out, lists[name])
            start = at + 2
        out.write(head[start:])
        out.flush()

    def close(self) -> None:
        """Delete everything spilled to disk, and forget the run."""
        for store in (
            self._held,
            self._repair,
            self._records,
            self._pending,
            self._approvals,
            self._read_problems,
            self._record_problems,
            self._decisions,
            self._pairing,
            self._approval_tallies,
        ):
            store.close()
        self._last = None

    # -- the pairing ---------------------------------------------------------------------

    def _hold(self, at: int, decision_id: str, assessment: _LoggedAssessment) -> None:
        fields = assessment_fields(assessment)
        entry = self._held.get(decision_id)
        if entry is None:
            self._held.add(decision_id, (at, False, fields))
        else:
            held_at, decided, held = entry
            if held is not None:
                self._duplicates += 1
                # Last one logged wins (ADR-0022): later in the file, not later read.
                if held_at >= at:
                    return
            self._held.put(decision_id, (at, decided, fields))
            if decided:
                self._repair.put(decision_id, _NOTED)
        self._last = (decision_id, at, assessment)

    def _decide(self, at: int, decision: _LoggedDecision) -> None:
        decision_id = decision.decision_id
        entry = self._held.get(decision_id)
        assessment: _LoggedAssessment | None = None
        if entry is None:
            self._held.add(decision_id, (_NOWHERE, True, None))
        else:
            held_at, decided, fields = entry
            if fields is not None:
                last = self._last
                if last is not None and last[1] == held_at and last[0] == decision_id:
                    assessment = last[2]
                else:
                    assessment = assessment_of(fields)
            if not decided:
                self._held.put(decision_id, (held_at, True, fields))
        record = _pair(decision, assessment)
        self._records.append(at, _record_payload(record))
        self._decisions.add(record)
        self._pairing.add(record)
        if record.decision_kind is RuntimeVerdict.PENDING:
            self._pending.append(at, decision_id.encode("utf-8"))

    def _settle(self) -> None:
        """Re-pair what a later assessment changed, in file order, and count the pairings again."""
        limits = self._limits
        pairing = PairingTallies(memory_values=limits.rank_values)
        settled = SpilledList(memory_bytes=limits.list_bytes)
        try:
            for payload in self._records:
                decision_id, record = _record_of(payload)
                if self._repair.get(decision_id) is not None:
                    record = _repaired(record, self._final(decision_id))
                    payload = _record_payload(record)
                pairing.add(record)
                settled.append(0, payload)
        except BaseException:
            pairing.close()
            settled.close()
            raise
        self._records.close()
        self._pairing.close()
        self._records, self._pairing = settled, pairing

    def _final(self, decision_id: str) -> _LoggedAssessment | None:
        entry = self._held.get(decision_id)
        fields = None if entry is None else entry[2]
        return None if fields is None else assessment_of(fields)

    # -- the report ----------------------------------------------------------------------

    def _finished(self) -> tuple[str, bool, bool]:
        if self._end is None:
            raise RuntimeError("the trace is not finished: call finish() first")
        return self._end

    def _head(self) -> ReportHead:
        source, truncated, sealed = self._finished()
        decisions, pairing, approvals = self._decisions, self._pairing, self._approval_tallies
        latency, by_verdict = decisions.latency_stats()
        wait, by_outcome = approvals.wait_stats()
        first, last, statuses = decisions.first_ns, decisions.last_ns, pairing.statuses
        return ReportHead(
            source_mcap_sha256=source,
            total_decisions=decisions.total,
            verified_count=statuses[ChainStatus.VERIFIED],
            broken_count=statuses[ChainStatus.BROKEN],
            assessment_missing_count=statuses[ChainStatus.ASSESSMENT_MISSING],
            no_assessment_claimed_count=statuses[ChainStatus.NO_ASSESSMENT_CLAIMED],
            per_decision_kind_counts=decisions.kinds,
            per_policy_id_counts=decisions.policies,
            timestamp_first_ns=first,
            timestamp_last_ns=last,
            timestamp_span_ns=None if first is None or last is None else last - first,
            analysis_version=ANALYSIS_VERSION,
            duplicate_assessment_count=self._duplicates,
            truncated=truncated,
            sealed=sealed,
            per_approval_outcome_counts=approvals.outcomes,
            latency_ns_stats=latency,
            latency_ns_by_verdict=by_verdict,
            stage_ns_by_stage=pairing.stage_stats(),
            approval_wait_ns_stats=wait,
            approval_wait_ns_by_outcome=by_outcome,
            per_matched_policy_counts=decisions.matched,
            per_agent_counts=pairing.agents,
            per_detector_counts=pairing.detectors,
            per_trace_origin_counts=decisions.origins,
            shadow_decision_count=pairing.shadowed,
            shadow_disagreement_counts=pairing.disagreements,
            shadow_disagreements_by_rule=pairing.disagreements_by_rule,
            shadow_disagreement_ids=pairing.ids_by_pair(),
        )

    def _unresolved(self) -> Iterator[bytes]:
        """The pending decisions no approval of this run resolves: each id once, in file order."""
        limits = self._limits
        listed: SpilledMap[bool] = SpilledMap(
            memory_entries=limits.map_entries, filter_bits=limits.filter_bits
        )
        try:
            for payload in self._pending:
                decision_id = payload.decode("utf-8")
                if self._approval_tallies.resolves(decision_id) or listed.get(decision_id):
                    continue
                listed.add(decision_id, _NOTED)
                yield list_item_bytes(decision_id)
        finally:
            listed.close()

    def _problem(self, at: int, message: str) -> None:
        self._record_problems.append(at, list_item_bytes(message))

    def _notes(self, at: int, logged: LoggedRecord) -> None:
        for note in _schema_notes(logged):
            self._problem(at, note)


def _record_payload(record: DecisionTraceRecord) -> bytes:
    """What the records' list holds of a record: its decision id, then its report JSON."""
    decision_id = record.decision_id.encode("utf-8")
    fragment = list_item_bytes(_record_to_json(record))
    return b"".join((_ID_LENGTH.pack(len(decision_id)), decision_id, fragment))


def _record_bytes(payload: bytes) -> memoryview:
    (length,) = _ID_LENGTH.unpack_from(payload)
    return memoryview(payload)[_ID_LENGTH.size + length :]


def _record_of(payload: bytes) -> tuple[str, DecisionTraceRecord]:
    (length,) = _ID_LENGTH.unpack_from(payload)
    start = _ID_LENGTH.size
    decision_id = payload[start : start + length].decode("utf-8")
    # json, not orjson: orjson reads an integer beyond 64 bits as a float.
    document = json.loads(payload[start + length :])
    return decision_id, _record_from_json(document, "records")


def _write_items(out: _Gathered, items: Iterable[bytes | memoryview]) -> None:
    separator = b"[\n"
    for item in items:
        out.write(separator)
        out.write(item)
        separator = b",\n"
    out.write(b"[]" if separator == b"[\n" else b"\n  ]")


class _Gathered:
    """Small writes gathered into writes of about `_WRITE_BYTES` to a stream."""

    __slots__ = ("_buffer", "_stream")

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._buffer = bytearray()

    def write(self, data: bytes | memoryview) -> None:
        self._buffer += data
        if len(self._buffer) >= _WRITE_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self._stream.write(self._buffer)
            self._buffer.clear()
