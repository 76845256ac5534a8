"""The decision trace report as canonical JSON, and back (ADR-0022 §5).

The encoding is meant to be diffed, hashed and archived beside the run it
describes: keys sorted, two-space indent, non-ASCII kept, a trailing newline,
UTF-8. Encoding is deterministic, so the SHA-256 of the bytes is stable across
processes. Decoding is strict: a report with a missing, extra, mistyped or
inconsistent field is refused, never half-read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import orjson

from analysis._decision_trace import build_decision_trace_report
from analysis._json_types import JSON_TYPE_NAMES, json_type_name
from analysis._trace_model import (
    ANALYSIS_VERSION,
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    DecisionTraceReport,
)
from analysis._trace_stats import LatencyStats
from analysis._trace_tallies import ReportHead
from runtime import RuntimeVerdict, StrictJSONError, loads_strict

__all__ = [
    "LIST_FIELDS",
    "decode_decision_trace_report_from_json",
    "encode_decision_trace_report_to_bytes",
    "generate_decision_trace_report",
    "head_document",
    "list_item_bytes",
]

_T = TypeVar("_T")

_RECORD_FIELDS: Final = frozenset(DecisionTraceRecord.__dataclass_fields__)
_REPORT_FIELDS: Final = frozenset(DecisionTraceReport.__dataclass_fields__)
_APPROVAL_FIELDS: Final = frozenset(ApprovalTraceRecord.__dataclass_fields__)
_STATS_FIELDS: Final = frozenset(LatencyStats.__dataclass_fields__)
# Derived by the report from its records and approvals: checked, never taken from the JSON.
_DERIVED_STATS: Final = ("latency_ns_stats", "approval_wait_ns_stats")
_DERIVED_STATS_BY: Final = (
    "latency_ns_by_verdict",
    "stage_ns_by_stage",
    "approval_wait_ns_by_outcome",
)
_INDENTED: Final = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
_DERIVED_COUNTS: Final = (
    "per_matched_policy_counts",
    "per_agent_counts",
    "per_detector_counts",
    "per_trace_origin_counts",
    "shadow_disagreement_counts",
    "shadow_disagreements_by_rule",
)


def encode_decision_trace_report_to_bytes(report: DecisionTraceReport) -> bytes:
    """Return the canonical JSON bytes of a report.

    Args:
        report: the report to encode.

    Returns:
        UTF-8 JSON with sorted keys, an indent of 2, non-ASCII characters kept
        as they are, and a trailing newline. Equal reports give equal bytes.
    """
    document = head_document(report)
    document["records"] = [_record_to_json(record) for record in report.records]
    document["approvals"] = [_approval_to_json(approval) for approval in report.approvals]
    document["problems"] = list(report.problems)
    document["unresolved_pending_decision_ids"] = list(report.unresolved_pending_decision_ids)
    return _indented_bytes(document)


LIST_FIELDS: Final = ("approvals", "problems", "records", "unresolved_pending_decision_ids")
"""The report's fields that list something per record, in the order their keys sort."""


def head_document(report: DecisionTraceReport | ReportHead) -> dict[str, Any]:
    """The JSON document of every field of ``report`` but the four `LIST_FIELDS`."""
    document: dict[str, Any] = {
        "source_mcap_sha256": report.source_mcap_sha256,
        "total_decisions": report.total_decisions,
        "verified_count": report.verified_count,
        "broken_count": report.broken_count,
        "assessment_missing_count": report.assessment_missing_count,
        "no_assessment_claimed_count": report.no_assessment_claimed_count,
        "per_decision_kind_counts": dict(report.per_decision_kind_counts),
        "per_policy_id_counts": dict(report.per_policy_id_counts),
        "timestamp_first_ns": report.timestamp_first_ns,
        "timestamp_last_ns": report.timestamp_last_ns,
        "timestamp_span_ns": report.timestamp_span_ns,
        "analysis_version": report.analysis_version,
        "duplicate_assessment_count": report.duplicate_assessment_count,
        "truncated": report.truncated,
        "sealed": report.sealed,
        "per_approval_outcome_counts": dict(report.per_approval_outcome_counts),
    }
    for name in _DERIVED_STATS:
        document[name] = _stats_to_json(getattr(report, name))
    for name in _DERIVED_STATS_BY:
        document[name] = {
            key: _stats_to_json(stats) for key, stats in getattr(report, name).items()
        }
    for name in _DERIVED_COUNTS:
        document[name] = dict(getattr(report, name))
    document["shadow_decision_count"] = report.shadow_decision_count
    document["shadow_disagreement_ids"] = {
        pair: list(ids) for pair, ids in report.shadow_disagreement_ids
    }
    return document


def list_item_bytes(value: Any) -> bytes:
    """``value`` as an item of one of the report's `LIST_FIELDS`: indented by four, no newline.

    `_indented_bytes` at that depth: its lines are the lines of ``value``'s
    own indented JSON, each four spaces further in (JSON strings hold no raw
    newline, so every newline in it ends a line).
    """
    try:
        dumped = orjson.dumps(value, option=_INDENTED)
    except orjson.JSONEncodeError:
        dumped = _indented_bytes(value)[:-1]
    return b"    " + dumped.replace(b"\n", b"\n    ")


def _indented_bytes(document: Any) -> bytes:
    """``json.dumps(sort_keys, indent=2, ensure_ascii=False)`` and a newline, as UTF-8.

    orjson writes the same bytes in one buffer; the standard library's
    indenting encoder is pure Python and, on a 20,000-decision report, held
    about six times the output in small strings (P4's memory target). A value
    orjson refuses (an integer beyond 64 bits) falls back to the standard
    encoder, whose bytes a test holds equal.
    """
    try:
        return orjson.dumps(document, option=_INDENTED) + b"\n"
    except orjson.JSONEncodeError:
        text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
        return (text + "\n").encode("utf-8")


def decode_decision_trace_report_from_json(data: bytes | str) -> DecisionTraceReport:
    """Parse the canonical JSON of a report back into a `DecisionTraceReport`.

    Any JSON layout is accepted (the canonical one is not required), but the
    content is checked strictly: exactly the report's fields, each of its type,
    and counts consistent with the records.

    Args:
        data: the JSON text, or its UTF-8 bytes.

    Returns:
        The report, equal field by field to the one that was encoded.

    Raises:
        ValueError: the data is not UTF-8 JSON, an object has a duplicate,
            missing or unknown field, a field has the wrong type or value, the
            ``analysis_version`` is not this analyzer's, or the report is
            inconsistent (its counts or timestamps disagree with its records).
    """
    raw = bytes(data) if isinstance(data, bytearray | memoryview) else data
    try:
        document = loads_strict(raw)
    except StrictJSONError as exc:
        raise ValueError(f"decision trace report is not strict JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"decision trace report is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("decision trace report nests too deeply to parse") from None

    fields = _fields(document, "report", _REPORT_FIELDS)
    version = _get(fields, "analysis_version", int, "report")
    if version != ANALYSIS_VERSION:
        raise ValueError(
            f"decision trace report has analysis_version {version}; this analyzer reads"
            f" version {ANALYSIS_VERSION}"
        )
    raw_records = _get(fields, "records", list, "report")
    raw_problems = _get(fields, "problems", list, "report")
    raw_unresolved = _get(fields, "unresolved_pending_decision_ids", list, "report")
    raw_approvals = _get(fields, "approvals", list, "report")
    claimed: dict[str, object] = {name: _stats(fields, name) for name in _DERIVED_STATS}
    claimed.update((name, _stats_by(fields, name)) for name in _DERIVED_STATS_BY)
    claimed.update((name, _counts(fields, name)) for name in _DERIVED_COUNTS)
    claimed["shadow_decision_count"] = _get(fields, "shadow_decision_count", int, "report")
    claimed["shadow_disagreement_ids"] = _ids_by_pair(fields)
    try:
        report = DecisionTraceReport(
            source_mcap_sha256=_get(fields, "source_mcap_sha256", str, "report"),
            total_decisions=_get(fields, "total_decisions", int, "report"),
            verified_count=_get(fields, "verified_count", int, "report"),
            broken_count=_get(fields, "broken_count", int, "report"),
            assessment_missing_count=_get(fields, "assessment_missing_count", int, "report"),
            no_assessment_claimed_count=_get(fields, "no_assessment_claimed_count", int, "report"),
            per_decision_kind_counts=_counts(fields, "per_decision_kind_counts"),
            per_policy_id_counts=_counts(fields, "per_policy_id_counts"),
            timestamp_first_ns=_get_optional(fields, "timestamp_first_ns", int, "report"),
            timestamp_last_ns=_get_optional(fields, "timestamp_last_ns", int, "report"),
            timestamp_span_ns=_get_optional(fields, "timestamp_span_ns", int, "report"),
            records=tuple(
                _record_from_json(item, f"records[{index}]")
                for index, item in enumerate(raw_records)
            ),
            analysis_version=version,
            duplicate_assessment_count=_get(fields, "duplicate_assessment_count", int, "report"),
            truncated=_get(fields, "truncated", bool, "report"),
            sealed=_get(fields, "sealed", bool, "report"),
            per_approval_outcome_counts=_counts(fields, "per_approval_outcome_counts"),
            unresolved_pending_decision_ids=tuple(
                _expect(item, str, f"unresolved_pending_decision_ids[{index}]")
                for index, item in enumerate(raw_unresolved)
            ),
            approvals=tuple(
                _approval_from_json(item, f"approvals[{index}]")
                for index, item in enumerate(raw_approvals)
            ),
            problems=tuple(
                _expect(item, str, f"problems[{index}]") for index, item in enumerate(raw_problems)
            ),
        )
    except _FieldError:
        raise
    except ValueError as exc:
        raise ValueError(f"decision trace report is inconsistent: {exc}") from None
    for name, value in claimed.items():
        if value != getattr(report, name):
            raise ValueError(
                f"decision trace report is inconsistent: {name} disagrees with what its"
                " records and approvals give"
            )
    return report


def generate_decision_trace_report(
    mcap_path: str | os.PathLike[str], output_path: str | os.PathLike[str] | None = None
) -> bytes:
    """Build the report of a captured run and return (and optionally write) its JSON.

    Args:
        mcap_path: the MCAP file a ghost audit sink wrote.
        output_path: where to write the JSON; nothing is written when None.

    Returns:
        The canonical JSON bytes (`encode_decision_trace_report_to_bytes`).

    Raises:
        audit.LogFormatError: the file is missing, not MCAP, or not a ghost log.
        OSError: ``output_path`` cannot be written.
    """
    data = encode_decision_trace_report_to_bytes(build_decision_trace_report(mcap_path))
    if output_path is not None:
        Path(output_path).write_bytes(data)
    return data


class _FieldError(ValueError):
    """A field of the JSON document is missing, unknown, or of the wrong type."""


def _record_to_json(record: DecisionTraceRecord) -> dict[str, Any]:
    return {
        "timestamp_ns": record.timestamp_ns,
        "decision_kind": record.decision_kind.value,
        "decision_reason": record.decision_reason,
        "policy_id": record.policy_id,
        "claimed_assessment_sha256": record.claimed_assessment_sha256,
        "recomputed_assessment_sha256": record.recomputed_assessment_sha256,
        "chain_status": record.chain_status.value,
        "analysis_version": record.analysis_version,
        "decision_id": record.decision_id,
        "matched_policy": record.matched_policy,
        "trace_id": record.trace_id,
        "latency_ns": record.latency_ns,
        "agent": record.agent,
        "verb": record.verb,
        "resource": record.resource,
        "detectors": list(record.detectors),
        "stage_ns": dict(record.stage_ns),
        "trace_origin": record.trace_origin,
        "shadow_verdict": None if record.shadow_verdict is None else record.shadow_verdict.value,
        "shadow_matched_policy": record.shadow_matched_policy,
        "shadow_policy_id": record.shadow_policy_id,
        "shadow_error": record.shadow_error,
    }


def _approval_to_json(approval: ApprovalTraceRecord) -> dict[str, Any]:
    return {
        "decision_id": approval.decision_id,
        "outcome": approval.outcome,
        "wait_ns": approval.wait_ns,
        "decision_run_id": approval.decision_run_id,
    }


def _stats_to_json(stats: LatencyStats | None) -> dict[str, int] | None:
    if stats is None:
        return None
    return {name: getattr(stats, name) for name in sorted(_STATS_FIELDS)}


def _record_from_json(item: object, where: str) -> DecisionTraceRecord:
    fields = _fields(item, where, _RECORD_FIELDS)
    return DecisionTraceRecord(
        timestamp_ns=_get(fields, "timestamp_ns", int, where),
        decision_kind=_member(fields, "decision_kind", RuntimeVerdict, where),
        decision_reason=_get(fields, "decision_reason", str, where),
        policy_id=_get(fields, "policy_id", str, where),
        claimed_assessment_sha256=_get_optional(fields, "claimed_assessment_sha256", str, where),
        recomputed_assessment_sha256=_get_optional(
            fields, "recomputed_assessment_sha256", str, where
        ),
        chain_status=_member(fields, "chain_status", ChainStatus, where),
        analysis_version=_get(fields, "analysis_version", int, where),
        decision_id=_get(fields, "decision_id", str, where),
        matched_policy=_get_optional(fields, "matched_policy", str, where),
        trace_id=_get(fields, "trace_id", str, where),
        latency_ns=_get(fields, "latency_ns", int, where),
        agent=_get_optional(fields, "agent", str, where),
        verb=_get_optional(fields, "verb", str, where),
        resource=_get_optional(fields, "resource", str, where),
        detectors=tuple(
            _expect(item, str, f"{where}.detectors[{index}]")
            for index, item in enumerate(_get(fields, "detectors", list, where))
        ),
        stage_ns=_counts(fields, "stage_ns", where),
        trace_origin=_get_optional(fields, "trace_origin", str, where),
        shadow_verdict=(
            None
            if fields["shadow_verdict"] is None
            else _member(fields, "shadow_verdict", RuntimeVerdict, where)
        ),
        shadow_matched_policy=_get_optional(fields, "shadow_matched_policy", str, where),
        shadow_policy_id=_get_optional(fields, "shadow_policy_id", str, where),
        shadow_error=_get(fields, "shadow_error", bool, where),
    )


def _ids_by_pair(fields: Mapping[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    raw = _get(fields, "shadow_disagreement_ids", dict, "report")
    return tuple(
        (
            pair,
            tuple(
                _expect(item, str, f"shadow_disagreement_ids.{pair}[{index}]")
                for index, item in enumerate(_expect(ids, list, f"shadow_disagreement_ids.{pair}"))
            ),
        )
        for pair, ids in sorted(raw.items())
    )


def _approval_from_json(item: object, where: str) -> ApprovalTraceRecord:
    fields = _fields(item, where, _APPROVAL_FIELDS)
    return ApprovalTraceRecord(
        decision_id=_get(fields, "decision_id", str, where),
        outcome=_get(fields, "outcome", str, where),
        wait_ns=_get(fields, "wait_ns", int, where),
        decision_run_id=_get_optional(fields, "decision_run_id", str, where),
    )


def _stats(fields: Mapping[str, Any], name: str, where: str = "report") -> LatencyStats | None:
    raw = fields[name]
    if raw is None:
        return None
    inner = f"{where}.{name}" if where != "report" else name
    stats = _fields(raw, inner, _STATS_FIELDS)
    try:
        return LatencyStats(**{key: _get(stats, key, int, inner) for key in sorted(_STATS_FIELDS)})
    except _FieldError:
        raise
    except ValueError as exc:
        raise ValueError(f"decision trace report is inconsistent: {inner}: {exc}") from None


def _stats_by(fields: Mapping[str, Any], name: str) -> dict[str, LatencyStats]:
    raw = fields[name]
    if not isinstance(raw, dict):
        raise _FieldError(
            f"decision trace report: {name} must be an object, got {json_type_name(raw)}"
        )
    found: dict[str, LatencyStats] = {}
    for key in raw:
        stats = _stats(raw, key, name)
        if stats is None:
            raise _FieldError(f"decision trace report: {name}[{key!r}] must be an object, got null")
        found[key] = stats
    return found


def _fields(value: object, where: str, expected: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _FieldError(
            f"decision trace report: {where} must be an object, got {json_type_name(value)}"
        )
    missing = sorted(expected - value.keys())
    unknown = sorted(value.keys() - expected)
    if missing:
        raise _FieldError(f"decision trace report: {where} lacks field(s) {', '.join(missing)}")
    if unknown:
        raise _FieldError(
            f"decision trace report: {where} has unknown field(s) {', '.join(unknown)}"
        )
    return value


def _expect(value: object, kind: type[_T], where: str) -> _T:
    # type() rather than isinstance(): true must not pass for an integer.
    if type(value) is not kind:
        expected = JSON_TYPE_NAMES[kind]
        raise _FieldError(
            f"decision trace report: {where} must be {expected}, got {json_type_name(value)}"
        )
    return value


def _get(fields: Mapping[str, Any], name: str, kind: type[_T], where: str) -> _T:
    return _expect(fields[name], kind, f"{where}.{name}")


def _get_optional(fields: Mapping[str, Any], name: str, kind: type[_T], where: str) -> _T | None:
    value = fields[name]
    return None if value is None else _expect(value, kind, f"{where}.{name}")


def _member(fields: Mapping[str, Any], name: str, enum: Callable[[str], _T], where: str) -> _T:
    text = _get(fields, name, str, where)
    try:
        return enum(text)
    except ValueError:
        raise _FieldError(
            f"decision trace report: {where}.{name} {text!r} is not a known value"
        ) from None


def _counts(fields: Mapping[str, Any], name: str, where: str = "report") -> dict[str, int]:
    raw = fields[name]
    inner = f"{where}.{name}" if where != "report" else name
    if not isinstance(raw, dict):
        raise _FieldError(
            f"decision trace report: {inner} must be an object, got {json_type_name(raw)}"
        )
    return {key: _expect(count, int, f"{inner}[{key!r}]") for key, count in raw.items()}
