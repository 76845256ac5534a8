"""What ``ghost report`` shows: the page of a run with known contents, counted by hand."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from analysis import RunStatus, build_decision_trace_report, verify_run
from analysis._report_bins import MAX_SERIES, MAX_TIME_BINS, histogram_bin
from analysis._report_data import (
    FIRST_PROBLEMS,
    MAX_TEXT,
    TEXT_COLUMNS,
    TOP_DETECTORS,
    TOP_RULES,
    RuleCounts,
    build_report_page,
    decision_columns,
    rule_counts,
)
from tests.analysis.report_pages import decision, page_of, report_of, verification
from tests.analysis.test_report_bins import ascii_label
from tests.analysis.test_trace_statistics import MS, _write_known_run
from tests.audit.mcap_tools import rewrite_mcap
from tests.records import STAMP_NS, write_run

S = 1_000_000_000


@pytest.fixture
def known(tmp_path: Path) -> Path:
    path = tmp_path / "known.mcap"
    _write_known_run(path)
    return path


def _labels(first: int, last: int) -> list[str]:
    return [ascii_label(histogram_bin(index)) for index in range(first, last + 1)]


# --- the page of a known run ---------------------------------------------------------------------


def test_the_page_of_a_known_run(known: Path) -> None:
    page = build_report_page(verify_run(known), build_decision_trace_report(known))

    assert page.integrity.status is RunStatus.INTACT
    assert (page.integrity.problem_count, page.integrity.first_problems) == (0, ())
    assert page.integrity.summary.startswith("intact: ")
    assert page.total_decisions == 10
    assert page.verdict_counts == (
        ("deny", 2),
        ("pending", 3),
        ("narrow", 0),
        ("scrub", 1),
        ("allow", 4),
    )
    assert page.chain_counts == (
        ("verified", 10),
        ("broken", 0),
        ("assessment_missing", 0),
        ("no_assessment_claimed", 0),
    )
    assert (page.first_ns, page.last_ns) == (STAMP_NS, STAMP_NS + 9_000)
    assert page.approval_counts == (("approved", 2), ("rejected", 0), ("expired", 1))
    assert page.unresolved_pending == 1
    assert page.detectors == (("email", 3), ("aws_access_key", 1))
    assert page.rules == RuleCounts(
        top=(("read-public", 3), ("refunds", 3), ("web-search", 2), ("no-shell", 1)),
        other_rules=0,
        other_decisions=0,
        default_decisions=1,
    )


def test_the_latency_histogram_of_a_known_run(known: Path) -> None:
    page = build_report_page(verify_run(known), build_decision_trace_report(known))

    latency = page.latency_by_verdict
    assert latency is not None
    # allow 1 2 3 4 ms, deny 10 20 ms, scrub 7 ms, pending 5 6 8 ms; verdicts strongest first.
    assert [ascii_label(b) for b in latency.bins] == _labels(19, 23)
    assert _labels(19, 23) == ["1-2 ms", "2-5 ms", "5-10 ms", "10-20 ms", "20-50 ms"]
    assert latency.series == (
        ("deny", (0, 0, 0, 1, 1)),
        ("pending", (0, 0, 3, 0, 0)),
        ("scrub", (0, 0, 1, 0, 0)),
        ("allow", (1, 3, 0, 0, 0)),
    )
    assert latency.totals == (2, 3, 1, 4)
    assert [name for name, _ in page.latency_stats] == ["all", "deny", "pending", "scrub", "allow"]
    all_stats = dict(page.latency_stats)["all"]
    assert (all_stats.count, all_stats.p50_ns, all_stats.max_ns) == (10, 5 * MS, 20 * MS)


def test_the_stage_histogram_of_a_known_run(known: Path) -> None:
    page = build_report_page(verify_run(known), build_decision_trace_report(known))

    stages = page.latency_by_stage
    assert stages is not None
    # policy 0 50 60 80 100 200 300 400 500 600; narrow eight 0, 5, 6; scrub seven 0, 10 20 70.
    assert [ascii_label(b) for b in stages.bins] == [
        "<1 ns", "1-2 ns", "2-5 ns", "5-10 ns", "10-20 ns", "20-50 ns", "50-100 ns",
        "100-200 ns", "200-500 ns", "500 ns-1 µs",
    ]  # fmt: skip
    assert stages.series == (
        ("policy", (1, 0, 0, 0, 0, 0, 3, 1, 3, 2)),
        ("narrow", (8, 0, 0, 2, 0, 0, 0, 0, 0, 0)),
        ("scrub", (7, 0, 0, 0, 1, 1, 1, 0, 0, 0)),
    )
    assert [name for name, _ in page.stage_stats] == ["policy", "narrow", "scrub"]
    assert dict(page.stage_stats)["policy"].max_ns == 600


def test_the_approval_waits_of_a_known_run(known: Path) -> None:
    page = build_report_page(verify_run(known), build_decision_trace_report(known))

    waits = page.wait_by_outcome
    assert waits is not None
    # approved 3 s and 5 s; expired 600 s (an earlier run's decision).
    assert [ascii_label(b) for b in waits.bins] == [
        "2-5 s", "5-10 s", "10-30 s", "30 s-1 min", "1-2 min", "2-5 min", "5-10 min", "10-30 min",
    ]  # fmt: skip
    assert waits.series == (
        ("approved", (1, 1, 0, 0, 0, 0, 0, 0)),
        ("expired", (0, 0, 0, 0, 0, 0, 0, 1)),
    )
    assert [name for name, _ in page.wait_stats] == ["all", "approved", "expired"]
    assert dict(page.wait_stats)["all"].max_ns == 600 * S


def test_the_table_of_a_known_run(known: Path) -> None:
    table = decision_columns(build_decision_trace_report(known))

    assert table.row_count == 10
    assert table.first_ns == STAMP_NS
    assert table.offset_ns == tuple(index * 1_000 for index in range(10))
    assert table.latency_ns == tuple(ms * MS for ms in (1, 2, 3, 4, 10, 20, 7, 5, 6, 8))
    assert table.values["verdict"] == ("allow", "deny", "pending", "scrub")
    assert table.codes["verdict"] == (0, 0, 0, 0, 1, 1, 3, 2, 2, 2)
    assert table.values["agent"] == ("analyst", "ops/cleaner", "support")
    assert table.codes["agent"] == (0, 0, 2, 2, 2, 1, 0, 2, 2, 2)
    assert table.values["rule"] == (None, "no-shell", "read-public", "refunds", "web-search")
    assert table.codes["rule"] == (2, 2, 2, 4, 1, 0, 4, 3, 3, 3)
    assert table.values["resource"] == ("file:/data/q3.txt",)
    assert table.values["chain"] == ("verified",)
    assert set(table.values) == set(table.codes) == set(TEXT_COLUMNS)


# --- the table's encoding ------------------------------------------------------------------------


def test_texts_are_sorted_unknown_first_and_each_row_points_at_its_own() -> None:
    records = [
        decision(0, agent="zed", resource=None),
        decision(1, agent=None, resource="b"),
        decision(2, agent="amy", resource="a"),
        decision(3, agent="zed", resource="b"),
    ]
    table = decision_columns(report_of(records))
    for column, attribute in (("agent", "agent"), ("resource", "resource")):
        values, codes = table.values[column], table.codes[column]
        assert values[0] is None
        assert list(values[1:]) == sorted(values[1:])  # type: ignore[type-var]
        assert [values[code] for code in codes] == [getattr(r, attribute) for r in records]


def test_texts_are_made_printable_cut_and_merged_when_they_print_alike() -> None:
    records = [
        decision(0, resource="a\x00b"),
        decision(1, resource="a\\x00b"),  # prints as the first one does
        decision(2, resource="\ud800\u202e\u2028"),
        decision(3, resource="r" * (MAX_TEXT + 10)),
    ]
    table = decision_columns(report_of(records))
    assert table.values["resource"] == ("\\ud800\\u202e\\u2028", "a\\x00b", "r" * MAX_TEXT + "…")
    assert table.codes["resource"] == (1, 1, 0, 2)


def test_offsets_are_from_the_earliest_decision_not_the_first() -> None:
    records = [decision(0, timestamp_ns=5_000), decision(1, timestamp_ns=2_000)]
    table = decision_columns(report_of(records))
    assert (table.first_ns, table.offset_ns) == (2_000, (3_000, 0))


def test_an_empty_run_has_an_empty_table_and_no_charts() -> None:
    page = page_of([])
    assert page.table.row_count == 0
    assert page.table.first_ns is None
    assert all(page.table.values[name] == () for name in TEXT_COLUMNS)
    assert (page.timeline, page.latency_by_verdict, page.latency_by_stage) == (None, None, None)
    assert page.wait_by_outcome is None
    assert (page.latency_stats, page.stage_stats, page.wait_stats) == ((), (), ())
    assert page.rules == RuleCounts((), 0, 0, 0)


# --- rules and detectors -------------------------------------------------------------------------


def test_rules_beyond_the_top_are_summed() -> None:
    # Rule r00 decides 30 times, r01 29 times, ...; the last rules tie at one decision.
    records = []
    for rule in range(TOP_RULES + 5):
        records += [decision(len(records), matched_policy=f"r{rule:02d}")] * max(30 - rule, 1)
    records += [decision(len(records), matched_policy=None)] * 3
    rules = rule_counts(report_of(records))
    assert rules.top == tuple((f"r{rule:02d}", 30 - rule) for rule in range(TOP_RULES))
    assert rules.other_rules == 5
    assert rules.other_decisions == sum(
        max(30 - rule, 1) for rule in range(TOP_RULES, TOP_RULES + 5)
    )
    assert rules.default_decisions == 3


def test_tied_rules_are_listed_by_name_and_their_names_made_printable() -> None:
    records = [decision(0, matched_policy="b\x1b"), decision(1, matched_policy="a")]
    assert rule_counts(report_of(records)).top == (("a", 1), ("b\\x1b", 1))


def test_only_the_top_detectors_are_named() -> None:
    records = [
        decision(index, detectors=tuple(f"d{n:02d}" for n in range(index + 1)))
        for index in range(TOP_DETECTORS + 3)
    ]
    page = page_of(records)
    # d00 fired in every decision, d01 in all but one, ...
    assert page.detectors == tuple(
        (f"d{n:02d}", TOP_DETECTORS + 3 - n) for n in range(TOP_DETECTORS)
    )


# --- bounded aggregates --------------------------------------------------------------------------


def test_the_charts_stay_bounded_however_varied_the_run() -> None:
    # 3,000 decisions, each with its own rule and stage name, spread over years.
    records = [
        decision(
            index,
            matched_policy=f"rule-{index}",
            stage_ns={f"stage-{index}": index},
            latency_ns=index * 10**9,
            timestamp_ns=index * 10**16,
        )
        for index in range(3_000)
    ]
    page = page_of(records)
    assert page.timeline is not None
    assert page.timeline.bin_count <= MAX_TIME_BINS
    assert page.latency_by_stage is not None
    assert len(page.latency_by_stage.series) == MAX_SERIES
    assert page.latency_by_stage.omitted_series == 3_000 - MAX_SERIES
    assert len(page.stage_stats) == MAX_SERIES
    assert [name for name, _ in page.stage_stats] == [n for n, _ in page.latency_by_stage.series]
    assert len(page.rules.top) == TOP_RULES
    assert page.rules.other_rules == 3_000 - TOP_RULES
    for histogram in (page.latency_by_verdict, page.latency_by_stage):
        assert histogram is not None
        assert len(histogram.bins) <= 46


# --- integrity ---------------------------------------------------------------------------------


def test_a_tampered_run_lists_its_first_problems(tmp_path: Path) -> None:
    honest, edited = tmp_path / "honest.mcap", tmp_path / "edited.mcap"
    write_run(honest, decisions=3)

    def allow_everything(topic: str, data: bytes) -> bytes:
        return data.replace(b'"verdict":"pending"', b'"verdict":"allow"')

    rewrite_mcap(honest, edited, allow_everything)
    verification_ = verify_run(edited)
    page = build_report_page(verification_, build_decision_trace_report(edited))

    assert page.integrity.status is RunStatus.TAMPERED
    assert page.integrity.problem_count == verification_.problem_count > 0
    assert page.integrity.first_problems == tuple(
        str(problem) for problem in verification_.problems[:FIRST_PROBLEMS]
    )
    assert page.integrity.summary.startswith("tampered: ")


def test_only_the_first_problems_are_listed_and_each_made_printable() -> None:
    problems = [f"problem {index}\x1b[31m" for index in range(FIRST_PROBLEMS + 4)]
    page = page_of([decision(0)], status=RunStatus.TAMPERED, problems=problems)
    assert page.integrity.problem_count == FIRST_PROBLEMS + 4
    assert page.integrity.first_problems == tuple(
        f"file: chain: problem {index}\\x1b[31m" for index in range(FIRST_PROBLEMS)
    )


def test_records_the_report_could_not_read_are_counted_and_the_first_listed() -> None:
    report = report_of([decision(0)], problems=[f"bad record {i}\u202e" for i in range(12)])
    page = build_report_page(verification(), report)
    assert page.integrity.unreadable_count == 12
    assert page.integrity.first_unreadable == tuple(
        f"bad record {i}\\u202e" for i in range(FIRST_PROBLEMS)
    )


def test_a_truncated_run_says_how_far_it_verifies() -> None:
    page = page_of([decision(0)], status=RunStatus.TRUNCATED)
    assert page.integrity.status is RunStatus.TRUNCATED
    # verify_run's own line says how far the chain verifies and that the run is unsealed.
    assert page.integrity.summary == (
        "truncated: 4 records, seq 0-1 verify as a linked chain; not sealed: the run ends"
        " early, as a crash leaves it; without an anchor, a crash and a deliberate cut look"
        " the same"
    )


def test_the_page_carries_the_file_hash() -> None:
    report = dataclasses.replace(report_of([decision(0)]), source_mcap_sha256="d" * 64)
    assert build_report_page(verification(), report).source_sha256 == "d" * 64
