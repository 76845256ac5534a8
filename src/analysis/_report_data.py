"""What ``ghost report`` shows, computed from a run's verification and decision trace.

The page has two kinds of content, and only one of them grows with the run:

1. **Aggregates for the charts**, whose size is bounded whatever the number
   of decisions (ADR 0020):

   * decisions over time: at most `MAX_TIME_BINS` bins of one "nice" width
     (a `DURATION_EDGES_NS` value, or a multiple of 30 days), counted per verdict;
   * latency per verdict and per gate stage, and approval waits per outcome:
     counts in fixed log-scaled bins whose edges are `DURATION_EDGES_NS`
     (1 ns, 2 ns, 5 ns, 10 ns, ... 500 ms, then 1 s, 2 s, 5 s, 10 s, 30 s,
     1 min, ... 30 d), trimmed to the bins between the first and the last
     that hold a value; at most `MAX_SERIES` series per chart;
   * rule hit counts: the `TOP_RULES` most used rules, the rest summed.

   Every count is an exact integer, binned with integer arithmetic only.

2. **The decision table**: one row per decision, in stream order, as
   columns (`DecisionColumns`). Text columns are dictionary-encoded: each
   distinct text once, sorted, and one small integer per row, so that the
   table of a million decisions costs a few bytes per row and sorting by a
   text column is sorting by its code.

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

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from operator import attrgetter
from typing import Final

from analysis._printable import printable
from analysis._trace_model import APPROVAL_OUTCOMES, ChainStatus, DecisionTraceReport
from analysis._trace_stats import LatencyStats
from analysis._verify_model import RunStatus, RunVerification
from runtime import RuntimeVerdict

__all__ = [
    "DURATION_EDGES_NS",
    "FIRST_PROBLEMS",
    "MAX_SERIES",
    "MAX_TEXT",
    "MAX_TIME_BINS",
    "STAGE_ORDER",
    "TEXT_COLUMNS",
    "TOP_DETECTORS",
    "TOP_RULES",
    "DecisionColumns",
    "Histogram",
    "HistogramBin",
    "Integrity",
    "ReportPage",
    "RuleCounts",
    "Timeline",
    "bin_index",
    "build_report_page",
    "decision_columns",
    "group_values",
    "histogram",
    "histogram_bin",
    "rule_counts",
    "shown_series",
    "time_bin_width_ns",
    "timeline",
    "utc_text",
]

_S: Final = 1_000_000_000
_DASH: Final = "\u2013"  # an en dash: "2-5 ms" reads as a range
_DAY_NS: Final = 86_400 * _S


def _duration_edges() -> tuple[tuple[int, str], ...]:
    # Below a second: 1-2-5 steps per decade, in the unit a person reads.
    edges = [
        (step * decade * unit_ns, f"{step * decade} {unit}")
        for unit_ns, unit in ((1, "ns"), (1_000, "µs"), (1_000_000, "ms"))
        for decade in (1, 10, 100)
        for step in (1, 2, 5)
    ]
    # From a second on: the durations a clock shows.
    edges += [
        (1 * _S, "1 s"), (2 * _S, "2 s"), (5 * _S, "5 s"), (10 * _S, "10 s"), (30 * _S, "30 s"),
        (60 * _S, "1 min"), (120 * _S, "2 min"), (300 * _S, "5 min"), (600 * _S, "10 min"),
        (1_800 * _S, "30 min"), (3_600 * _S, "1 h"), (7_200 * _S, "2 h"), (21_600 * _S, "6 h"),
        (43_200 * _S, "12 h"), (_DAY_NS, "1 d"), (2 * _DAY_NS, "2 d"), (7 * _DAY_NS, "7 d"),
        (30 * _DAY_NS, "30 d"),
    ]  # fmt: skip
    return tuple(edges)


DURATION_EDGES_NS: Final = _duration_edges()
"""``(edge_ns, label)``, increasing: the bin edges of every duration histogram and the
widths a time bin may have. Bin 0 holds values below 1 ns, bin k (1 <= k < len) holds
``edge[k-1] <= value < edge[k]``, and the last bin values of 30 days or more."""

_EDGES: Final = tuple(edge for edge, _ in DURATION_EDGES_NS)
_LABELS: Final = tuple(label for _, label in DURATION_EDGES_NS)

MAX_TIME_BINS: Final = 60
"""The most bins the decisions-over-time chart has."""
MAX_SERIES: Final = 8
"""The most series (verdicts, stages, outcomes) one duration chart shows; the rest are counted."""
TOP_RULES: Final = 20
"""How many rules the rule chart names; the decisions of the others are summed in one bar."""
TOP_DETECTORS: Final = 10
"""How many detectors the overview names (those that fired in the most decisions)."""
FIRST_PROBLEMS: Final = 10
"""How many integrity problems (and unreadable records) the page lists; all are counted."""
MAX_TEXT: Final = 300
"""The most characters of one agent, verb, resource or rule the table shows (then an ellipsis)."""
_MAX_NAME: Final = 80  # characters of a series, rule or detector name shown in a chart
_MAX_PROBLEM: Final = 500

STAGE_ORDER: Final = ("policy", "narrow", "scrub")
"""The gate's stages in the order they run; other stage names a log holds follow, sorted."""

TEXT_COLUMNS: Final = ("verdict", "agent", "verb", "resource", "rule", "chain")
"""The dictionary-encoded columns of the decision table."""


# --- durations in log-scaled bins ---------------------------------------------------------------


def bin_index(value_ns: int) -> int:
    """The index of the duration bin that holds ``value_ns`` (see `DURATION_EDGES_NS`)."""
    return bisect_right(_EDGES, value_ns)


_BIN: Final = partial(bisect_right, _EDGES)  # bin_index, without a Python frame per call


@dataclass(frozen=True, slots=True)
class HistogramBin:
    """One duration bin: ``low_ns <= value < high_ns``; None is open (no bound on that side).

    Attributes:
        low_ns: the lower edge (None for the first bin, below 1 ns).
        high_ns: the upper edge, excluded (None for the last bin, 30 days or more).
        label: the bin as a person reads it (``"2-5 ms"`` with an en dash, ``"<1 ns"``,
            ``"≥30 d"``).
    """

    low_ns: int | None
    high_ns: int | None
    label: str


def histogram_bin(index: int) -> HistogramBin:
    """The bin of index ``index`` (0 to ``len(DURATION_EDGES_NS)``).

    Raises:
        IndexError: no such bin.
    """
    if not 0 <= index <= len(_EDGES):
        raise IndexError(f"no duration bin {index}")
    if index == 0:
        return HistogramBin(None, _EDGES[0], f"<{_LABELS[0]}")
    if index == len(_EDGES):
        return HistogramBin(_EDGES[-1], None, f"≥{_LABELS[-1]}")
    low, high = _LABELS[index - 1], _LABELS[index]
    low_number, low_unit = low.split(" ")
    high_unit = high.split(" ")[1]
    label = f"{low_number}{_DASH}{high}" if low_unit == high_unit else f"{low}{_DASH}{high}"
    return HistogramBin(_EDGES[index - 1], _EDGES[index], label)


@dataclass(frozen=True, slots=True)
class Histogram:
    """Counts of durations per series, over consecutive duration bins.

    Attributes:
        bins: the bins shown: from the first to the last that holds a value of any series.
        series: ``(name, counts)`` per series shown, ``counts[i]`` for ``bins[i]``.
        totals: the number of values of each series (the sum of its counts).
        omitted_series: series left out (beyond `MAX_SERIES`, those with the fewest values).
    """

    bins: tuple[HistogramBin, ...]
    series: tuple[tuple[str, tuple[int, ...]], ...]
    totals: tuple[int, ...]
    omitted_series: int


def shown_series(totals: Mapping[str, int], *, order: Sequence[str] = ()) -> list[str]:
    """The series a chart shows, in the order it shows them.

    The `MAX_SERIES` with the most values (ties by name), those named in ``order``
    first and in that order, the others sorted.

    Args:
        totals: the number of values of each series.
        order: series names shown first, in this order.
    """
    kept = sorted(totals, key=lambda name: (-totals[name], name))[:MAX_SERIES]
    rank = {name: position for position, name in enumerate(order)}
    return sorted(kept, key=lambda name: (rank.get(name, len(rank)), name))


def group_values(pairs: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    """``(series, value)`` pairs grouped by series, each group in the order given."""
    groups: dict[str, list[int]] = {}
    for name, value in pairs:
        group = groups.get(name)
        if group is None:
            groups[name] = [value]
        else:
            group.append(value)
    return groups


def histogram(
    groups: Mapping[str, Iterable[int]], *, order: Sequence[str] = ()
) -> Histogram | None:
    """Bin each series' durations; None when there are none.

    Args:
        groups: the durations of each series, by series name.
        order: series names shown first, in this order (the others follow, sorted).
    """
    # map() with a C function: binning a million values costs no Python call per value.
    binned = {name: Counter(map(_BIN, values)) for name, values in groups.items()}
    counts = {name: counter for name, counter in binned.items() if counter}
    if not counts:
        return None
    totals = {name: counter.total() for name, counter in counts.items()}
    shown = shown_series(totals, order=order)
    used = [index for name in shown for index in counts[name]]
    low, high = min(used), max(used)
    return Histogram(
        bins=tuple(histogram_bin(index) for index in range(low, high + 1)),
        series=tuple(
            (
                printable(name, limit=_MAX_NAME),
                tuple(counts[name][index] for index in range(low, high + 1)),
            )
            for name in shown
        ),
        totals=tuple(totals[name] for name in shown),
        omitted_series=len(counts) - len(shown),
    )


def utc_text(stamp_ns: int) -> str:
    """A wall-clock time in ns since the epoch as ``YYYY-MM-DD HH:MM:SS.nnnnnnnnn UTC``.

    A time a ``datetime`` cannot hold (before year 1, after 9999: only a forged
    log has one) is shown as its number.
    """
    seconds, fraction = divmod(stamp_ns, 1_000_000_000)
    try:
        moment = datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return f"{stamp_ns} ns since the epoch"
    return f"{moment:%Y-%m-%d %H:%M:%S}.{fraction:09d} UTC"


# --- decisions over time --------------------------------------------------------------------------


def time_bin_width_ns(span_ns: int) -> int:
    """The width of the time bins for decisions spread over ``span_ns``.

    The smallest `DURATION_EDGES_NS` value ``w`` with ``span_ns < (MAX_TIME_BINS - 1) * w``
    (so that, with the first bin aligned down to a multiple of ``w``, at most
    `MAX_TIME_BINS` bins cover the span), or past 30 days the smallest multiple of 30 days.
    """
    slots = MAX_TIME_BINS - 1
    for edge in _EDGES:
        if span_ns < slots * edge:
            return edge
    month = _EDGES[-1]
    return (span_ns // (slots * month) + 1) * month


@dataclass(frozen=True, slots=True)
class Timeline:
    """Decisions per verdict in consecutive time bins.

    Attributes:
        start_ns: the start of the first bin (wall clock, ns since the epoch), a
            multiple of ``width_ns`` at or before the earliest decision.
        width_ns: the width of every bin.
        counts: ``(verdict, counts)`` for every verdict, in `RuntimeVerdict` order;
            ``counts[i]`` decisions fall in bin ``i``, from ``start_ns + i * width_ns``
            (included) to ``start_ns + (i + 1) * width_ns`` (excluded).
    """

    start_ns: int
    width_ns: int
    counts: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def bin_count(self) -> int:
        """How many bins there are."""
        return len(self.counts[0][1])


def timeline(report: DecisionTraceReport) -> Timeline | None:
    """The decisions of ``report`` per verdict over time; None without decisions."""
    first, last = report.timestamp_first_ns, report.timestamp_last_ns
    if first is None or last is None:
        return None
    width = time_bin_width_ns(last - first)
    start = first - first % width
    bins = (last - start) // width + 1
    counts = {verdict: [0] * bins for verdict in RuntimeVerdict}
    for record in report.records:
        counts[record.decision_kind][(record.timestamp_ns - start) // width] += 1
    return Timeline(
        start_ns=start,
        width_ns=width,
        counts=tuple((verdict.value, tuple(counts[verdict])) for verdict in RuntimeVerdict),
    )


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
        top=tuple((printable(rule, limit=_MAX_NAME), count) for rule, count in ranked[:TOP_RULES]),
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
        sealed, truncated: as `verify_run` says.
        record_count: records read on ghost topics.
        verified_prefix: records from the first that verify as a linked chain.
        unreadable_count: records the decision trace could not read or that break
            their schema (the report's ``problems``).
        first_unreadable: the first `FIRST_PROBLEMS` of those, as printable sentences.
    """

    status: RunStatus
    summary: str
    problem_count: int
    first_problems: tuple[str, ...]
    sealed: bool
    truncated: bool
    record_count: int
    verified_prefix: int
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
        sealed=verification.sealed,
        truncated=verification.truncated,
        record_count=verification.record_count,
        verified_prefix=verification.verified_prefix,
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
        stage_stats=tuple(
            (printable(name, limit=_MAX_NAME), stages[name]) for name in shown_stages
        ),
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
            (printable(name, limit=_MAX_NAME), count) for name, count in detectors[:TOP_DETECTORS]
        ),
        table=decision_columns(report),
    )
