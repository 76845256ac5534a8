"""The streamed report (`analysis._trace_stream`) held to the in-memory one, byte for byte.

`streamed_bytes` writes the report of some reader items as ``ghost
trace-decisions`` does; `assert_streams_alike` requires it to be exactly
``encode_decision_trace_report_to_bytes`` of `TraceBuilder`'s report of the
same items -- with the default memory limits, and with `TINY_LIMITS`, which
send every store to disk at once (one map entry in memory and an 8-bit Bloom
filter, so lookups reach SQLite and meet false positives; one byte of list,
so every record, approval and problem is read back from a file, and sorted
by SQLite when out of order; one value of statistics, so every percentile is
read from an index). Where the in-memory encoder fails (a value no encoder
writes), the streamed one must fail alike, and before writing a byte.

`check_every_trace` makes every report a test builds through `TraceBuilder`
(`build_decision_trace_report`, `trace_items`, `trace_run`, `analyze_run`)
such a comparison too.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from analysis._decision_trace import TraceBuilder
from analysis._trace_json import encode_decision_trace_report_to_bytes
from analysis._trace_model import DecisionTraceReport
from analysis._trace_stream import SpillLimits, stream_trace
from audit import LoggedRecord, ReadEnd, ReadProblem, RunItem
from tests.records import read_end

__all__ = [
    "TINY_LIMITS",
    "assert_streams_alike",
    "check_every_trace",
    "in_memory_bytes",
    "records_of",
    "streamed_bytes",
]

TINY_LIMITS = SpillLimits(
    map_entries=1, id_filter_bits=8, filter_bits=8, list_bytes=1, rank_values=1
)


def streamed_bytes(items: Iterable[RunItem], limits: SpillLimits | None = None) -> bytes:
    """The report ``ghost trace-decisions`` writes for ``items``."""
    buffer = io.BytesIO()
    with stream_trace(items, limits=limits) as trace:
        trace.write(buffer)
    return buffer.getvalue()


def in_memory_bytes(items: Iterable[RunItem]) -> bytes:
    """``encode_decision_trace_report_to_bytes`` of `TraceBuilder`'s report of ``items``."""
    builder = TraceBuilder()
    for item in items:
        builder.take(item)
        if isinstance(item, ReadEnd):
            report = builder.finish(source_sha256=item.source_sha256, truncated=item.truncated)
            return encode_decision_trace_report_to_bytes(report)
    raise AssertionError("no ReadEnd")


def assert_streams_alike(items: list[RunItem], expected: bytes | None = None) -> bytes | None:
    """Require the streamed report of ``items`` to be the in-memory one, at both limits.

    Args:
        items: the reader's items, `audit.ReadEnd` last.
        expected: the in-memory bytes, if known.

    Returns:
        The bytes; None when the in-memory encoder cannot write the report (a
        lone surrogate in a problem), and the streamed one failed alike.
    """
    if expected is None:
        try:
            expected = in_memory_bytes(items)
        except UnicodeEncodeError:  # what no encoder can write
            for limits in (None, TINY_LIMITS):
                with pytest.raises(UnicodeEncodeError):
                    _streamed_into_nothing(items, limits)
            return None
    for limits in (None, TINY_LIMITS):
        assert streamed_bytes(items, limits) == expected, limits
    return expected


def _streamed_into_nothing(items: list[RunItem], limits: SpillLimits | None) -> None:
    # A failure must come before the report is written: nothing may reach the output.
    written = io.BytesIO()
    try:
        with stream_trace(items, limits=limits) as trace:
            trace.write(written)
    finally:
        assert written.getvalue() == b"", "a report that cannot be encoded was partly written"


def check_every_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make each report `TraceBuilder` finishes also a comparison with the streamed report."""
    fed: dict[int, list[RunItem]] = {}
    init, record = TraceBuilder.__init__, TraceBuilder.record
    read_problem, finish = TraceBuilder.read_problem, TraceBuilder.finish

    def starting(builder: TraceBuilder) -> None:
        init(builder)
        fed[id(builder)] = []  # a fresh start, should an unfinished builder have had this id

    def recording(builder: TraceBuilder, logged: LoggedRecord) -> None:
        fed.setdefault(id(builder), []).append(logged)
        record(builder, logged)

    def noting(builder: TraceBuilder, message: str) -> None:
        fed.setdefault(id(builder), []).append(_problem(message))
        read_problem(builder, message)

    def finishing(builder: TraceBuilder, **end: Any) -> DecisionTraceReport:
        report = finish(builder, **end)
        items = [*fed.pop(id(builder), []), read_end(**end)]
        try:
            expected = encode_decision_trace_report_to_bytes(report)
        except UnicodeEncodeError:
            assert assert_streams_alike(items) is None
        else:
            assert_streams_alike(items, expected)
        return report

    monkeypatch.setattr(TraceBuilder, "__init__", starting)
    monkeypatch.setattr(TraceBuilder, "record", recording)
    monkeypatch.setattr(TraceBuilder, "read_problem", noting)
    monkeypatch.setattr(TraceBuilder, "finish", finishing)


def _problem(message: str) -> ReadProblem:
    from audit import ProblemKind

    return ReadProblem(kind=ProblemKind.RECORD_UNPARSABLE, offset=None, message=message)


def records_of(items: Iterable[RunItem]) -> Iterator[LoggedRecord]:
    """The records among ``items``."""
    return (item for item in items if isinstance(item, LoggedRecord))
