"""Decision trace and chain verification (ADR-0022, adapted to ghost's records).

One pass over a captured run pairs every ``/decisions`` record with the
``/assessments`` record it claims to rest on and re-derives that claim from the
bytes in the file:

1. Assessments are indexed by ``decision_id``. When two share one, the last
   logged wins and the duplicate is counted (the gate never writes two; a
   second one is worth a look).
2. Decisions are taken in stream order. For each: a null ``assessment_sha256``
   is ``no_assessment_claimed``; no assessment logged under its
   ``decision_id`` is ``assessment_missing``; otherwise the assessment's
   content address (SHA-256 of its message bytes as stored) is compared with
   the claim: equal is ``verified``, different is ``broken``.
3. Approvals (``/approvals``) are counted by outcome; a ``pending`` decision
   that no approval of this run resolves (``decision_run_id`` null) is listed
   as unresolved. An approval of a decision of an earlier run is counted, and
   resolves nothing here.

A record that cannot be read (not JSON, wrong schema, a missing or mistyped
field) is left out of the counts and named in ``report.problems``; a record
the trace can use but that breaks its schema in a field the trace does not
need is traced, and named there too. The module
reads no clock, uses no randomness, and gives field-by-field equal reports for
the same file.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from analysis._json_types import json_type_name
from analysis._run_facts import SealWatch
from analysis._trace_model import (
    ANALYSIS_VERSION,
    APPROVAL_OUTCOMES,
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    DecisionTraceReport,
    FrozenCounts,
)
from runtime import RuntimeVerdict

if TYPE_CHECKING:
    # The reader (and `mcap` behind it) is imported only when a file is read,
    # so that `import analysis` and `ghost --help` stay light.
    from audit import LoggedRecord, RunItem, RunLog

__all__ = [
    "AssessmentFields",
    "TraceBuilder",
    "assessment_fields",
    "assessment_of",
    "build_decision_trace_report",
    "trace_items",
    "trace_run",
    "verify_decision_chain",
]

ASSESSMENTS_TOPIC: Final = "/assessments"
DECISIONS_TOPIC: Final = "/decisions"
APPROVALS_TOPIC: Final = "/approvals"
ASSESSMENT_SCHEMA: Final = "ghost.assessment/1"
DECISION_SCHEMA: Final = "ghost.decision/1"
APPROVAL_SCHEMA: Final = "ghost.approval/1"

_NO_STAGES: Final = FrozenCounts()
_VERDICT_VALUES: Final = frozenset(verdict.value for verdict in RuntimeVerdict)
_VERDICTS: Final = ", ".join(verdict.value for verdict in RuntimeVerdict)


class _UnreadableRecordError(Exception):
    """A decision or assessment record the trace cannot use; the message says why."""


@dataclass(frozen=True, slots=True)
class _LoggedDecision:
    """The fields of a ``/decisions`` record that the trace uses, type-checked."""

    decision_id: str
    stamp_ns: int
    verdict: RuntimeVerdict
    reason: str
    matched_policy: str | None
    policy_id: str
    assessment_sha256: str | None
    trace_id: str
    latency_ns: int
    trace_origin: str | None


@dataclass(frozen=True, slots=True)
class _LoggedAssessment:
    """What the trace shows of an assessment: its address, and the action it describes.

    Every field but the address is read leniently: a tampered assessment still
    joins (and counts as ``broken``); a field that is not what the gate writes
    is shown as unknown, and `_schema_notes` names the break.
    """

    sha256: str
    agent: str | None
    verb: str | None
    resource: str | None
    detectors: tuple[str, ...]
    stage_ns: FrozenCounts
    shadow: _LoggedShadow | None = None


AssessmentFields = tuple[
    str,
    str | None,
    str | None,
    str | None,
    tuple[str, ...],
    tuple[tuple[str, int], ...],
    tuple[str, str | None, str | None, bool] | None,
]
"""A `_LoggedAssessment` as plain values (`assessment_fields`): what pickles small and fast."""


def assessment_fields(assessment: _LoggedAssessment) -> AssessmentFields:
    """The assessment as plain values, for a store that pickles them (`assessment_of` undoes it)."""
    shadow = assessment.shadow
    return (
        assessment.sha256,
        assessment.agent,
        assessment.verb,
        assessment.resource,
        assessment.detectors,
        tuple(assessment.stage_ns.items()),
        None
        if shadow is None
        else (shadow.verdict.value, shadow.matched_policy, shadow.policy_id, shadow.error),
    )


def assessment_of(fields: AssessmentFields) -> _LoggedAssessment:
    """The assessment that `assessment_fields` gave ``fields`` for (an equal one)."""
    sha256, agent, verb, resource, detectors, stages, shadow = fields
    return _LoggedAssessment(
        sha256=sha256,
        agent=agent,
        verb=verb,
        resource=resource,
        detectors=detectors,
        stage_ns=FrozenCounts(stages) if stages else _NO_STAGES,
        shadow=None
        if shadow is None
        else _LoggedShadow(RuntimeVerdict(shadow[0]), shadow[1], shadow[2], shadow[3]),
    )


@dataclass(frozen=True, slots=True)
class _LoggedShadow:
    """An assessment's ``shadow`` (ADR 0031), read leniently like the rest of it."""

    verdict: RuntimeVerdict
    matched_policy: str | None
    policy_id: str | None
    error: bool


def build_decision_trace_report(mcap_path: str | os.PathLike[str]) -> DecisionTraceReport:
    """Read a captured run and pair each decision with its assessment.

    The file is streamed once (`audit.iter_run`): what is held is what the
    report keeps, however long the run.

    Args:
        mcap_path: the MCAP file a ghost audit sink wrote.

    Returns:
        The run's `DecisionTraceReport`. A broken chain is reported in it, not raised.

    Raises:
        audit.LogFormatError: the file is missing, is not MCAP, is cut inside
            its magic bytes, or is an MCAP file from another program.
    """
    from audit import iter_run

    return trace_items(iter_run(Path(mcap_path)))


def trace_items(items: Iterable[RunItem]) -> DecisionTraceReport:
    """Build the decision trace report of a run as `audit.iter_run` streams it.

    Args:
        items: the stream, consumed once up to its `audit.ReadEnd`.

    Returns:
        The run's report (see `build_decision_trace_report`).

    Raises:
        audit.LogFormatError: as `audit.iter_run`.
    """
    from audit import ReadEnd

    builder = TraceBuilder()
    for item in items:
        builder.take(item)
        if isinstance(item, ReadEnd):
            return builder.finish(source_sha256=item.source_sha256, truncated=item.truncated)
    raise ValueError("the stream ended without a ReadEnd: it is not what audit.iter_run yields")


def trace_run(run: RunLog) -> DecisionTraceReport:
    """Build the `DecisionTraceReport` of a run already read with `audit.read_run`.

    Args:
        run: the run as the audit reader returned it.

    Returns:
        The run's report (see `build_decision_trace_report`).
    """
    builder = TraceBuilder()
    for problem in run.problems:
        builder.read_problem(problem)
    for logged in run.records:
        builder.record(logged)
    return builder.finish(source_sha256=run.source_sha256, truncated=run.truncated)


class TraceBuilder:
    """The decision trace of a run, built one record at a time as the reader streams them.

    Feed it the items of `audit.iter_run` with `take` (or records and reader
    problems with `record` and `read_problem`), in the order the reader yields
    them, then call `finish` once. Records are put back in file order
    (`LoggedRecord.position`) at the end, so a record the reader yields late
    (its channel defined later in a damaged file) is traced where the file
    holds it, as `audit.read_run` would.

    What it holds is what the report keeps. A decision is paired with the
    assessment held for its id when it arrives, and only its report record
    is kept; `finish` re-pairs the rare decision whose assessment came later
    or was replaced by a later one (last logged wins, ADR-0022). Repeated
    text (agents, verbs, rules, reasons, detector names) is held once.
    """

    __slots__ = (
        "_approvals",
        "_assessments",
        "_duplicates",
        "_read_problems",
        "_record_at",
        "_record_problems",
        "_records",
        "_seal",
        "_texts",
        "_used",
    )

    def __init__(self) -> None:
        self._assessments: dict[str, tuple[int, _LoggedAssessment]] = {}
        self._duplicates = 0
        # Per decision, in the order read: its report record, where the file
        # holds it, and the assessment it was paired with.
        self._records: list[DecisionTraceRecord] = []
        self._record_at: list[int] = []
        self._used: list[_LoggedAssessment | None] = []
        self._approvals: list[tuple[int, ApprovalTraceRecord]] = []
        self._read_problems: list[str] = []
        self._record_problems: list[tuple[int, str]] = []
        self._texts: dict[object, Any] = {}
        self._seal = SealWatch()

    def take(self, item: RunItem) -> None:
        """Trace one item of `audit.iter_run`: a record, or a problem the reader found."""
        from audit import LoggedRecord, ReadProblem

        if isinstance(item, LoggedRecord):
            self.record(item)
        elif isinstance(item, ReadProblem):
            self.read_problem(item.message)

    def read_problem(self, message: str) -> None:
        """Note damage the reader found (listed first among the report's problems)."""
        self._read_problems.append(message)

    def record(self, logged: LoggedRecord) -> None:
        """Trace one record on a ghost topic."""
        at = _file_order(logged)
        self._seal.see(logged)
        share = self._share
        if logged.topic == ASSESSMENTS_TOPIC:
            try:
                decision_id, assessment = _read_assessment(logged, share)
            except _UnreadableRecordError as exc:
                self._problem(at, _describe(logged, str(exc)))
                return
            self._notes(at, logged)
            held = self._assessments.get(decision_id)
            if held is not None:
                self._duplicates += 1
            # Last one logged wins (ADR-0022): later in the file, not later read.
            if held is None or held[0] < at:
                self._assessments[decision_id] = (at, assessment)
        elif logged.topic == DECISIONS_TOPIC:
            try:
                decision = _read_decision(logged, share)
            except _UnreadableRecordError as exc:
                self._problem(at, _describe(logged, str(exc)))
                return
            self._notes(at, logged)
            paired = _held(self._assessments.get(decision.decision_id))
            self._records.append(_pair(decision, paired))
            self._record_at.append(at)
            self._used.append(paired)
        elif logged.topic == APPROVALS_TOPIC:
            try:
                self._approvals.append((at, _read_approval(logged)))
            except _UnreadableRecordError as exc:
                self._problem(at, _describe(logged, str(exc)))
                return
            self._notes(at, logged)

    def finish(self, *, source_sha256: str, truncated: bool) -> DecisionTraceReport:
        """Return the report of everything fed so far.

        Args:
            source_sha256: the SHA-256 of the bytes read (`audit.ReadEnd`).
            truncated: the file ends as a crash leaves it.
        """
        from audit import TOPICS

        self._approvals.sort(key=_first)
        self._record_problems.sort(key=_first)
        return DecisionTraceReport.from_records(
            self._paired(),
            source_mcap_sha256=source_sha256,
            duplicate_assessment_count=self._duplicates,
            truncated=truncated,
            sealed=self._seal.sealed(TOPICS),
            approvals=[approval for _, approval in self._approvals],
            problems=[*self._read_problems, *(problem for _, problem in self._record_problems)],
        )

    def _paired(self) -> Iterator[DecisionTraceRecord]:
        records, at, used, assessments = (
            self._records,
            self._record_at,
            self._used,
            self._assessments,
        )
        order: Iterable[int] = range(len(records))
        if any(later < earlier for earlier, later in itertools.pairwise(at)):
            order = sorted(order, key=at.__getitem__)
        for index in order:
            record = records[index]
            final = _held(assessments.get(record.decision_id))
            yield record if final is used[index] else _repaired(record, final)

    def _share(self, value: _Shared) -> _Shared:
        return self._texts.setdefault(value, value)  # type: ignore[no-any-return]

    def _problem(self, at: int, message: str) -> None:
        self._record_problems.append((at, message))

    def _notes(self, at: int, logged: LoggedRecord) -> None:
        self._record_problems.extend((at, note) for note in _schema_notes(logged))


_Shared = TypeVar("_Shared", str, tuple[str, ...])


def _file_order(logged: LoggedRecord) -> int:
    # `LoggedRecord.position` as one int (a tuple costs three objects per record);
    # an offset in a chunk is a u64, so it fits below bit 64.
    offset, in_chunk = logged.position
    return (offset << 64) | (in_chunk + 1)


def _first(item: tuple[int, object]) -> int:
    return item[0]


def _held(entry: tuple[int, _LoggedAssessment] | None) -> _LoggedAssessment | None:
    return None if entry is None else entry[1]


def verify_decision_chain(mcap_path: str | os.PathLike[str]) -> tuple[bool, tuple[str, ...]]:
    """Check that every decision's claimed assessment is in the log, unaltered.

    Args:
        mcap_path: the MCAP file a ghost audit sink wrote.

    Returns:
        ``(True, ())`` when no decision is ``broken`` or ``assessment_missing``
        and the report lists no ``problems``; otherwise ``(False, messages)``
        with one sentence per such decision (naming its id, its status, and the
        claimed and recomputed hashes), then one per problem. A problem — a
        record that cannot be read, breaks its schema, or sits in a damaged
        part of the file — fails the check because a gate never writes one: a
        decision garbled beyond reading must not pass by going unseen (ADR 0007).
        Decisions that claim no assessment are legitimate and pass; a run cut
        short by a crash is not judged here (its complete records are).

    Raises:
        audit.LogFormatError: as `build_decision_trace_report`.
    """
    report = build_decision_trace_report(mcap_path)
    messages = (
        tuple(
            _chain_message(record)
            for record in report.records
            if record.chain_status in (ChainStatus.BROKEN, ChainStatus.ASSESSMENT_MISSING)
        )
        + report.problems
    )
    return not messages, messages


def _chain_message(record: DecisionTraceRecord) -> str:
    if record.chain_status is ChainStatus.BROKEN:
        return (
            f"decision {record.decision_id}: {record.chain_status.value}: it claims assessment"
            f" {record.claimed_assessment_sha256}, but the assessment logged for it hashes to"
            f" {record.recomputed_assessment_sha256} (altered or replaced)"
        )
    return (
        f"decision {record.decision_id}: {record.chain_status.value}: it claims assessment"
        f" {record.claimed_assessment_sha256}, but no assessment with that decision_id is in"
        " the log (recomputed: none)"
    )


def _pair(decision: _LoggedDecision, assessment: _LoggedAssessment | None) -> DecisionTraceRecord:
    status, claimed, recomputed = _link(decision.assessment_sha256, assessment)
    return DecisionTraceRecord(
        timestamp_ns=decision.stamp_ns,
        decision_kind=decision.verdict,
        decision_reason=decision.reason,
        policy_id=decision.policy_id,
        claimed_assessment_sha256=claimed,
        recomputed_assessment_sha256=recomputed,
        chain_status=status,
        analysis_version=ANALYSIS_VERSION,
        decision_id=decision.decision_id,
        matched_policy=decision.matched_policy,
        trace_id=decision.trace_id,
        latency_ns=decision.latency_ns,
        agent=None if assessment is None else assessment.agent,
        verb=None if assessment is None else assessment.verb,
        resource=None if assessment is None else assessment.resource,
        detectors=() if assessment is None else assessment.detectors,
        stage_ns=_NO_STAGES if assessment is None else assessment.stage_ns,
        trace_origin=decision.trace_origin,
        **_shadow_fields(assessment),
    )


def _repaired(
    record: DecisionTraceRecord, assessment: _LoggedAssessment | None
) -> DecisionTraceRecord:
    """``record`` paired with ``assessment`` instead (it came later, or replaced another)."""
    status, claimed, recomputed = _link(record.claimed_assessment_sha256, assessment)
    return dataclasses.replace(
        record,
        claimed_assessment_sha256=claimed,
        recomputed_assessment_sha256=recomputed,
        chain_status=status,
        agent=None if assessment is None else assessment.agent,
        verb=None if assessment is None else assessment.verb,
        resource=None if assessment is None else assessment.resource,
        detectors=() if assessment is None else assessment.detectors,
        stage_ns=_NO_STAGES if assessment is None else assessment.stage_ns,
        **_shadow_fields(assessment),
    )


def _shadow_fields(assessment: _LoggedAssessment | None) -> dict[str, Any]:
    shadow = None if assessment is None else assessment.shadow
    if shadow is None:
        return {
            "shadow_verdict": None,
            "shadow_matched_policy": None,
            "shadow_policy_id": None,
            "shadow_error": False,
        }
    return {
        "shadow_verdict": shadow.verdict,
        "shadow_matched_policy": shadow.matched_policy,
        "shadow_policy_id": shadow.policy_id,
        "shadow_error": shadow.error,
    }


def _read_shadow(record: Mapping[str, Any], share: Callable[[Any], Any]) -> _LoggedShadow | None:
    """The assessment's shadow, or None without one (or one with no readable verdict)."""
    shadow = record.get("shadow")
    if not isinstance(shadow, dict):
        return None
    verdict = shadow.get("verdict")
    if not isinstance(verdict, str) or verdict not in _VERDICT_VALUES:
        return None  # the schema note names the break
    return _LoggedShadow(
        verdict=RuntimeVerdict(verdict),
        matched_policy=_shared(share, _lenient_text(shadow, "matched_policy")),
        policy_id=_shared(share, _lenient_text(shadow, "policy_id")),
        error=shadow.get("error") is not None,
    )


def _link(
    claimed: str | None, assessment: _LoggedAssessment | None
) -> tuple[ChainStatus, str | None, str | None]:
    """The chain status of a claim, the claim and the recomputed address (ADR-0022)."""
    recomputed = None if assessment is None else assessment.sha256
    if claimed is None:
        return ChainStatus.NO_ASSESSMENT_CLAIMED, None, None
    if recomputed is None:
        return ChainStatus.ASSESSMENT_MISSING, claimed, None
    if recomputed == claimed:
        return ChainStatus.VERIFIED, recomputed, recomputed  # one string held, not two
    return ChainStatus.BROKEN, claimed, recomputed


def _describe(logged: LoggedRecord, why: str) -> str:
    return (
        f"{logged.topic} message with sequence {logged.sequence} (log time"
        f" {logged.log_time_ns} ns, sha256 {logged.sha256}) could not be read: {why};"
        " it is left out of the counts"
    )


def _schema_notes(logged: LoggedRecord) -> tuple[str, ...]:
    """Say so when a record the trace could use still breaks its schema elsewhere.

    Such a record stays in the trace (an altered assessment must count as
    ``broken``, not vanish as ``assessment_missing``), but not silently.
    """
    from audit import schema_problems, schema_valid

    assert logged.record is not None  # only called on records that were read
    # schema_valid is sound (ADR 0026): True means schema_problems finds nothing.
    found = () if schema_valid(logged.record) else schema_problems(logged.record)
    if not found:
        return ()
    note = (
        f"{logged.topic} message with sequence {logged.sequence} (sha256 {logged.sha256})"
        f" does not match its schema: {'; '.join(found)}; it is traced all the same"
    )
    return (note,)


def _checked_record(logged: LoggedRecord, schema: str) -> Mapping[str, Any]:
    record = logged.record
    if record is None:
        raise _UnreadableRecordError(logged.problem or "it is not a JSON object")
    found = record.get("schema")
    if found != schema:
        raise _UnreadableRecordError(f"its schema is {found!r}, expected {schema!r}")
    return record


def _read_assessment(
    logged: LoggedRecord, share: Callable[[Any], Any] = lambda value: value
) -> tuple[str, _LoggedAssessment]:
    """The assessment's id and what the trace shows of it; ``share`` dedupes repeated text."""
    record = _checked_record(logged, ASSESSMENT_SCHEMA)
    decision_id = _text(record, "decision_id")
    findings = record.get("findings")
    detectors = sorted(
        {
            finding["detector"]
            for finding in (findings if isinstance(findings, list) else ())
            if isinstance(finding, dict) and _is_text(finding.get("detector"))
        }
    )
    stages = record.get("stage_ns")
    stage_ns = FrozenCounts(
        (share(name), spent)
        for name, spent in (stages.items() if isinstance(stages, dict) else ())
        if _is_text(name) and type(spent) is int and spent >= 0  # the gate never logs < 0
    )
    return decision_id, _LoggedAssessment(
        sha256=logged.sha256,
        agent=_shared(share, _lenient_text(record, "agent")),
        verb=_shared(share, _lenient_text(record, "verb")),
        resource=_shared(share, _lenient_text(record, "resource")),
        detectors=share(tuple(share(name) for name in detectors)),
        stage_ns=stage_ns,
        shadow=_read_shadow(record, share),
    )


def _read_decision(
    logged: LoggedRecord, share: Callable[[Any], Any] = lambda value: value
) -> _LoggedDecision:
    """The decision's fields the trace uses, type-checked; ``share`` dedupes repeated text."""
    record = _checked_record(logged, DECISION_SCHEMA)
    verdict = _text(record, "verdict")
    if verdict not in _VERDICT_VALUES:
        raise _UnreadableRecordError(f"its verdict {verdict!r} is not one of {_VERDICTS}")
    return _LoggedDecision(
        decision_id=_text(record, "decision_id"),
        stamp_ns=_integer(record, "stamp_ns"),
        verdict=RuntimeVerdict(verdict),
        reason=share(_text(record, "reason")),
        matched_policy=_shared(share, _optional_text(record, "matched_policy")),
        policy_id=share(_text(record, "policy_id")),
        assessment_sha256=_optional_text(record, "assessment_sha256"),
        trace_id=_text(record, "trace_id"),
        latency_ns=_integer(record, "latency_ns"),
        trace_origin=_shared(share, _lenient_text(record, "trace_origin")),
    )


def _shared(share: Callable[[Any], Any], value: str | None) -> str | None:
    return None if value is None else share(value)


def _read_approval(logged: LoggedRecord) -> ApprovalTraceRecord:
    record = _checked_record(logged, APPROVAL_SCHEMA)
    outcome = _text(record, "outcome")
    if outcome not in APPROVAL_OUTCOMES:
        raise _UnreadableRecordError(
            f"its outcome {outcome!r} is not one of {', '.join(APPROVAL_OUTCOMES)}"
        )
    return ApprovalTraceRecord(
        decision_id=_text(record, "decision_id"),
        outcome=outcome,
        wait_ns=_integer(record, "wait_ns"),
        decision_run_id=_optional_text(record, "decision_run_id"),
    )


def _is_text(value: object) -> bool:
    """A str that a report can hold (no lone surrogate)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _lenient_text(record: Mapping[str, Any], name: str) -> str | None:
    value = record.get(name)
    return value if isinstance(value, str) and _is_text(value) else None


def _field(record: Mapping[str, Any], name: str) -> object:
    if name not in record:
        raise _UnreadableRecordError(f"it has no {name!r} field")
    return record[name]


def _text(record: Mapping[str, Any], name: str) -> str:
    value = _field(record, name)
    if not isinstance(value, str):
        raise _UnreadableRecordError(f"its {name!r} is {json_type_name(value)}, expected a string")
    _check_unicode(value, name)
    return value


def _optional_text(record: Mapping[str, Any], name: str) -> str | None:
    value = _field(record, name)
    if value is not None and not isinstance(value, str):
        raise _UnreadableRecordError(
            f"its {name!r} is {json_type_name(value)}, expected a string or null"
        )
    if value is not None:
        _check_unicode(value, name)
    return value


def _check_unicode(value: str, name: str) -> None:
    # JSON's \ud800 escapes parse to lone surrogates, which no report can encode as UTF-8.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _UnreadableRecordError(
            f"its {name!r} holds a lone surrogate (not Unicode text)"
        ) from None


def _integer(record: Mapping[str, Any], name: str) -> int:
    value = _field(record, name)
    # bool is an int subclass, but true is not a count of nanoseconds.
    if type(value) is not int:
        raise _UnreadableRecordError(
            f"its {name!r} is {json_type_name(value)}, expected an integer"
        )
    return value
