"""What a person reads about a run in ten seconds: integrity first, then what the agents did.

`summarize` joins the two offline views of a run -- `verify_run`'s verdict
(intact, truncated, tampered) and the decision trace report -- into one small
value, `RunSummary`, that ``ghost summary`` renders for a terminal (rich) or
prints as JSON. It judges nothing itself: the integrity status is
`verify_run`'s, every count and statistic the report's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from analysis._trace_model import DecisionTraceReport
from analysis._trace_stats import LatencyStats
from analysis._verify_model import RunStatus, RunVerification
from runtime import RuntimeVerdict

__all__ = [
    "TOP",
    "ActionCount",
    "RunSummary",
    "ShadowDisagreement",
    "summarize",
    "summary_document",
]

TOP: Final = 5
"""How many rules, denied actions and detectors a summary lists (the most frequent)."""


@dataclass(frozen=True, slots=True)
class ActionCount:
    """How often one action (as the log records it) got a verdict. Unknown parts are None."""

    agent: str | None
    verb: str | None
    resource: str | None
    count: int


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One run at a glance.

    Attributes:
        status: `verify_run`'s verdict: intact, truncated or tampered.
        problem_count: the integrity problems `verify_run` found.
        sealed, truncated: as `verify_run` says.
        total_decisions: readable decisions.
        verdict_counts: decisions per verdict, every verdict listed (0 included).
        latency: the decisions' latency statistics (None without decisions).
        latency_by_verdict: the same per verdict that occurs.
        top_rules: the most frequent matched rules, ``(rule, count)``, at most `TOP`.
        top_denied: the most frequently denied actions, at most `TOP`.
        approval_counts: approvals per outcome.
        approval_wait: the approvals' wait statistics (None without approvals).
        unresolved_pending: pending decisions no approval of the run resolves.
        top_detectors: the detectors that fired in the most decisions, at most `TOP`.
        report_problems: records the report could not read, or that break their schema.
        shadow_decisions: decisions whose assessment carries a shadow verdict (ADR 0031).
        shadow_disagreements: per ``(enforced, shadow)`` verdict pair, how many
            decisions the shadow would have decided otherwise, and the first
            ids of them, most frequent pair first.
        shadow_rules: the shadow rules behind the most disagreements, at most `TOP`.
    """

    status: RunStatus
    problem_count: int
    sealed: bool
    truncated: bool
    total_decisions: int
    verdict_counts: tuple[tuple[str, int], ...]
    latency: LatencyStats | None
    latency_by_verdict: tuple[tuple[str, LatencyStats], ...]
    top_rules: tuple[tuple[str, int], ...]
    top_denied: tuple[ActionCount, ...]
    approval_counts: tuple[tuple[str, int], ...]
    approval_wait: LatencyStats | None
    unresolved_pending: int
    top_detectors: tuple[tuple[str, int], ...]
    report_problems: int
    shadow_decisions: int = 0
    shadow_disagreements: tuple[ShadowDisagreement, ...] = ()
    shadow_rules: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ShadowDisagreement:
    """Decisions a shadow would have decided otherwise, for one pair of verdicts.

    Attributes:
        enforced: the verdict that ran.
        shadow: the verdict the shadow would have reached.
        count: how many decisions.
        decision_ids: the first of them, in stream order (at most
            `analysis._trace_model.SHADOW_IDS_PER_PAIR`).
    """

    enforced: str
    shadow: str
    count: int
    decision_ids: tuple[str, ...]

    @property
    def sentence(self) -> str:
        """``the shadow would have denied 14 actions the enforced policy allowed``."""
        actions = "action" if self.count == 1 else "actions"
        return (
            f"the shadow would have {_PAST[self.shadow]} {self.count} {actions} the enforced"
            f" policy {_PAST[self.enforced]}"
        )


_PAST: Final = {
    "deny": "denied",
    "pending": "held for approval",
    "narrow": "narrowed",
    "scrub": "scrubbed",
    "allow": "allowed",
}


def summarize(report: DecisionTraceReport, verification: RunVerification) -> RunSummary:
    """Build the summary of a run from its report and its verification."""
    denied = Counter(
        (record.agent, record.verb, record.resource)
        for record in report.records
        if record.decision_kind is RuntimeVerdict.DENY
    )
    top_denied = sorted(denied.items(), key=lambda item: (-item[1], _sort_key(item[0])))[:TOP]
    return RunSummary(
        status=verification.status,
        problem_count=verification.problem_count,
        sealed=verification.sealed,
        truncated=verification.truncated,
        total_decisions=report.total_decisions,
        verdict_counts=tuple(
            (verdict.value, report.per_decision_kind_counts.get(verdict.value, 0))
            for verdict in RuntimeVerdict
        ),
        latency=report.latency_ns_stats,
        latency_by_verdict=tuple(report.latency_ns_by_verdict.items()),
        top_rules=_top(report.per_matched_policy_counts.items()),
        top_denied=tuple(ActionCount(*action, count) for action, count in top_denied),
        approval_counts=tuple(report.per_approval_outcome_counts.items()),
        approval_wait=report.approval_wait_ns_stats,
        unresolved_pending=len(report.unresolved_pending_decision_ids),
        top_detectors=_top(report.per_detector_counts.items()),
        report_problems=len(report.problems),
        shadow_decisions=report.shadow_decision_count,
        shadow_disagreements=_disagreements(report),
        shadow_rules=_top(report.shadow_disagreements_by_rule.items()),
    )


def _disagreements(report: DecisionTraceReport) -> tuple[ShadowDisagreement, ...]:
    ids = dict(report.shadow_disagreement_ids)
    found = []
    for pair, count in _top_all(report.shadow_disagreement_counts.items()):
        enforced, _, shadow = pair.partition(" -> ")
        found.append(ShadowDisagreement(enforced, shadow, count, ids.get(pair, ())))
    return tuple(found)


def summary_document(summary: RunSummary) -> dict[str, Any]:
    """The summary as plain JSON data (``ghost summary --json``)."""
    return {
        "status": summary.status.value,
        "problem_count": summary.problem_count,
        "sealed": summary.sealed,
        "truncated": summary.truncated,
        "total_decisions": summary.total_decisions,
        "verdict_counts": dict(summary.verdict_counts),
        "latency_ns": _stats(summary.latency),
        "latency_ns_by_verdict": {
            verdict: _stats(stats) for verdict, stats in summary.latency_by_verdict
        },
        "top_rules": [{"rule": rule, "count": count} for rule, count in summary.top_rules],
        "top_denied": [
            {"agent": a.agent, "verb": a.verb, "resource": a.resource, "count": a.count}
            for a in summary.top_denied
        ],
        "approval_counts": dict(summary.approval_counts),
        "approval_wait_ns": _stats(summary.approval_wait),
        "unresolved_pending": summary.unresolved_pending,
        "top_detectors": [
            {"detector": name, "count": count} for name, count in summary.top_detectors
        ],
        "report_problems": summary.report_problems,
        "shadow": {
            "decisions": summary.shadow_decisions,
            "disagreements": [
                {
                    "enforced": d.enforced,
                    "shadow": d.shadow,
                    "count": d.count,
                    "decision_ids": list(d.decision_ids),
                }
                for d in summary.shadow_disagreements
            ],
            "rules": [{"rule": rule, "count": count} for rule, count in summary.shadow_rules],
        },
    }


def _top(counts: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    return _top_all(counts)[:TOP]


def _top_all(counts: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    # Most frequent first; ties by name, so that one run always summarizes alike.
    return tuple(sorted(counts, key=lambda item: (-item[1], item[0])))


def _sort_key(action: tuple[str | None, str | None, str | None]) -> tuple[str, ...]:
    return tuple("" if part is None else part for part in action)


def _stats(stats: LatencyStats | None) -> dict[str, int] | None:
    if stats is None:
        return None
    return {
        "count": stats.count,
        "min_ns": stats.min_ns,
        "p50_ns": stats.p50_ns,
        "p90_ns": stats.p90_ns,
        "p99_ns": stats.p99_ns,
        "max_ns": stats.max_ns,
    }
