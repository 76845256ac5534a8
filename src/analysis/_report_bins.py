"""The bins of ``ghost report``'s charts: durations on a log scale, decisions over time.

Both are exact integer counts whose size is bounded whatever the number of
values (ADR 0020):

* **Durations** (latency per verdict and per gate stage, approval waits per
  outcome) fall in fixed log-scaled bins whose edges are `DURATION_EDGES_NS`:
  1 ns, 2 ns, 5 ns, 10 ns, ... 500 ms in 1-2-5 steps, then the durations a clock
  shows (1 s, 2 s, 5 s, 10 s, 30 s, 1 min, ... 12 h, 1 d, 2 d, 7 d, 30 d). A
  `Histogram` keeps the bins from the first to the last that holds a value, for
  at most `MAX_SERIES` series.
* **Decisions over time** fall in at most `MAX_TIME_BINS` bins of one width,
  the smallest `DURATION_EDGES_NS` value (or multiple of 30 days) that covers
  the run's span, the first bin aligned down to a multiple of it (`Timeline`).

Series names come from the log (a stage name is whatever an assessment says):
each is made printable (`analysis._printable`) and cut at `MAX_NAME` characters.

Pure: integer arithmetic, no I/O.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Final

from analysis._printable import printable
from analysis._trace_model import DecisionTraceReport
from runtime import RuntimeVerdict

__all__ = [
    "DURATION_EDGES_NS",
    "MAX_NAME",
    "MAX_SERIES",
    "MAX_TIME_BINS",
    "Histogram",
    "HistogramBin",
    "Timeline",
    "bin_index",
    "group_values",
    "histogram",
    "histogram_bin",
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
MAX_NAME: Final = 80
"""The most characters of a series, rule or detector name a chart shows (then an ellipsis)."""


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
                printable(name, limit=MAX_NAME),
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
