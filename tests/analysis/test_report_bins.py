"""The bins of ``ghost report``'s charts: every edge, label and count known by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis import build_decision_trace_report
from analysis._report_bins import (
    DURATION_EDGES_NS,
    MAX_NAME,
    MAX_SERIES,
    MAX_TIME_BINS,
    Histogram,
    HistogramBin,
    bin_index,
    group_values,
    histogram,
    histogram_bin,
    shown_series,
    time_bin_width_ns,
    timeline,
    utc_text,
)
from tests.analysis.report_pages import decision, report_of
from tests.analysis.test_trace_statistics import MS, _write_known_run
from tests.records import STAMP_NS

S = 1_000_000_000
DAY = 86_400 * S
LAST_BIN = len(DURATION_EDGES_NS)


def ascii_label(found: HistogramBin) -> str:
    """The bin's label with its en dash as a hyphen (this file spells ranges in ASCII)."""
    return found.label.replace("\u2013", "-")


# --- the edges and their bins ----------------------------------------------------------------


def test_the_edges_are_1_2_5_steps_then_clock_durations() -> None:
    edges = [edge for edge, _ in DURATION_EDGES_NS]
    assert edges[:10] == [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000]
    assert edges[18:28] == [
        1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000,
        100_000_000, 200_000_000, 500_000_000, S,
    ]  # fmt: skip
    assert edges[27:] == [
        S, 2 * S, 5 * S, 10 * S, 30 * S, 60 * S, 120 * S, 300 * S, 600 * S, 1_800 * S,
        3_600 * S, 7_200 * S, 21_600 * S, 43_200 * S, DAY, 2 * DAY, 7 * DAY, 30 * DAY,
    ]  # fmt: skip
    assert [label for _, label in DURATION_EDGES_NS][8:12] == ["500 ns", "1 µs", "2 µs", "5 µs"]


@pytest.mark.parametrize(
    ("value", "index"),
    [
        (-(2**70), 0), (-1, 0), (0, 0), (1, 1), (2, 2), (4, 2), (5, 3), (9, 3), (10, 4),
        (499, 8), (500, 9), (999, 9), (1_000, 10), (999_999_999, 27), (S, 28),
        (30 * DAY - 1, LAST_BIN - 1), (30 * DAY, LAST_BIN), (2**80, LAST_BIN),
    ],
)  # fmt: skip
def test_a_value_falls_in_the_bin_whose_edges_enclose_it(value: int, index: int) -> None:
    assert bin_index(value) == index


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (0, HistogramBin(None, 1, "<1 ns")),
        (1, HistogramBin(1, 2, "1-2 ns")),
        (3, HistogramBin(5, 10, "5-10 ns")),
        (9, HistogramBin(500, 1_000, "500 ns-1 µs")),
        (10, HistogramBin(1_000, 2_000, "1-2 µs")),
        (27, HistogramBin(500_000_000, S, "500 ms-1 s")),
        (28, HistogramBin(S, 2 * S, "1-2 s")),
        (32, HistogramBin(30 * S, 60 * S, "30 s-1 min")),
        (LAST_BIN - 1, HistogramBin(7 * DAY, 30 * DAY, "7-30 d")),
        (LAST_BIN, HistogramBin(30 * DAY, None, "≥30 d")),
    ],
)
def test_each_bin_has_its_edges_and_a_label(index: int, expected: HistogramBin) -> None:
    found = histogram_bin(index)
    assert (found.low_ns, found.high_ns, ascii_label(found)) == (
        expected.low_ns,
        expected.high_ns,
        expected.label,
    )


def test_a_range_reads_with_an_en_dash() -> None:
    assert histogram_bin(1).label == "1\u20132 ns"
    assert histogram_bin(9).label == "500 ns\u20131 \u00b5s"


@pytest.mark.parametrize("index", [-1, LAST_BIN + 1])
def test_there_is_no_bin_outside_the_edges(index: int) -> None:
    with pytest.raises(IndexError, match=f"no duration bin {index}"):
        histogram_bin(index)


@given(st.integers(min_value=-(2**64), max_value=2**64))
def test_the_bin_of_a_value_holds_it(value: int) -> None:
    found = histogram_bin(bin_index(value))
    assert found.low_ns is None or found.low_ns <= value
    assert found.high_ns is None or value < found.high_ns


# --- histograms --------------------------------------------------------------------------------


def test_a_histogram_counts_each_series_over_the_bins_in_use() -> None:
    found = histogram(
        {"deny": [10 * MS, 20 * MS], "allow": [1 * MS, 2 * MS, 3 * MS, 4 * MS], "scrub": [7 * MS]},
        order=("deny", "scrub", "allow"),
    )
    assert found == Histogram(
        bins=tuple(histogram_bin(index) for index in range(19, 24)),
        series=(
            ("deny", (0, 0, 0, 1, 1)),
            ("scrub", (0, 0, 1, 0, 0)),
            ("allow", (1, 3, 0, 0, 0)),
        ),
        totals=(2, 1, 4),
        omitted_series=0,
    )
    assert [ascii_label(b) for b in found.bins] == [
        "1-2 ms", "2-5 ms", "5-10 ms", "10-20 ms", "20-50 ms",
    ]  # fmt: skip


def test_no_values_make_no_histogram() -> None:
    assert histogram({}) is None
    assert histogram({"deny": []}) is None


def test_a_series_without_values_is_left_out() -> None:
    found = histogram({"deny": [], "allow": [5]})
    assert found is not None
    assert found.series == (("allow", (1,)),)
    assert found.omitted_series == 0


def test_series_named_in_the_order_come_first_then_the_others_sorted() -> None:
    assert shown_series({"b": 1, "z": 1, "scrub": 1, "policy": 1}, order=("policy", "scrub")) == [
        "policy",
        "scrub",
        "b",
        "z",
    ]


def test_beyond_max_series_the_smallest_are_counted_not_shown() -> None:
    totals = {f"s{index:02d}": index + 1 for index in range(MAX_SERIES + 2)}
    shown = shown_series(totals)
    assert shown == [f"s{index:02d}" for index in range(2, MAX_SERIES + 2)]
    found = histogram({name: [1] * count for name, count in totals.items()})
    assert found is not None
    assert [name for name, _ in found.series] == shown
    assert found.omitted_series == 2


def test_ties_at_the_cut_keep_the_first_names() -> None:
    totals = dict.fromkeys((f"s{index}" for index in range(MAX_SERIES + 1)), 1)
    assert shown_series(totals) == [f"s{index}" for index in range(MAX_SERIES)]


def test_series_names_from_the_log_are_made_printable_and_cut() -> None:
    long_name = "x" * (MAX_NAME + 5)
    found = histogram({"a\x1b[2J": [1], long_name: [2]})
    assert found is not None
    assert [name for name, _ in found.series] == ["a\\x1b[2J", "x" * MAX_NAME + "…"]


def test_grouping_keeps_each_series_in_stream_order() -> None:
    assert group_values([("b", 3), ("a", 1), ("b", 2)]) == {"b": [3, 2], "a": [1]}


# --- decisions over time ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("span", "width"),
    [
        (0, 1), (58, 1), (59, 2), (117, 2), (118, 5), (9_000, 200), (59_000, 2_000),
        (59 * 30 * DAY - 1, 30 * DAY), (59 * 30 * DAY, 60 * DAY), (2 * 59 * 30 * DAY, 90 * DAY),
    ],
)  # fmt: skip
def test_the_time_bin_is_the_smallest_width_that_covers_the_span(span: int, width: int) -> None:
    assert time_bin_width_ns(span) == width


@given(
    st.integers(min_value=-(2**63), max_value=2**64),
    st.integers(min_value=0, max_value=2**64),
)
def test_at_most_max_time_bins_cover_any_run(first: int, span: int) -> None:
    report = report_of([decision(0, timestamp_ns=first), decision(1, timestamp_ns=first + span)])
    found = timeline(report)
    assert found is not None
    assert 1 <= found.bin_count <= MAX_TIME_BINS
    assert found.start_ns <= first < found.start_ns + found.width_ns
    assert first + span < found.start_ns + found.bin_count * found.width_ns
    assert found.start_ns % found.width_ns == 0
    assert sum(sum(counts) for _, counts in found.counts) == 2


def test_the_timeline_of_a_known_run(tmp_path: Path) -> None:
    path = tmp_path / "known.mcap"
    _write_known_run(path)  # ten decisions 1 µs apart: allow x4, deny x2, scrub, pending x3

    found = timeline(build_decision_trace_report(path))

    assert found is not None
    # A 9 µs span: the smallest width with 9000 < 59 w is 200 ns; decisions land 5 bins apart.
    assert (found.start_ns, found.width_ns, found.bin_count) == (STAMP_NS, 200, 46)
    expected = {
        "deny": {20, 25},
        "pending": {35, 40, 45},
        "narrow": set(),
        "scrub": {30},
        "allow": {0, 5, 10, 15},
    }
    assert [verdict for verdict, _ in found.counts] == list(expected)
    for verdict, counts in found.counts:
        assert {index for index, count in enumerate(counts) if count} == expected[verdict]
        assert set(counts) <= {0, 1}


def test_a_run_without_decisions_has_no_timeline() -> None:
    assert timeline(report_of([])) is None


def test_decisions_out_of_clock_order_are_binned_by_their_time() -> None:
    found = timeline(report_of([decision(0, timestamp_ns=50), decision(1, timestamp_ns=0)]))
    assert found is not None
    assert (found.start_ns, found.width_ns) == (0, 1)
    allow = dict(found.counts)["allow"]
    assert (allow[0], allow[50], sum(allow)) == (1, 1, 2)


# --- times as text -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stamp", "text"),
    [
        (STAMP_NS, "2026-01-01 00:00:00.000000000 UTC"),
        (STAMP_NS + 123_456_789, "2026-01-01 00:00:00.123456789 UTC"),
        (-1, "1969-12-31 23:59:59.999999999 UTC"),
        (10**30, f"{10**30} ns since the epoch"),
        (-(10**30), f"{-(10**30)} ns since the epoch"),
    ],
)
def test_a_wall_clock_time_reads_as_utc_to_the_nanosecond(stamp: int, text: str) -> None:
    assert utc_text(stamp) == text
