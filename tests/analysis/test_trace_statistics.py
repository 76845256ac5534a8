"""The report's statistics (analysis version 4) over real MCAP runs with known contents.

Each run is written by `audit.McapAuditSink` with records whose latencies,
stage times, findings and waits are chosen here, so every expected statistic
is known exactly, by hand, not recomputed by the code under test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis import (
    LatencyStats,
    build_decision_trace_report,
    decode_decision_trace_report_from_json,
    encode_decision_trace_report_to_bytes,
)
from analysis._trace_stats import nearest_rank
from audit import McapAuditSink
from runtime import Gate, MemoryApprovalStore, Policy, make_uuid7
from runtime.testing import ManualClock
from tests.records import STAMP_NS, approval, assessment, decision, make_run_start
from tests.runtime.approvals import APPROVAL_POLICY, refund, search

# Every report built here is also streamed and compared byte for byte (tests/analysis/streamed.py).
pytestmark = pytest.mark.usefixtures("streamed_trace_checked")

MS = 1_000_000


# --- nearest rank, by hand ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([7], (7, 7, 7)),
        ([10, 20, 30], (20, 30, 30)),  # ranks ceil(1.5)=2, ceil(2.7)=3, ceil(2.97)=3
        (list(range(1, 11)), (5, 9, 10)),
        (list(range(1, 101)), (50, 90, 99)),
        (list(range(1, 201)), (100, 180, 198)),
        ([5, 5, 5, 9], (5, 9, 9)),
    ],
)
def test_percentiles_are_nearest_ranks(values: list[int], expected: tuple[int, int, int]) -> None:
    stats = LatencyStats.of(reversed(values))  # order in does not matter
    assert stats is not None
    assert (stats.p50_ns, stats.p90_ns, stats.p99_ns) == expected
    assert (stats.count, stats.min_ns, stats.max_ns) == (len(values), min(values), max(values))


@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63), min_size=1, max_size=60))
def test_a_percentile_is_the_smallest_value_with_enough_at_or_below_it(values: list[int]) -> None:
    ordered = sorted(values)
    for percent in (1, 50, 90, 99, 100):
        found = nearest_rank(ordered, percent)
        assert found in values
        at_or_below = sum(value <= found for value in values)
        below = sum(value < found for value in values)
        assert at_or_below * 100 >= percent * len(values)
        assert below * 100 < percent * len(values)


def test_no_values_have_no_statistics() -> None:
    assert LatencyStats.of([]) is None
    with pytest.raises(ValueError, match="no values"):
        nearest_rank([], 50)
    with pytest.raises(ValueError, match="from 1 to 100"):
        nearest_rank([1], 0)


@pytest.mark.parametrize(
    "fields",
    [
        {"count": 0, "min_ns": 1, "p50_ns": 1, "p90_ns": 1, "p99_ns": 1, "max_ns": 1},
        {"count": 2, "min_ns": 3, "p50_ns": 1, "p90_ns": 1, "p99_ns": 1, "max_ns": 1},
        {"count": 2, "min_ns": 1, "p50_ns": 1, "p90_ns": 1, "p99_ns": 1, "max_ns": True},
    ],
)
def test_impossible_statistics_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="latency statistics"):
        LatencyStats(**fields)


# --- a run with known contents -------------------------------------------------------------------


def _stages(policy: int, narrow: int, scrub: int) -> dict[str, int]:
    return {"policy": policy, "narrow": narrow, "scrub": scrub}


def _write_known_run(path: Path) -> list[str]:
    """Ten decisions with chosen latencies, stages, findings and origins; three approvals."""
    ids: list[str] = []
    with McapAuditSink(path, clock=ManualClock()) as sink:
        sink.open_run(make_run_start())
        plan: list[tuple[str, int, str | None, str, list[str], dict[str, int], str]] = [
            # verdict, latency ms, matched rule, agent, detectors, stage_ns, trace origin
            ("allow", 1, "read-public", "analyst", [], _stages(100, 0, 0), "generated"),
            ("allow", 2, "read-public", "analyst", ["email"], _stages(200, 0, 10), "generated"),
            ("allow", 3, "read-public", "support", [], _stages(300, 0, 0), "supplied"),
            ("allow", 4, "web-search", "support", [], _stages(400, 0, 0), "generated"),
            ("deny", 10, "no-shell", "support", [], _stages(500, 0, 0), "generated"),
            ("deny", 20, None, "ops/cleaner", [], _stages(600, 0, 0), "otel"),
            ("scrub", 7, "web-search", "analyst", ["email", "aws_access_key"], _stages(0, 0, 70),
             "generated"),
            ("pending", 5, "refunds", "support", [], _stages(50, 5, 0), "generated"),
            ("pending", 6, "refunds", "support", [], _stages(60, 6, 0), "generated"),
            ("pending", 8, "refunds", "support", ["email"], _stages(80, 0, 20), "generated"),
        ]  # fmt: skip
        pending_addresses: list[str] = []
        for index, (verdict, ms, rule, agent, detectors, stages, origin) in enumerate(plan):
            stamp = STAMP_NS + index * 1_000
            decision_id = make_uuid7(stamp)
            ids.append(decision_id)
            findings = [{"detector": d, "path": "$.x", "fingerprint": "c" * 64} for d in detectors]
            a_sha = sink.append(
                "/assessments",
                assessment(
                    decision_id, stamp_ns=stamp, agent=agent, findings=findings, stage_ns=stages
                ),
            )
            d_sha = sink.append(
                "/decisions",
                decision(
                    decision_id,
                    a_sha,
                    stamp_ns=stamp,
                    verdict=verdict,
                    matched_policy=rule,
                    latency_ns=ms * MS,
                    trace_origin=origin,
                ),
            )
            if verdict == "pending":
                pending_addresses.append(d_sha)
        for (decision_id, d_sha), outcome, wait_s in zip(
            zip(ids[7:10], pending_addresses, strict=True),
            ("approved", "rejected", "approved"),
            (3, 1, 5),
            strict=True,
        ):
            if outcome == "rejected":
                continue  # the second pending decision is never resolved in this run
            sink.append(
                "/approvals",
                approval(
                    decision_id, d_sha, stamp_ns=STAMP_NS + 20_000, outcome=outcome,
                    wait_ns=wait_s * 1_000_000_000,
                ),
            )  # fmt: skip
        # An approval of an earlier run's decision: counted, resolves nothing here.
        sink.append(
            "/approvals",
            approval(
                make_uuid7(STAMP_NS - 5_000), "d" * 64, stamp_ns=STAMP_NS + 30_000,
                outcome="expired", approver=None, wait_ns=600_000_000_000,
                decision_run_id="01a20000-0000-7000-8000-000000000000", final_verdict="deny",
            ),
        )  # fmt: skip
    return ids


def test_every_statistic_of_a_known_run(tmp_path: Path) -> None:
    path = tmp_path / "known.mcap"
    ids = _write_known_run(path)

    report = build_decision_trace_report(path)

    assert report.problems == ()
    # Latency: ten values 1, 2, 3, 4, 5, 6, 7, 8, 10, 20 ms -> ranks 5, 9, 10.
    assert report.latency_ns_stats == LatencyStats(10, 1 * MS, 5 * MS, 10 * MS, 20 * MS, 20 * MS)
    assert report.latency_ns_by_verdict == {
        "allow": LatencyStats(4, 1 * MS, 2 * MS, 4 * MS, 4 * MS, 4 * MS),
        "deny": LatencyStats(2, 10 * MS, 10 * MS, 20 * MS, 20 * MS, 20 * MS),
        "pending": LatencyStats(3, 5 * MS, 6 * MS, 8 * MS, 8 * MS, 8 * MS),
        "scrub": LatencyStats(1, 7 * MS, 7 * MS, 7 * MS, 7 * MS, 7 * MS),
    }
    # Stages, every decision timing all three: policy 0 50 60 80 100 200 300 400 500 600,
    # narrow eight zeros then 5 6, scrub seven zeros then 10 20 70 -> ranks 5, 9, 10.
    assert report.stage_ns_by_stage == {
        "narrow": LatencyStats(10, 0, 0, 5, 6, 6),
        "policy": LatencyStats(10, 0, 100, 500, 600, 600),
        "scrub": LatencyStats(10, 0, 0, 20, 70, 70),
    }
    assert report.approval_wait_ns_stats == LatencyStats(
        3, 3 * 10**9, 5 * 10**9, 600 * 10**9, 600 * 10**9, 600 * 10**9
    )
    assert report.approval_wait_ns_by_outcome == {
        "approved": LatencyStats(2, 3 * 10**9, 3 * 10**9, 5 * 10**9, 5 * 10**9, 5 * 10**9),
        "expired": LatencyStats(1, *(600 * 10**9,) * 5),
    }
    assert report.per_approval_outcome_counts == {"approved": 2, "expired": 1}
    assert report.unresolved_pending_decision_ids == (ids[8],)
    assert report.per_matched_policy_counts == {
        "no-shell": 1,
        "read-public": 3,
        "refunds": 3,
        "web-search": 2,
    }
    assert report.per_agent_counts == {"analyst": 3, "ops/cleaner": 1, "support": 6}
    assert report.per_detector_counts == {"aws_access_key": 1, "email": 3}
    assert report.per_trace_origin_counts == {"generated": 8, "otel": 1, "supplied": 1}
    scrubbed = report.records[6]
    assert (scrubbed.agent, scrubbed.verb, scrubbed.resource) == (
        "analyst",
        "read",
        "file:/data/q3.txt",
    )
    assert scrubbed.detectors == ("aws_access_key", "email")
    assert scrubbed.stage_ns == {"policy": 0, "narrow": 0, "scrub": 70}
    assert (
        decode_decision_trace_report_from_json(encode_decision_trace_report_to_bytes(report))
        == report
    )


def test_a_hostile_assessment_is_shown_as_unknown_not_a_crash(tmp_path: Path) -> None:
    # A log a tamperer wrote: the trace still reads it, shows what it cannot trust as
    # unknown, and names each schema break.
    path = tmp_path / "odd.mcap"
    with McapAuditSink(path, clock=ManualClock()) as sink:
        sink.open_run(make_run_start())
        decision_id = make_uuid7(STAMP_NS)
        odd = assessment(
            decision_id,
            agent=["not", "text"],
            verb=None,
            findings=[{"detector": 7}, "x", {"detector": "email"}, {"no": "detector"}],
            stage_ns={"policy": -5, "scrub": True, "narrow": 12, "": 3},
        )
        a_sha = sink.append("/assessments", odd)
        sink.append("/decisions", decision(decision_id, a_sha, trace_origin=None, latency_ns=-1))

    report = build_decision_trace_report(path)

    (record,) = report.records
    assert (record.agent, record.verb, record.resource) == (None, None, "file:/data/q3.txt")
    assert record.detectors == ("email",)
    assert record.stage_ns == {"narrow": 12, "": 3}
    assert record.trace_origin is None
    assert report.latency_ns_stats == LatencyStats(1, -1, -1, -1, -1, -1)
    assert report.per_agent_counts == {}
    assert any("does not match its schema" in problem for problem in report.problems)


def test_a_gate_run_reports_its_own_actions_and_approvals(tmp_path: Path) -> None:
    path = tmp_path / "gate.mcap"
    clock = ManualClock(step_ns=1_000)
    with McapAuditSink(path) as sink:
        gate = Gate(
            Policy.from_dict(APPROVAL_POLICY),
            sink=sink,
            clock=clock,
            approvals=MemoryApprovalStore(),
        )
        held = gate.check(refund(150))
        gate.check(search())
        approval_ = gate.approvals.resolve(held.decision_id, approved=True, approver="alice")

    report = build_decision_trace_report(path)

    assert [(r.agent, r.verb, r.resource) for r in report.records] == [
        (action.agent, action.verb, action.resource) for action in (refund(150), search())
    ]
    assert report.records[0].decision_kind == "pending"
    assert report.approvals[0].wait_ns == approval_.wait_ns
    assert report.approval_wait_ns_stats == LatencyStats(1, *(approval_.wait_ns,) * 5)
    assert report.unresolved_pending_decision_ids == ()
    assert set(report.stage_ns_by_stage) == {"policy", "narrow", "scrub"}
    assert report.latency_ns_stats is not None
    assert report.latency_ns_stats.count == 2
