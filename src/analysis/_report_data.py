"""What ``ghost report`` shows, computed from a run's verification and decision trace.

`build_report_page` turns the pair into a `ReportPage`, whose content is of two
kinds, and only one of them grows with the run (ADR 0020):

1. **Aggregates for the charts**, bounded whatever the number of decisions:
   decisions over time and duration histograms (`analysis._report_bins`), rule
   hit counts (the `TOP_RULES` most used rules, the rest summed), and the
   report's own statistics.
2. **The decision table**: one row per decision, in stream order, as columns
   (`DecisionColumns`). Text columns are dictionary-encoded: each distinct text
   once, sorted, and one small integer per row, so that the table of a million
   decisions costs a few bytes per row and sorting by a text column is sorting
   by its code.

Every string from the run (agent, verb, resource, rule, stage and detector
names, problems) may have come from an agent or from whoever edited the
file: each is made printable here (`analysis._printable`: control,
bidirectional and lone-surrogate characters escaped, cut at a length), so
the renderer receives only text that is safe to *show*. Making it safe to
*embed* (HTML, JSON in a script element, plotly's label markup) is the
renderer's job.

Pure: no I/O, no plotly, no HTML.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

from analysis._printable import printable
from analysis._report_bins import (
    MAX_NAME,
    Histogram,
    Timeline,
    group_values,
    histogram,
    shown_series,
    timeline,
)
from analysis._trace_model import APPROVAL_OUTCOMES, ChainStatus, DecisionTraceReport
from analysis._trace_stats import LatencyStats
from analysis._verify_model import RunStatus, RunVerification
from runtime import RuntimeVerdict

__all__ = [
    "FIRST_PROBLEMS",
    "MAX_TEXT",
    "STAGE_ORDER",
    "TEXT_COLUMNS",
    "TOP_DETECTORS",
    "TOP_RULES",
    "DecisionColumns",
    "Integrity",
    "ReportPage",
    "RuleCounts",
    "build_report_page",
    "decision_columns",
    "rule_counts",
]

TOP_RULES: Final = 20
"""How many rules the rule chart names; the decisions of the others are summed in one bar."""
TOP_DETECTORS: Final = 10
"""How many detectors the overview names (those that fired in the most decisions)."""
FIRST_PROBLEMS: Final = 10
"""How many integrity problems (and unreadable records) the page lists; all are counted."""
MAX_TEXT: Final = 300
"""The most characters of one agent, verb, resource or rule the table shows (then an ellipsis)."""
_MAX_PROBLEM: Final = 500

STAGE_ORDER: Final = ("policy", "narrow", "scrub")
"""The gate's stages in the order they run; other stage names a log holds follow, sorted."""

TEXT_COLUMNS: Final = ("verdict", "agent", "verb", "resource", "rule", "chain")
"""The dictionary-encoded columns of the decision table."""


# --- rules ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RuleCounts:
    """How many decisions each rule decided.

    Attributes:
        top: ``(rule, decisions)`` of the `TOP_RULES` rules that decided most (ties by name).
        other_rules: how many further rules decided something.
        other_decisions: the decisions those further rules decided.
        default_decisions: decisions no rule decided (the policy default, or no
            ``matched_policy`` in the log).
    """

    top: tuple[tuple[str, int], ...]
    other_rules: int
    other_decisions: int
    default_decisions: int


def rule_counts(report: DecisionTraceReport) -> RuleCounts:
    """The rule hit counts of ``report``."""
    counts = report.per_matched_policy_counts
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    rest = ranked[TOP_RULES:]
    return RuleCounts(
        top=tuple((printable(rule, limit=MAX_NAME), count) for rule, count in ranked[:TOP_RULES]),
        other_rules=len(rest),
        other_decisions=sum(count for _, count in rest),
        default_decisions=report.total_decisions - sum(counts.values()),
    )


# --- the decision table ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecisionColumns:
    """The decision table as columns: entry ``i`` of each column is decision ``i`` in stream order.

    Attributes:
        first_ns: the earliest decision's ``stamp_ns`` (None without decisions).
        offset_ns: each decision's ``stamp_ns`` minus ``first_ns`` (never negative).
        latency_ns: each decision's latency.
        values: per `TEXT_COLUMNS` name, its distinct texts, sorted, None (unknown:
            no assessment logged, or for ``rule`` no rule decided) first; each text
            made printable and cut at `MAX_TEXT` characters.
        codes: per `TEXT_COLUMNS` name, the index in ``values`` of each decision's text,
            so that ordering rows by code orders them by text.
    """

    first_ns: int | None
    offset_ns: tuple[int, ...]
    latency_ns: tuple[int, ...]
    values: Mapping[str, tuple[str | None, ...]]
    codes: Mapping[str, tuple[int, ...]]

    @property
    def row_count(self) -> int:
        """How many decisions the table holds."""
        return len(self.latency_ns)


def _encode(texts: list[str | None]) -> tuple[tuple[str | None, ...], tuple[int, ...]]:
    # Each distinct raw text is made printable once; texts that print alike share a code.
    # str(): a verdict or chain status arrives as its StrEnum member.
    distinct = dict.fromkeys(texts)
    shown = {raw: None if raw is None else printable(str(raw), limit=MAX_TEXT) for raw in distinct}
    ordered = sorted(set(shown.values()), key=lambda text: (text is not None, text or ""))
    final = {text: code for code, text in enumerate(ordered)}
    code_of = {raw: final[text] for raw, text in shown.items()}
    return tuple(ordered), tuple(map(code_of.__getitem__, texts))


def decision_columns(report: DecisionTraceReport) -> DecisionColumns:
    """The decision table of ``report``."""
    records = report.records
    first = report.timestamp_first_ns
    base = 0 if first is None else first
    fields = {
        "verdict": "decision_kind",
        "agent": "agent",
        "verb": "verb",
        "resource": "resource",
        "rule": "matched_policy",
        "chain": "chain_status",
    }
    values: dict[str, tuple[str | None, ...]] = {}
    codes: dict[str, tuple[int, ...]] = {}
    for name, attribute in fields.items():
        values[name], codes[name] = _encode(list(map(attrgetter(attribute), records)))
    return DecisionColumns(
        first_ns=first,
        offset_ns=tuple(stamp - base for stamp in map(attrgetter("timestamp_ns"), records)),
        latency_ns=tuple(map(attrgetter("latency_ns"), records)),
        values=values,
        codes=codes,
    )


# --- the page -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Integrity:
    """The run's integrity, as `verify_run` found it, for the top of the page.

    Attributes:
        status: intact, truncated or tampered.
        summary: `verify_run`'s one line on the run (what ``ghost verify`` prints last).
        problem_count: every problem found.
        first_problems: the first `FIRST_PROBLEMS` of them, as printable sentences.
        unreadable_count: records the decision trace could not read or that break
            their schema (the report's ``problems``).
        first_unreadable: the first `FIRST_PROBLEMS` of those, as printable sentences.
    """

    status: RunStatus
    summary: str
    problem_count: int
    first_problems: tuple[str, ...]
    unreadable_count: int
    first_unreadable: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReportPage:
    """Everything ``ghost report`` shows about one run, ready to render.

    Attributes:
        integrity: the verdict on the run (shown first).
        source_sha256: SHA-256 hex of the file read.
        total_decisions: readable decisions.
        verdict_counts: ``(verdict, decisions)`` for every verdict, in `RuntimeVerdict` order.
        chain_counts: ``(chain status, decisions)`` for every `ChainStatus`.
        first_ns, last_ns: the earliest and latest decision (None without decisions).
        timeline: decisions over time (None without decisions).
        latency_by_verdict: latency histogram per verdict (None without decisions).
        latency_by_stage: per gate stage (None when no assessment times a stage).
        wait_by_outcome: approval waits per outcome (None without approvals).
        latency_stats: ``("all", stats)``, then per verdict that occurs.
        stage_stats: per stage shown in ``latency_by_stage``.
        wait_stats: ``("all", stats)``, then per outcome that occurs (empty without approvals).
        approval_counts: ``(outcome, approvals)`` for every outcome.
        unresolved_pending: pending decisions no approval of the run resolves.
        rules: rule hit counts.
        detectors: ``(detector, decisions)`` of the `TOP_DETECTORS` that fired most.
        table: every decision, as columns.
    """

    integrity: Integrity
    source_sha256: str
    total_decisions: int
    verdict_counts: tuple[tuple[str, int], ...]
    chain_counts: tuple[tuple[str, int], ...]
    first_ns: int | None
    last_ns: int | None
    timeline: Timeline | None
    latency_by_verdict: Histogram | None
    latency_by_stage: Histogram | None
    wait_by_outcome: Histogram | None
    latency_stats: tuple[tuple[str, LatencyStats], ...]
    stage_stats: tuple[tuple[str, LatencyStats], ...]
    wait_stats: tuple[tuple[str, LatencyStats], ...]
    approval_counts: tuple[tuple[str, int], ...]
    unresolved_pending: int
    rules: RuleCounts
    detectors: tuple[tuple[str, int], ...]
    table: DecisionColumns


def _integrity(verification: RunVerification, report: DecisionTraceReport) -> Integrity:
    return Integrity(
        status=verification.status,
        summary=printable(verification.summary, limit=_MAX_PROBLEM),
        problem_count=verification.problem_count,
        first_problems=tuple(
            printable(str(problem), limit=_MAX_PROBLEM)
            for problem in verification.problems[:FIRST_PROBLEMS]
        ),
        unreadable_count=len(report.problems),
        first_unreadable=tuple(
            printable(problem, limit=_MAX_PROBLEM) for problem in report.problems[:FIRST_PROBLEMS]
        ),
    )


def _with_all(
    overall: LatencyStats | None, by_key: Mapping[str, LatencyStats], keys: Iterable[str]
) -> tuple[tuple[str, LatencyStats], ...]:
    if overall is None:
        return ()
    return (("all", overall), *((key, by_key[key]) for key in keys if key in by_key))


def build_report_page(verification: RunVerification, report: DecisionTraceReport) -> ReportPage:
    """Compute what ``ghost report`` shows from a run's verification and its decision trace.

    Args:
        verification: `verify_run`'s result for the run.
        report: the run's decision trace report.
    """
    verdicts = [verdict.value for verdict in RuntimeVerdict]
    records = report.records
    stages = report.stage_ns_by_stage
    # The same selection as the stage histogram's: its totals are these counts.
    shown_stages = shown_series({name: s.count for name, s in stages.items()}, order=STAGE_ORDER)
    detectors = sorted(report.per_detector_counts.items(), key=lambda item: (-item[1], item[0]))
    return ReportPage(
        integrity=_integrity(verification, report),
        source_sha256=report.source_mcap_sha256,
        total_decisions=report.total_decisions,
        verdict_counts=tuple(
            (verdict, report.per_decision_kind_counts.get(verdict, 0)) for verdict in verdicts
        ),
        chain_counts=(
            (ChainStatus.VERIFIED.value, report.verified_count),
            (ChainStatus.BROKEN.value, report.broken_count),
            (ChainStatus.ASSESSMENT_MISSING.value, report.assessment_missing_count),
            (ChainStatus.NO_ASSESSMENT_CLAIMED.value, report.no_assessment_claimed_count),
        ),
        first_ns=report.timestamp_first_ns,
        last_ns=report.timestamp_last_ns,
        timeline=timeline(report),
        latency_by_verdict=histogram(
            {
                str(verdict): latencies
                for verdict, latencies in group_values(
                    zip(
                        map(attrgetter("decision_kind"), records),
                        map(attrgetter("latency_ns"), records),
                        strict=True,
                    )
                ).items()
            },
            order=verdicts,
        ),
        latency_by_stage=histogram(
            group_values(pair for record in records for pair in record.stage_ns.items()),
            order=STAGE_ORDER,
        ),
        wait_by_outcome=histogram(
            group_values((a.outcome, a.wait_ns) for a in report.approvals),
            order=APPROVAL_OUTCOMES,
        ),
        latency_stats=_with_all(report.latency_ns_stats, report.latency_ns_by_verdict, verdicts),
        stage_stats=tuple((printable(name, limit=MAX_NAME), stages[name]) for name in shown_stages),
        wait_stats=_with_all(
            report.approval_wait_ns_stats, report.approval_wait_ns_by_outcome, APPROVAL_OUTCOMES
        ),
        approval_counts=tuple(
            (outcome, report.per_approval_outcome_counts.get(outcome, 0))
            for outcome in APPROVAL_OUTCOMES
        ),
        unresolved_pending=len(report.unresolved_pending_decision_ids),
        rules=rule_counts(report),
        detectors=tuple(
            (printable(name, limit=MAX_NAME), count) for name, count in detectors[:TOP_DETECTORS]
        ),
        table=decision_columns(report),
    )
