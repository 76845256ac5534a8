"""The decision trace over real MCAP files written by `audit.McapAuditSink`.

Every file here is written through the real sink; tampering is done by
rewriting the file with the mcap library (`tests.audit.mcap_tools`), so what
the analyzer sees is exactly what an attacker or a crash would leave.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from analysis import (
    ANALYSIS_VERSION,
    ChainStatus,
    DecisionTraceReport,
    build_decision_trace_report,
    decode_decision_trace_report_from_json,
    encode_decision_trace_report_to_bytes,
    generate_decision_trace_report,
    verify_decision_chain,
)
from audit import Durability, LogFormatError, McapAuditSink
from runtime import canonical_bytes, make_uuid7, sha256_hex
from tests.analysis.stored_run import StoredRun
from tests.audit.mcap_tools import rewrite_mcap
from tests.records import STAMP_NS, TRACE_ID, approval, assessment, decision, make_run_start

# Every report built here is also streamed and compared byte for byte (tests/analysis/streamed.py).
pytestmark = pytest.mark.usefixtures("streamed_trace_checked")


def decision_id(index: int) -> str:
    # Distinct milliseconds make the ids sort like the indexes, which eases debugging.
    return make_uuid7(STAMP_NS + index * 1_000_000)


@contextmanager
def open_run(path: Path, durability: Durability = "process") -> Iterator[McapAuditSink]:
    """A real sink with its run opened; closing seals the file."""
    with McapAuditSink(path, durability=durability) as sink:
        sink.open_run(make_run_start())
        yield sink


def gate_pair(sink: McapAuditSink, index: int, **decision_changes: Any) -> tuple[str, str]:
    """Append an assessment and the decision resting on it, as the gate does."""
    did = decision_id(index)
    stamp = STAMP_NS + index * 1_000
    address = sink.append("/assessments", assessment(did, stamp_ns=stamp))
    sink.append("/decisions", decision(did, address, stamp_ns=stamp + 1, **decision_changes))
    return did, address


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_decision_of_an_intact_run_is_verified(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        pairs = [gate_pair(sink, index) for index in range(3)]

    report = build_decision_trace_report(path)

    assert report.source_mcap_sha256 == file_sha256(path)
    assert report.total_decisions == report.verified_count == 3
    assert (report.broken_count, report.assessment_missing_count) == (0, 0)
    assert report.no_assessment_claimed_count == 0
    assert report.analysis_version == ANALYSIS_VERSION
    assert report.truncated is False
    assert report.problems == ()
    assert report.duplicate_assessment_count == 0
    for record, (did, address) in zip(report.records, pairs, strict=True):
        assert record.decision_id == did
        assert record.chain_status is ChainStatus.VERIFIED
        assert record.claimed_assessment_sha256 == record.recomputed_assessment_sha256 == address
        assert record.decision_kind == "allow"
        assert record.decision_reason == "rule 'read-public' allows reading public files — café"
        assert record.policy_id == "support-agent"
        assert record.matched_policy == "read-public"
        assert record.trace_id == TRACE_ID
        assert record.latency_ns == 52_000
        assert record.analysis_version == ANALYSIS_VERSION
    assert verify_decision_chain(path) == (True, ())


def test_the_report_is_deterministic_for_one_file(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)

    first = generate_decision_trace_report(path)
    assert generate_decision_trace_report(path) == first
    assert build_decision_trace_report(path) == build_decision_trace_report(path)
    assert decode_decision_trace_report_from_json(first) == build_decision_trace_report(path)


def test_an_assessment_altered_in_the_file_breaks_its_decision(tmp_path: Path) -> None:
    original = tmp_path / "run.mcap"
    with open_run(original) as sink:
        intact_id, _ = gate_pair(sink, 0)
        altered_id, claimed = gate_pair(sink, 1)

    def alter(topic: str, data: bytes) -> bytes:
        record = json.loads(data)
        if topic == "/assessments" and record["decision_id"] == altered_id:
            # What an attacker would do: make the log say the agent was someone else.
            record["agent"] = "attacker"
            return canonical_bytes(record)
        return data

    tampered = tmp_path / "tampered.mcap"
    rewrite_mcap(original, tampered, alter)
    report = build_decision_trace_report(tampered)

    by_id = {record.decision_id: record for record in report.records}
    assert by_id[intact_id].chain_status is ChainStatus.VERIFIED
    broken = by_id[altered_id]
    assert broken.chain_status is ChainStatus.BROKEN
    assert broken.claimed_assessment_sha256 == claimed
    assert broken.recomputed_assessment_sha256 is not None
    assert broken.recomputed_assessment_sha256 != claimed
    assert (report.verified_count, report.broken_count) == (1, 1)
    assert report.source_mcap_sha256 == file_sha256(tampered)

    ok, messages = verify_decision_chain(tampered)
    assert ok is False
    assert len(messages) == 1
    assert altered_id in messages[0]
    assert "broken" in messages[0]
    assert claimed in messages[0]
    assert broken.recomputed_assessment_sha256 in messages[0]


def test_a_decision_whose_assessment_is_absent_is_assessment_missing(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    did = decision_id(0)
    claimed = "d" * 64
    with open_run(path) as sink:
        sink.append("/decisions", decision(did, claimed))

    report = build_decision_trace_report(path)

    (record,) = report.records
    assert record.chain_status is ChainStatus.ASSESSMENT_MISSING
    assert record.claimed_assessment_sha256 == claimed
    assert record.recomputed_assessment_sha256 is None
    assert report.assessment_missing_count == 1
    ok, messages = verify_decision_chain(path)
    assert ok is False
    assert did in messages[0]
    assert "assessment_missing" in messages[0]
    assert claimed in messages[0]


def test_an_assessment_removed_from_the_file_is_missing(tmp_path: Path) -> None:
    original = tmp_path / "run.mcap"
    with open_run(original) as sink:
        did, _ = gate_pair(sink, 0)
    removed = tmp_path / "removed.mcap"
    rewrite_mcap(original, removed, lambda topic, data: None if topic == "/assessments" else data)

    (record,) = build_decision_trace_report(removed).records

    assert record.decision_id == did
    assert record.chain_status is ChainStatus.ASSESSMENT_MISSING


def test_a_decision_without_an_assessment_claims_none_and_passes(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        sink.append("/decisions", decision(decision_id(0), None, verdict="deny"))

    report = build_decision_trace_report(path)

    (record,) = report.records
    assert record.chain_status is ChainStatus.NO_ASSESSMENT_CLAIMED
    assert record.claimed_assessment_sha256 is record.recomputed_assessment_sha256 is None
    assert report.no_assessment_claimed_count == 1
    # Deciding without an assessment is legitimate; the chain is not broken by it.
    assert verify_decision_chain(path) == (True, ())


def test_of_duplicate_assessments_the_last_one_wins_and_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    did, other = decision_id(0), decision_id(1)
    with open_run(path) as sink:
        first = sink.append("/assessments", assessment(did, agent="first"))
        last = sink.append("/assessments", assessment(did, agent="last"))
        sink.append("/decisions", decision(did, last))
        # A second decision resting on the shadowed assessment cannot be verified.
        sink.append("/decisions", decision(other, first))
        sink.append("/assessments", assessment(other))
        sink.append("/assessments", assessment(other, agent="again"))
        sink.append("/assessments", assessment(other, agent="and again"))

    report = build_decision_trace_report(path)

    assert report.duplicate_assessment_count == 3
    assert [record.chain_status for record in report.records] == [
        ChainStatus.VERIFIED,
        ChainStatus.BROKEN,
    ]
    assert report.records[0].recomputed_assessment_sha256 == last


def test_counts_per_verdict_and_per_policy(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    plan = [
        ("allow", "support-agent"),
        ("deny", "support-agent"),
        ("allow", "ops"),
        ("pending", "ops"),
        ("allow", "política"),
        ("scrub", "support-agent"),
    ]
    with open_run(path) as sink:
        for index, (verdict, policy_id) in enumerate(plan):
            gate_pair(sink, index, verdict=verdict, policy_id=policy_id)

    report = build_decision_trace_report(path)

    assert report.per_decision_kind_counts == {"allow": 3, "deny": 1, "pending": 1, "scrub": 1}
    assert report.per_policy_id_counts == {"support-agent": 3, "ops": 2, "política": 1}
    assert list(report.per_policy_id_counts) == sorted(report.per_policy_id_counts)
    assert [record.decision_kind for record in report.records] == [v for v, _ in plan]


def test_timestamps_are_the_earliest_and_latest_decision_stamps(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    # Wall clocks can step back: first/last are min/max, not stream order.
    stamps = [STAMP_NS + 5_000, STAMP_NS + 1_000, STAMP_NS + 9_000, STAMP_NS + 7_000]
    with open_run(path) as sink:
        for index, stamp in enumerate(stamps):
            did = decision_id(index)
            # An assessment's own stamp is not the decision's: only decisions count.
            address = sink.append("/assessments", assessment(did, stamp_ns=STAMP_NS + 100_000))
            sink.append("/decisions", decision(did, address, stamp_ns=stamp))

    report = build_decision_trace_report(path)

    assert report.timestamp_first_ns == STAMP_NS + 1_000
    assert report.timestamp_last_ns == STAMP_NS + 9_000
    assert report.timestamp_span_ns == 8_000
    assert [record.timestamp_ns for record in report.records] == stamps


def test_a_run_without_decisions_has_no_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        sink.append("/assessments", assessment(decision_id(0)))

    report = build_decision_trace_report(path)

    assert report.total_decisions == 0
    assert report.records == ()
    assert report.timestamp_first_ns is None
    assert report.timestamp_last_ns is None
    assert report.timestamp_span_ns is None
    assert report.per_decision_kind_counts == {}
    assert report.per_policy_id_counts == {}
    assert verify_decision_chain(path) == (True, ())


@pytest.mark.parametrize("extra_bytes", [0, 5, 40])
def test_a_truncated_run_keeps_its_complete_records(tmp_path: Path, extra_bytes: int) -> None:
    path = tmp_path / "run.mcap"
    sizes: list[int] = []
    kept: list[str] = []
    with open_run(path, durability="process") as sink:
        for index in range(4):
            did, _ = gate_pair(sink, index)
            kept.append(did)
            # "process" durability: the record is in the file once append returns.
            sizes.append(path.stat().st_size)
    # Cut after the second decision, possibly inside the third assessment: a crash.
    data = path.read_bytes()
    cut = sizes[1] + extra_bytes
    assert cut < sizes[2]
    path.write_bytes(data[:cut])

    report = build_decision_trace_report(path)

    assert report.truncated is True
    assert [record.decision_id for record in report.records] == kept[:2]
    assert report.verified_count == 2
    assert report.source_mcap_sha256 == sha256_hex(data[:cut])
    assert verify_decision_chain(path) == (True, ())


def test_a_non_json_decision_is_left_out_and_named(tmp_path: Path) -> None:
    original = tmp_path / "run.mcap"
    with open_run(original) as sink:
        gate_pair(sink, 0)
        damaged_id, _ = gate_pair(sink, 1)

    def garble(topic: str, data: bytes) -> bytes:
        if topic == "/decisions" and damaged_id.encode() in data:
            return b"{not json"
        return data

    damaged = tmp_path / "damaged.mcap"
    rewrite_mcap(original, damaged, garble)
    report = build_decision_trace_report(damaged)

    assert report.total_decisions == 1
    assert len(report.problems) == 1
    assert "/decisions" in report.problems[0]
    assert "not valid JSON" in report.problems[0]
    # A decision garbled beyond reading must not pass verification by going unseen.
    assert verify_decision_chain(damaged) == (False, report.problems)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"verdict": "maybe"}, "verdict 'maybe' is not one of deny, pending, narrow, scrub, allow"),
        ({"latency_ns": "fast"}, "'latency_ns' is a string, expected an integer"),
        ({"latency_ns": True}, "'latency_ns' is a boolean, expected an integer"),
        ({"assessment_sha256": 7}, "'assessment_sha256' is an integer, expected a string or null"),
        ({"reason": None}, "'reason' is null, expected a string"),
        ({"reason": "\ud800"}, "'reason' holds a lone surrogate"),
    ],
)
def test_a_decision_with_a_bad_field_is_left_out_and_named(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    original = tmp_path / "run.mcap"
    with open_run(original) as sink:
        gate_pair(sink, 0)
        gate_pair(sink, 1, verdict="deny")

    def corrupt(topic: str, data: bytes) -> bytes:
        record = json.loads(data)
        if topic == "/decisions" and record["verdict"] == "deny":
            record.update(changes)
            # json.dumps, not canonical_bytes: the point is a record ghost would never write.
            return json.dumps(record).encode()
        return data

    damaged = tmp_path / "damaged.mcap"
    rewrite_mcap(original, damaged, corrupt)
    report = build_decision_trace_report(damaged)

    assert report.total_decisions == 1
    assert report.per_decision_kind_counts == {"allow": 1}
    assert len(report.problems) == 1
    assert expected in report.problems[0]
    # Whatever a record held, the report still encodes.
    assert decode_decision_trace_report_from_json(encode_decision_trace_report_to_bytes(report))


def test_a_decision_missing_a_field_is_left_out_and_named(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        record = decision(decision_id(0), None)
        del record["verdict"]
        sink.append("/decisions", record)

    report = build_decision_trace_report(path)

    assert report.total_decisions == 0
    assert len(report.problems) == 1
    assert "has no 'verdict' field" in report.problems[0]


def test_a_record_of_another_schema_on_a_ghost_topic_is_left_out(tmp_path: Path) -> None:
    original = tmp_path / "run.mcap"
    with open_run(original) as sink:
        gate_pair(sink, 0)

    def reschema(topic: str, data: bytes) -> bytes:
        if topic == "/decisions":
            return canonical_bytes({**json.loads(data), "schema": "ghost.decision/2"})
        return data

    damaged = tmp_path / "damaged.mcap"
    rewrite_mcap(original, damaged, reschema)
    report = build_decision_trace_report(damaged)

    assert report.total_decisions == 0
    assert "'ghost.decision/2', expected 'ghost.decision/1'" in report.problems[0]


def test_an_unreadable_assessment_leaves_its_decision_missing(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    did = decision_id(0)
    with open_run(path) as sink:
        record = assessment(did)
        del record["decision_id"]
        address = sink.append("/assessments", record)
        sink.append("/decisions", decision(did, address))

    report = build_decision_trace_report(path)

    assert report.records[0].chain_status is ChainStatus.ASSESSMENT_MISSING
    assert "/assessments" in report.problems[0]
    assert "has no 'decision_id' field" in report.problems[0]


def test_a_traceable_record_that_breaks_its_schema_is_traced_and_named(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0, trace_origin="bogus")

    report = build_decision_trace_report(path)

    assert report.verified_count == 1
    assert len(report.problems) == 1
    assert "does not match its schema" in report.problems[0]
    assert "traced all the same" in report.problems[0]


def test_a_chunked_run_reads_like_an_unchunked_one(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path, durability="chunk") as sink:
        for index in range(3):
            gate_pair(sink, index)

    report = build_decision_trace_report(path)

    assert report.verified_count == 3
    assert report.truncated is False


def test_generate_writes_the_bytes_it_returns(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)
    output = tmp_path / "report.json"

    data = generate_decision_trace_report(path, output)

    assert output.read_bytes() == data
    assert data == encode_decision_trace_report_to_bytes(build_decision_trace_report(path))
    assert generate_decision_trace_report(path) == data


def test_generate_without_an_output_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)

    generate_decision_trace_report(path)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.mcap"]


@pytest.mark.parametrize(
    ("content", "cause"),
    [
        (None, "no such file"),
        (b"decision,verdict\n1,allow\n", "not an MCAP file"),
        (b"\x89MCA", "cut inside the MCAP magic"),
    ],
)
def test_a_file_that_is_not_a_ghost_log_raises(
    tmp_path: Path, content: bytes | None, cause: str
) -> None:
    path = tmp_path / "input.mcap"
    if content is not None:
        path.write_bytes(content)

    with pytest.raises(LogFormatError, match=cause):
        build_decision_trace_report(path)
    with pytest.raises(LogFormatError, match=cause):
        verify_decision_chain(path)


def test_the_report_of_a_real_run_is_a_report(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)
    assert isinstance(build_decision_trace_report(str(path)), DecisionTraceReport)


# --- sealed -------------------------------------------------------------------------------------


def rewritten(path: Path, out: Path, transform: Any) -> Path:
    rewrite_mcap(path, out, transform)
    return out


def test_a_cleanly_closed_run_is_sealed(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)

    assert build_decision_trace_report(path).sealed is True


def test_a_run_with_only_its_run_record_is_sealed(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path):
        pass

    assert build_decision_trace_report(path).sealed is True


def test_a_run_cut_before_its_seal_is_not_sealed(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b'"schema":"ghost.seal/1"')])

    report = build_decision_trace_report(path)

    assert (report.truncated, report.sealed) == (True, False)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda topic, data: None if topic == "/seal" else data,
        lambda topic, data: (
            canonical_bytes({**json.loads(data), "record_count": 9}) if topic == "/seal" else data
        ),
        lambda topic, data: (
            canonical_bytes({**json.loads(data), "head_sha256": "e" * 64})
            if topic == "/seal"
            else data
        ),
        lambda topic, data: b"not json" if topic == "/seal" else data,
    ],
    ids=["removed", "wrong-count", "wrong-head", "unreadable"],
)
def test_a_run_whose_seal_is_wrong_is_not_sealed(tmp_path: Path, tamper: Any) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)

    report = build_decision_trace_report(rewritten(path, tmp_path / "t.mcap", tamper))

    assert report.sealed is False


def test_a_run_with_records_after_its_seal_is_not_sealed(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        gate_pair(sink, 0)
    stored = StoredRun.load(path)
    stored.messages.append(stored.messages[1])

    assert build_decision_trace_report(stored.write(tmp_path / "t.mcap")).sealed is False


def test_a_file_with_no_records_is_not_sealed(tmp_path: Path) -> None:
    path = tmp_path / "empty.mcap"
    McapAuditSink(path).close()

    assert build_decision_trace_report(path).sealed is False


# --- approvals -------------------------------------------------------------------------------


def test_approvals_are_counted_by_outcome_and_unresolved_pending_listed(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        approved, approved_at = gate_pair(sink, 1, verdict="pending")
        rejected, rejected_at = gate_pair(sink, 2, verdict="pending")
        waiting, _ = gate_pair(sink, 3, verdict="pending")
        gate_pair(sink, 4, verdict="allow")
        expired, expired_at = gate_pair(sink, 5, verdict="pending")
        still, _ = gate_pair(sink, 6, verdict="pending")
        sink.append("/approvals", approval(approved, approved_at))
        sink.append(
            "/approvals",
            approval(rejected, rejected_at, outcome="rejected", final_verdict="deny"),
        )
        sink.append(
            "/approvals",
            approval(expired, expired_at, outcome="expired", approver=None, final_verdict="deny"),
        )
        # An approval of a decision of an earlier run: counted, resolves nothing here.
        sink.append(
            "/approvals",
            approval(waiting, "e" * 64, decision_run_id=make_uuid7(STAMP_NS - 10**12)),
        )

    report = build_decision_trace_report(path)

    assert report.per_approval_outcome_counts == {"approved": 2, "rejected": 1, "expired": 1}
    assert report.unresolved_pending_decision_ids == (waiting, still)
    assert report.problems == ()
    decoded = decode_decision_trace_report_from_json(encode_decision_trace_report_to_bytes(report))
    assert decoded == report


def test_a_run_without_approvals_counts_none(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with open_run(path) as sink:
        pending, _ = gate_pair(sink, 1, verdict="pending")
        gate_pair(sink, 2)

    report = build_decision_trace_report(path)

    assert report.per_approval_outcome_counts == {}
    assert report.unresolved_pending_decision_ids == (pending,)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"outcome": "maybe"}, "its outcome 'maybe' is not one of approved, rejected, expired"),
        ({"outcome": 3}, "its 'outcome' is an integer, expected a string"),
        ({"decision_id": None}, "its 'decision_id' is null, expected a string"),
        ({"decision_run_id": 7}, "its 'decision_run_id' is an integer, expected a string or null"),
        ({"schema": "ghost.decision/1"}, "its schema is 'ghost.decision/1'"),
    ],
)
def test_an_unreadable_approval_is_left_out_and_named(
    tmp_path: Path, changes: dict[str, Any], why: str
) -> None:
    original, path = tmp_path / "run.mcap", tmp_path / "tampered.mcap"
    with open_run(original) as sink:
        pending, address = gate_pair(sink, 1, verdict="pending")
        sink.append("/approvals", approval(pending, address))

    def tamper(topic: str, data: bytes) -> bytes:
        if topic != "/approvals":
            return data
        return canonical_bytes({**json.loads(data), **changes})

    rewrite_mcap(original, path, tamper)

    report = build_decision_trace_report(path)

    assert report.per_approval_outcome_counts == {}
    assert report.unresolved_pending_decision_ids == (pending,)
    assert any(why in problem and "/approvals" in problem for problem in report.problems)
