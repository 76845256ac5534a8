"""Reports, verifications and report pages built in memory, for the tests of ``ghost report``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from analysis import (
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    DecisionTraceReport,
    IntegrityCheck,
    RunProblem,
    RunStatus,
    RunVerification,
)
from analysis._report_data import ReportPage, build_report_page
from tests.analysis.test_trace_report import make_record

__all__ = [
    "HOSTILE_AGENT",
    "HOSTILE_RESOURCE",
    "HOSTILE_RULE",
    "SOURCE",
    "decision",
    "page_of",
    "report_of",
    "varied_records",
    "verification",
]

SOURCE = "c" * 64
HOSTILE_RESOURCE = "</script><script>alert(1)</script><!--"
HOSTILE_AGENT = "<img src=x onerror=alert(2)>\u2028\x1b[2J\u202e\ud800"
HOSTILE_RULE = "<b>bold</b><img src=x onerror=alert(3)>&amp;"


def decision(
    index: int, *, status: ChainStatus = ChainStatus.VERIFIED, **changes: Any
) -> DecisionTraceRecord:
    """A decision record with a distinct id; ``changes`` override fields (agent=, verb=, ...)."""
    changes.setdefault("decision_id", f"0194a3c1-7e2f-7000-8000-{index:012d}")
    changes.setdefault("timestamp_ns", 1_000 + index)
    return make_record(status, **changes)


def report_of(
    records: Iterable[DecisionTraceRecord],
    *,
    approvals: Iterable[ApprovalTraceRecord] = (),
    problems: Iterable[str] = (),
) -> DecisionTraceReport:
    """A report of ``records`` (counts derived), sealed."""
    return DecisionTraceReport.from_records(
        records, source_mcap_sha256=SOURCE, sealed=True, approvals=approvals, problems=problems
    )


def verification(
    status: RunStatus = RunStatus.INTACT, *, problems: Iterable[str] = (), problem_count: int = 0
) -> RunVerification:
    """A verification of that status, with those problem messages (file-level)."""
    listed = tuple(RunProblem(IntegrityCheck.CHAIN, message) for message in problems)
    return RunVerification(
        path=Path("run.mcap"),
        source_sha256=SOURCE,
        status=status,
        problems=listed,
        problem_count=max(problem_count, len(listed)),
        truncated=status is RunStatus.TRUNCATED,
        sealed=status is not RunStatus.TRUNCATED,
        record_count=4,
        verified_prefix=4 if status is RunStatus.INTACT else 2,
        verified_head_sha256=SOURCE,
        per_topic_counts={"/decisions": 4},
        run_id=None,
        open_assessments=0,
        signed=False,
    )


def page_of(
    records: Iterable[DecisionTraceRecord],
    *,
    status: RunStatus = RunStatus.INTACT,
    approvals: Iterable[ApprovalTraceRecord] = (),
    problems: Iterable[str] | None = None,
) -> ReportPage:
    """The report page of ``records`` under a verification of ``status``.

    A tampered verification gets one problem unless ``problems`` are given.
    """
    report = report_of(records, approvals=approvals)
    if problems is None:
        problems = ("the chain breaks at seq 2",) if status is RunStatus.TAMPERED else ()
    return build_report_page(verification(status, problems=problems), report)


def varied_records(count: int) -> list[DecisionTraceRecord]:
    """``count`` decisions cycling through verdicts, agents, verbs, resources, rules, latencies."""
    verdicts = ("allow", "deny", "narrow", "scrub", "pending", "allow", "allow")
    return [
        decision(
            index,
            decision_kind=verdicts[index % len(verdicts)],
            agent=f"agent-{index % 3}",
            verb=("read", "send", "query", "refund")[index % 4],
            resource=f"file:/data/{index % 97:03d}.txt",
            matched_policy=None if index % 5 == 0 else f"rule-{index % 4}",
            latency_ns=1_000 + (index * 7_919) % 90_000,
            timestamp_ns=1_767_225_600_000_000_000 + index * 1_000_000,
            stage_ns={"policy": 100 + index % 50, "scrub": 10 * (index % 9)},
        )
        for index in range(count)
    ]
