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

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from analysis._json_types import json_type_name
from analysis._run_facts import is_sealed
from analysis._trace_model import (
    ANALYSIS_VERSION,
    APPROVAL_OUTCOMES,
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    DecisionTraceReport,
)
from runtime import RuntimeVerdict

if TYPE_CHECKING:
    # The reader (and `mcap` behind it) is imported only when a file is read,
    # so that `import analysis` and `ghost --help` stay light.
    from audit import LoggedRecord, RunLog

__all__ = ["build_decision_trace_report", "trace_run", "verify_decision_chain"]

ASSESSMENTS_TOPIC: Final = "/assessments"
DECISIONS_TOPIC: Final = "/decisions"
APPROVALS_TOPIC: Final = "/approvals"
ASSESSMENT_SCHEMA: Final = "ghost.assessment/1"
DECISION_SCHEMA: Final = "ghost.decision/1"
APPROVAL_SCHEMA: Final = "ghost.approval/1"

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
    stage_ns: dict[str, int]


def build_decision_trace_report(mcap_path: str | os.PathLike[str]) -> DecisionTraceReport:
    """Read a captured run and pair each decision with its assessment.

    Args:
        mcap_path: the MCAP file a ghost audit sink wrote.

    Returns:
        The run's `DecisionTraceReport`. A broken chain is reported in it, not raised.

    Raises:
        audit.LogFormatError: the file is missing, is not MCAP, is cut inside
            its magic bytes, or is an MCAP file from another program.
    """
    from audit import read_run

    return trace_run(read_run(Path(mcap_path)))


def trace_run(run: RunLog) -> DecisionTraceReport:
    """Build the `DecisionTraceReport` of a run already read with `audit.read_run`.

    Args:
        run: the run as the audit reader returned it.

    Returns:
        The run's report (see `build_decision_trace_report`).
    """
    from audit import TOPICS

    assessment_by_decision: dict[str, _LoggedAssessment] = {}
    duplicate_assessments = 0
    decisions: list[_LoggedDecision] = []
    approvals: list[ApprovalTraceRecord] = []
    problems: list[str] = list(run.problems)

    for logged in run.records:
        if logged.topic == ASSESSMENTS_TOPIC:
            try:
                decision_id, assessment = _read_assessment(logged)
            except _UnreadableRecordError as exc:
                problems.append(_describe(logged, str(exc)))
                continue
            problems.extend(_schema_notes(logged))
            if decision_id in assessment_by_decision:
                duplicate_assessments += 1
            # Last one logged wins (ADR-0022): the index is simply overwritten.
            assessment_by_decision[decision_id] = assessment
        elif logged.topic == DECISIONS_TOPIC:
            try:
                decisions.append(_read_decision(logged))
            except _UnreadableRecordError as exc:
                problems.append(_describe(logged, str(exc)))
                continue
            problems.extend(_schema_notes(logged))
        elif logged.topic == APPROVALS_TOPIC:
            try:
                approvals.append(_read_approval(logged))
            except _UnreadableRecordError as exc:
                problems.append(_describe(logged, str(exc)))
                continue
            problems.extend(_schema_notes(logged))

    records = tuple(
        _pair(decision, assessment_by_decision.get(decision.decision_id)) for decision in decisions
    )
    return DecisionTraceReport.from_records(
        records,
        source_mcap_sha256=run.source_sha256,
        duplicate_assessment_count=duplicate_assessments,
        truncated=run.truncated,
        sealed=is_sealed(run.records, TOPICS),
        approvals=approvals,
        problems=problems,
    )


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
    recomputed = None if assessment is None else assessment.sha256
    claimed = decision.assessment_sha256
    if claimed is None:
        status, recomputed = ChainStatus.NO_ASSESSMENT_CLAIMED, None
    elif recomputed is None:
        status = ChainStatus.ASSESSMENT_MISSING
    elif recomputed == claimed:
        status = ChainStatus.VERIFIED
    else:
        status = ChainStatus.BROKEN
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
        stage_ns={} if assessment is None else assessment.stage_ns,
        trace_origin=decision.trace_origin,
    )


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
    from audit import schema_problems

    assert logged.record is not None  # only called on records that were read
    found = schema_problems(logged.record)
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


def _read_assessment(logged: LoggedRecord) -> tuple[str, _LoggedAssessment]:
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
    stage_ns = {
        name: spent
        for name, spent in (stages.items() if isinstance(stages, dict) else ())
        if _is_text(name) and type(spent) is int and spent >= 0  # the gate never logs < 0
    }
    return decision_id, _LoggedAssessment(
        sha256=logged.sha256,
        agent=_lenient_text(record, "agent"),
        verb=_lenient_text(record, "verb"),
        resource=_lenient_text(record, "resource"),
        detectors=tuple(detectors),
        stage_ns=stage_ns,
    )


def _read_decision(logged: LoggedRecord) -> _LoggedDecision:
    record = _checked_record(logged, DECISION_SCHEMA)
    verdict = _text(record, "verdict")
    if verdict not in _VERDICT_VALUES:
        raise _UnreadableRecordError(f"its verdict {verdict!r} is not one of {_VERDICTS}")
    return _LoggedDecision(
        decision_id=_text(record, "decision_id"),
        stamp_ns=_integer(record, "stamp_ns"),
        verdict=RuntimeVerdict(verdict),
        reason=_text(record, "reason"),
        matched_policy=_optional_text(record, "matched_policy"),
        policy_id=_text(record, "policy_id"),
        assessment_sha256=_optional_text(record, "assessment_sha256"),
        trace_id=_text(record, "trace_id"),
        latency_ns=_integer(record, "latency_ns"),
        trace_origin=_lenient_text(record, "trace_origin"),
    )


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
