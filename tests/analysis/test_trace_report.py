"""The report as a value: its invariants, its canonical JSON, and strict decoding."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import analysis
from analysis import (
    ANALYSIS_VERSION,
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    DecisionTraceReport,
    FrozenCounts,
    decode_decision_trace_report_from_json,
    encode_decision_trace_report_to_bytes,
)
from runtime import RuntimeVerdict
from tests.strategies import (
    decision_trace_records,
    decision_trace_reports,
    decision_trace_reports_with_approvals,
)

SHA_A = "a" * 64
SHA_B = "b" * 64


def make_record(status: ChainStatus = ChainStatus.VERIFIED, **changes: Any) -> DecisionTraceRecord:
    claimed, recomputed = {
        ChainStatus.VERIFIED: (SHA_A, SHA_A),
        ChainStatus.BROKEN: (SHA_A, SHA_B),
        ChainStatus.ASSESSMENT_MISSING: (SHA_A, None),
        ChainStatus.NO_ASSESSMENT_CLAIMED: (None, None),
    }[status]
    fields: dict[str, Any] = {
        "timestamp_ns": 1_000,
        "decision_kind": RuntimeVerdict.ALLOW,
        "decision_reason": "rule 'read-public' allows it — café ☕",
        "policy_id": "support-agent",
        "claimed_assessment_sha256": claimed,
        "recomputed_assessment_sha256": recomputed,
        "chain_status": status,
        "analysis_version": ANALYSIS_VERSION,
        "decision_id": "0194a3c1-7e2f-7000-8000-000000000001",
        "matched_policy": "read-public",
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "latency_ns": 52_000,
    }
    fields.update(changes)
    return DecisionTraceRecord(**fields)


def make_report() -> DecisionTraceReport:
    records = (
        make_record(
            ChainStatus.VERIFIED,
            timestamp_ns=3_000,
            agent="support",
            detectors=("email",),
            stage_ns={"policy": 7, "scrub": 9},
        ),
        make_record(
            ChainStatus.BROKEN,
            timestamp_ns=1_000,
            decision_kind="deny",
            agent="support",
            detectors=("aws_access_key", "email"),
        ),
        make_record(ChainStatus.NO_ASSESSMENT_CLAIMED, timestamp_ns=2_000, policy_id="ops"),
    )
    return DecisionTraceReport(
        source_mcap_sha256="c" * 64,
        total_decisions=3,
        verified_count=1,
        broken_count=1,
        assessment_missing_count=0,
        no_assessment_claimed_count=1,
        per_decision_kind_counts={"allow": 2, "deny": 1},
        per_policy_id_counts={"support-agent": 2, "ops": 1},
        timestamp_first_ns=1_000,
        timestamp_last_ns=3_000,
        timestamp_span_ns=2_000,
        records=records,
        analysis_version=ANALYSIS_VERSION,
        duplicate_assessment_count=0,
        truncated=False,
        sealed=True,
        problems=("a problem — named",),
        per_approval_outcome_counts={"approved": 1},
        approvals=(
            ApprovalTraceRecord("0194a3c1-7e2f-7000-8000-0000000000ff", "approved", 5, "r"),
        ),
    )


# --- round trip and canonical bytes ------------------------------------------------------


@given(decision_trace_reports(), st.booleans())
def test_decode_of_encode_is_the_same_report(report: DecisionTraceReport, sealed: bool) -> None:
    report = dataclasses.replace(report, sealed=sealed)
    data = encode_decision_trace_report_to_bytes(report)
    decoded = decode_decision_trace_report_from_json(data)

    assert decoded == report
    for field in dataclasses.fields(DecisionTraceReport):
        assert getattr(decoded, field.name) == getattr(report, field.name), field.name
    assert hash(decoded) == hash(report)
    assert decode_decision_trace_report_from_json(data.decode("utf-8")) == report


@given(decision_trace_reports())
def test_encoding_is_canonical_and_deterministic(report: DecisionTraceReport) -> None:
    data = encode_decision_trace_report_to_bytes(report)

    assert encode_decision_trace_report_to_bytes(report) == data
    assert data.endswith(b"\n")
    assert not data.endswith(b"\n\n")
    text = data.decode("utf-8")
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"
    # The bytes depend on the value only, not on how the value was built.
    rebuilt = decode_decision_trace_report_from_json(data)
    assert encode_decision_trace_report_to_bytes(rebuilt) == data


@given(decision_trace_reports_with_approvals())
def test_approval_fields_survive_the_round_trip(report: DecisionTraceReport) -> None:
    decoded = decode_decision_trace_report_from_json(encode_decision_trace_report_to_bytes(report))
    assert decoded == report
    assert decoded.per_approval_outcome_counts == report.per_approval_outcome_counts
    assert decoded.unresolved_pending_decision_ids == report.unresolved_pending_decision_ids
    pending = {r.decision_id for r in report.records if r.decision_kind == "pending"}
    assert set(report.unresolved_pending_decision_ids) <= pending


def test_non_ascii_is_kept_as_utf8() -> None:
    data = encode_decision_trace_report_to_bytes(make_report())

    assert "café ☕".encode() in data
    assert b"\\u" not in data
    assert b'\n  "analysis_version": 5,\n' in data
    assert b'\n  "sealed": true,\n' in data


def test_the_encoded_report_has_exactly_the_report_fields() -> None:
    document = json.loads(encode_decision_trace_report_to_bytes(make_report()))

    assert set(document) == {field.name for field in dataclasses.fields(DecisionTraceReport)}
    assert set(document["records"][0]) == {
        field.name for field in dataclasses.fields(DecisionTraceRecord)
    }
    assert document["records"][1]["chain_status"] == "broken"
    assert document["records"][1]["decision_kind"] == "deny"


# --- strict decoding ----------------------------------------------------------------------


def encoded_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(encode_decision_trace_report_to_bytes(make_report()))
    return document


def decode_document(document: object) -> DecisionTraceReport:
    return decode_decision_trace_report_from_json(json.dumps(document))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("broken_count"), "report lacks field.*broken_count"),
        (lambda d: d.update(colour="blue"), "report has unknown field.*colour"),
        (lambda d: d.update(total_decisions="3"), r"report\.total_decisions must be an integer"),
        (lambda d: d.update(truncated=1), r"report\.truncated must be a boolean"),
        (lambda d: d.update(sealed=None), r"report\.sealed must be a boolean"),
        (lambda d: d.pop("sealed"), "report lacks field.*sealed"),
        (lambda d: d.update(verified_count=True), r"verified_count must be an integer"),
        (lambda d: d.update(verified_count=1.0), r"verified_count must be an integer, got a num"),
        (lambda d: d.update(records={}), r"report\.records must be an array"),
        (lambda d: d.update(problems=[1]), r"problems\[0\] must be a string"),
        (lambda d: d.update(per_policy_id_counts=[]), "per_policy_id_counts must be an object"),
        (
            lambda d: d["per_policy_id_counts"].update(ops="1"),
            r"per_policy_id_counts\['ops'\] must be an integer",
        ),
        (lambda d: d.update(analysis_version=1), "analysis_version 1; this analyzer reads"),
        (lambda d: d.update(analysis_version=3), "analysis_version 3; this analyzer reads"),
        (lambda d: d.update(analysis_version=4), "analysis_version 4; this analyzer reads"),
        (lambda d: d.update(analysis_version=6), "analysis_version 6; this analyzer reads"),
        (lambda d: d["records"][0].pop("trace_id"), r"records\[0\] lacks field.*trace_id"),
        (lambda d: d["records"][0].update(extra=0), r"records\[0\] has unknown field.*extra"),
        (
            lambda d: d["records"][1].update(chain_status="fine"),
            r"records\[1\]\.chain_status 'fine' is not a known value",
        ),
        (
            lambda d: d["records"][1].update(decision_kind="approval"),
            r"records\[1\]\.decision_kind 'approval' is not a known value",
        ),
        (lambda d: d["records"][0].update(latency_ns=None), r"latency_ns must be an integer"),
        (lambda d: d.update(verified_count=2), "inconsistent: counts invariant violated"),
        (lambda d: d.update(timestamp_span_ns=1), "inconsistent: timestamps"),
        (
            lambda d: d["records"][0].update(recomputed_assessment_sha256="e" * 64),
            "inconsistent: decision .* chain_status 'verified' contradicts",
        ),
        (lambda d: d.update(source_mcap_sha256="ABC"), "source_mcap_sha256 must be 64"),
        (
            lambda d: d.update(per_approval_outcome_counts=[]),
            "per_approval_outcome_counts must be an object",
        ),
        (
            lambda d: d.update(per_approval_outcome_counts={"approved": True}),
            r"per_approval_outcome_counts\['approved'\] must be an integer",
        ),
        (
            lambda d: d.update(per_approval_outcome_counts={"maybe": 1}),
            "inconsistent: per_approval_outcome_counts .* disagree with the approvals",
        ),
        (
            lambda d: d.update(unresolved_pending_decision_ids={}),
            "unresolved_pending_decision_ids must be an array",
        ),
        (
            lambda d: d.update(unresolved_pending_decision_ids=[1]),
            r"unresolved_pending_decision_ids\[0\] must be a string",
        ),
        (
            lambda d: d.update(unresolved_pending_decision_ids=[d["records"][0]["decision_id"]]),
            "inconsistent: unresolved_pending_decision_ids must be the pending decisions",
        ),
        (lambda d: d.pop("unresolved_pending_decision_ids"), "lacks field"),
        (lambda d: d.pop("latency_ns_stats"), "lacks field.*latency_ns_stats"),
        (
            lambda d: d["latency_ns_stats"].update(count=d["latency_ns_stats"]["count"] + 1),
            "inconsistent: latency_ns_stats disagrees with what its records",
        ),
        (
            lambda d: d["latency_ns_stats"].update(max_ns=0),
            r"inconsistent: latency_ns_stats: .*in order",
        ),
        (lambda d: d["latency_ns_stats"].pop("p99_ns"), r"latency_ns_stats lacks field.*p99_ns"),
        (
            lambda d: d["latency_ns_by_verdict"].update(allow=None),
            r"latency_ns_by_verdict\['allow'\] must be an object, got null",
        ),
        (
            lambda d: d["latency_ns_by_verdict"].pop("deny"),
            "inconsistent: latency_ns_by_verdict disagrees",
        ),
        (
            lambda d: d.update(per_agent_counts={"mallory": 3}),
            "inconsistent: per_agent_counts disagrees",
        ),
        (
            lambda d: d.update(per_detector_counts={}),
            "inconsistent: per_detector_counts disagrees",
        ),
        (lambda d: d["records"][0].update(detectors=["email", "aws"]), "detectors must be sorted"),
        (lambda d: d["records"][0].update(stage_ns={"policy": -1}), "non-negative"),
        (lambda d: d["records"][0].update(agent=7), r"records\[0\]\.agent must be a string"),
        (lambda d: d.update(approvals={}), r"report\.approvals must be an array"),
        (
            lambda d: d["approvals"][0].update(outcome="denied"),
            "inconsistent: approval of .* outcome 'denied' is not one of",
        ),
        (lambda d: d["approvals"][0].pop("wait_ns"), r"approvals\[0\] lacks field.*wait_ns"),
    ],
)
def test_decode_refuses_a_wrong_document(mutate: Any, message: str) -> None:
    document = encoded_document()
    mutate(document)

    with pytest.raises(ValueError, match=message):
        decode_document(document)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe", "not UTF-8"),
        (b"{", "not valid JSON"),
        ("[]", "report must be an object, got an array"),
        ("null", "report must be an object, got null"),
        ('{"a": 1, "a": 2}', "key 'a' appears twice"),
        ('{"a": NaN}', "NaN is not a JSON number"),
    ],
)
def test_decode_refuses_what_is_not_a_report(data: bytes | str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_decision_trace_report_from_json(data)


# --- invariants ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"verified_count": 2}, "counts invariant violated"),
        ({"total_decisions": 4}, "counts invariant violated"),
        ({"verified_count": 0, "assessment_missing_count": 1}, "verified_count is 0 but 1"),
        ({"per_decision_kind_counts": {"allow": 4}}, "per_decision_kind_counts sum to 4"),
        ({"per_decision_kind_counts": {"allow": 1, "deny": 2}}, "disagree with the records"),
        ({"per_policy_id_counts": {"ops": 3}}, "per_policy_id_counts .* disagree"),
        ({"per_policy_id_counts": {"ops": -1, "x": 4}}, "non-negative"),
        ({"timestamp_first_ns": 2_000}, "timestamps"),
        ({"timestamp_span_ns": None}, "timestamps"),
        ({"analysis_version": 3}, "has analysis_version 5, the report 3"),
        ({"duplicate_assessment_count": -1}, "must not be negative"),
        ({"source_mcap_sha256": "c" * 63}, "64 lowercase hex"),
    ],
)
def test_an_inconsistent_report_cannot_be_built(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(make_report(), **changes)


def test_an_empty_report_needs_empty_timestamps() -> None:
    empty = dataclasses.replace(
        make_report(),
        total_decisions=0,
        verified_count=0,
        broken_count=0,
        no_assessment_claimed_count=0,
        per_decision_kind_counts={},
        per_policy_id_counts={},
        timestamp_first_ns=None,
        timestamp_last_ns=None,
        timestamp_span_ns=None,
        records=(),
    )
    assert empty.total_decisions == 0
    with pytest.raises(ValueError, match="timestamps"):
        dataclasses.replace(empty, timestamp_first_ns=0, timestamp_last_ns=0, timestamp_span_ns=0)


@pytest.mark.parametrize(
    ("status", "claimed", "recomputed"),
    [
        (ChainStatus.VERIFIED, SHA_A, SHA_B),
        (ChainStatus.VERIFIED, None, None),
        (ChainStatus.BROKEN, SHA_A, SHA_A),
        (ChainStatus.BROKEN, SHA_A, None),
        (ChainStatus.ASSESSMENT_MISSING, None, None),
        (ChainStatus.ASSESSMENT_MISSING, SHA_A, SHA_A),
        (ChainStatus.NO_ASSESSMENT_CLAIMED, None, SHA_A),
    ],
)
def test_a_record_status_must_agree_with_its_hashes(
    status: ChainStatus, claimed: str | None, recomputed: str | None
) -> None:
    with pytest.raises(ValueError, match="contradicts"):
        make_record(
            status, claimed_assessment_sha256=claimed, recomputed_assessment_sha256=recomputed
        )


def test_a_recomputed_hash_must_be_a_sha256() -> None:
    with pytest.raises(ValueError, match="64 lowercase hex"):
        make_record(
            ChainStatus.VERIFIED,
            claimed_assessment_sha256="xyz",
            recomputed_assessment_sha256="xyz",
        )


def test_plain_strings_become_the_closed_enums() -> None:
    record = make_record(decision_kind="narrow", chain_status="verified")
    assert record.decision_kind is RuntimeVerdict.NARROW
    assert record.chain_status is ChainStatus.VERIFIED
    with pytest.raises(ValueError, match="approval"):
        make_record(decision_kind="approval")


def test_the_report_is_frozen_and_hashable() -> None:
    report = make_report()
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.total_decisions = 0  # type: ignore[misc]
    assert isinstance(report.per_policy_id_counts, FrozenCounts)
    assert isinstance(report.records, tuple)
    assert hash(report) == hash(make_report())


@given(decision_trace_records())
def test_records_hash_and_compare_by_value(record: DecisionTraceRecord) -> None:
    assert dataclasses.replace(record) == record
    assert hash(dataclasses.replace(record)) == hash(record)


# --- FrozenCounts -------------------------------------------------------------------------


def test_frozen_counts_is_an_immutable_sorted_mapping() -> None:
    counts = FrozenCounts({"b": 2, "a": 1})

    assert list(counts) == ["a", "b"]
    assert counts == {"a": 1, "b": 2}
    assert counts == FrozenCounts([("a", 1), ("b", 2)])
    assert counts != {"a": 1}
    assert counts != [("a", 1), ("b", 2)]
    assert hash(counts) == hash(FrozenCounts({"a": 1, "b": 2}))
    assert counts.total() == 3
    assert counts["b"] == 2
    assert len(counts) == 2
    assert repr(counts) == "FrozenCounts({'a': 1, 'b': 2})"
    with pytest.raises(TypeError):
        counts["c"] = 3  # type: ignore[index]


@given(st.dictionaries(st.text(), st.integers(min_value=0)))
def test_frozen_counts_equals_the_dict_it_was_built_from(source: dict[str, int]) -> None:
    assert FrozenCounts(source) == source
    assert dict(FrozenCounts(source)) == source


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ([(1, 1)], "must be a string"),
        ([("a", -1)], "non-negative integer"),
        ([("a", True)], "non-negative integer"),
        ([("a", 1.0)], "non-negative integer"),
        ([("a", 1), ("a", 2)], "given twice"),
    ],
)
def test_frozen_counts_refuses_bad_counts(pairs: list[tuple[Any, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FrozenCounts(pairs)


# --- the import surface -------------------------------------------------------------------


def test_all_is_sorted_and_complete() -> None:
    assert analysis.__all__ == sorted(analysis.__all__)
    public = {
        name
        for name, value in vars(analysis).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("analysis.")
    }
    assert public <= set(analysis.__all__)
    for name in analysis.__all__:
        assert hasattr(analysis, name), name


def test_importing_analysis_does_not_import_mcap() -> None:
    # The CLI's --help must stay fast; the reader and mcap load on first use.
    code = "import sys, analysis; print('mcap' in sys.modules, 'audit' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False"]


# --- approvals --------------------------------------------------------------------------------

PENDING_IDS = tuple(f"0194a3c1-7e2f-7000-8000-00000000001{i}" for i in range(4))


def pending_records() -> tuple[DecisionTraceRecord, ...]:
    return tuple(
        make_record(decision_kind="pending" if i != 2 else "allow", decision_id=did)
        for i, did in enumerate(PENDING_IDS)
    )


def test_from_records_lists_the_pending_decisions_no_approval_resolves() -> None:
    report = DecisionTraceReport.from_records(
        pending_records(),
        source_mcap_sha256="c" * 64,
        approvals=[
            ApprovalTraceRecord(PENDING_IDS[1], "approved", 10),
            ApprovalTraceRecord(PENDING_IDS[2], "expired", 30),
            # Of an earlier run's decision with the same id: it resolves nothing here.
            ApprovalTraceRecord(PENDING_IDS[3], "approved", 20, "earlier-run"),
        ],
    )
    assert report.unresolved_pending_decision_ids == (PENDING_IDS[0], PENDING_IDS[3])
    assert report.per_approval_outcome_counts == {"approved": 2, "expired": 1}
    decoded = decode_decision_trace_report_from_json(encode_decision_trace_report_to_bytes(report))
    assert decoded == report


def test_a_pending_decision_logged_twice_is_listed_once() -> None:
    records = (*pending_records(), make_record(decision_kind="pending", decision_id=PENDING_IDS[0]))
    report = DecisionTraceReport.from_records(records, source_mcap_sha256="c" * 64)
    assert report.unresolved_pending_decision_ids == (
        PENDING_IDS[0],
        PENDING_IDS[1],
        PENDING_IDS[3],
    )


@pytest.mark.parametrize(
    "unresolved",
    [
        (PENDING_IDS[2],),  # not pending
        (PENDING_IDS[3], PENDING_IDS[0]),  # out of stream order
        (PENDING_IDS[0], PENDING_IDS[0]),  # twice
        ("0194a3c1-7e2f-7000-8000-000000000099",),  # not a decision of the report
    ],
)
def test_an_unresolved_list_that_disagrees_with_the_records_is_refused(
    unresolved: tuple[str, ...],
) -> None:
    report = DecisionTraceReport.from_records(pending_records(), source_mcap_sha256="c" * 64)
    with pytest.raises(ValueError, match="unresolved_pending_decision_ids must be the pending"):
        dataclasses.replace(report, unresolved_pending_decision_ids=unresolved)


def test_only_the_exact_unresolved_list_is_accepted() -> None:
    report = DecisionTraceReport.from_records(pending_records(), source_mcap_sha256="c" * 64)
    exact = (PENDING_IDS[0], PENDING_IDS[1], PENDING_IDS[3])
    changed = dataclasses.replace(report, unresolved_pending_decision_ids=list(exact))
    assert changed.unresolved_pending_decision_ids == exact
    for unresolved in ((), (PENDING_IDS[3],), (PENDING_IDS[0], PENDING_IDS[3])):
        with pytest.raises(ValueError, match="unresolved_pending_decision_ids must be the"):
            dataclasses.replace(report, unresolved_pending_decision_ids=list(unresolved))


def test_an_unknown_approval_outcome_is_refused() -> None:
    report = DecisionTraceReport.from_records(pending_records(), source_mcap_sha256="c" * 64)
    with pytest.raises(ValueError, match="disagree with the approvals"):
        dataclasses.replace(report, per_approval_outcome_counts={"approved": 1, "denied": 1})
    with pytest.raises(ValueError, match="outcome 'denied' is not one of"):
        ApprovalTraceRecord(PENDING_IDS[0], "denied", 1)
