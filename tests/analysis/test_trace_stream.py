"""The streamed decision trace report: the in-memory report's bytes, in bounded memory.

``ghost trace-decisions`` writes its report with `analysis._trace_stream`
(ADR 0026, addendum). Whatever the run -- intact, cut, damaged, tampered,
crafted -- its bytes must be exactly those of
``encode_decision_trace_report_to_bytes(build_decision_trace_report(path))``,
with the stores in memory and with every store forced to disk
(`tests.analysis.streamed.TINY_LIMITS`). Every report the trace's other test
modules build is compared the same way (their ``streamed_trace_checked``
mark); here: real runs edited every way a tamperer or a crash edits them,
generated reader streams, and the stores on their own.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

import analysis._spilled_list as spilled_list
from analysis import build_decision_trace_report, encode_decision_trace_report_to_bytes
from analysis._spilled_list import SpilledList
from analysis._trace_stream import TraceStream, stream_trace
from audit import LoggedRecord, ReadEnd, ReadProblem, RunItem, iter_run
from runtime import Policy
from tests.analysis.stored_run import (
    Edit,
    StoredRun,
    delete,
    duplicate,
    move_to_end,
    write_gate_run,
)
from tests.analysis.streamed import (
    TINY_LIMITS,
    assert_streams_alike,
    check_every_trace,
    in_memory_bytes,
    streamed_bytes,
)
from tests.runtime.conftest import POLICY
from tests.strategies import trace_run_items


def _both(*edits: Edit) -> Edit:
    def edit(run: StoredRun) -> None:
        for each in edits:
            each(run)

    return edit


def _rechain(run: StoredRun) -> None:
    run.rechain()


def _edit(topic: str, nth: int = 0, **changes: object) -> Edit:
    return lambda run: run.edit(run.index(topic, nth), **changes)


def _big(topic: str, nth: int = 0, **changes: object) -> Edit:
    """Change fields to integers canonical encoding refuses (beyond 64 bits): plain JSON."""

    def edit(run: StoredRun) -> None:
        at = run.index(topic, nth)
        message = run.messages[at]
        record = {**message.record, **changes}
        data = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        run.messages[at] = replace(message, data=data.encode())

    return edit


def _raw(topic: str, nth: int, old: bytes, new: bytes) -> Edit:
    """Replace bytes of a stored record (for what canonical encoding cannot write)."""

    def edit(run: StoredRun) -> None:
        at = run.index(topic, nth)
        message = run.messages[at]
        assert old in message.data
        run.messages[at] = replace(message, data=message.data.replace(old, new))

    return edit


def _replace_assessment_after_its_decision(run: StoredRun) -> None:
    # A later duplicate with other contents: the decision must be re-paired with it.
    at = run.index("/assessments", 1)
    message = run.messages[at]
    later = message.with_record({**message.record, "agent": "replacement", "findings": []})
    run.messages.insert(run.index("/decisions", 4) + 1, later)


def _same_id_everywhere(run: StoredRun) -> None:
    first = run.messages[run.index("/decisions", 0)].record["decision_id"]
    for topic in ("/assessments", "/decisions", "/approvals"):
        for nth in range(len(run.records_on(topic))):
            run.edit(run.index(topic, nth), decision_id=first)


EDITS: dict[str, Edit] = {
    "intact": lambda run: None,
    "decision deleted": delete("/decisions", 2),
    "assessment deleted": delete("/assessments", 1),
    "pair duplicated": _both(duplicate("/decisions", 1), duplicate("/assessments", 1)),
    "decision duplicated": duplicate("/decisions", 1),
    "assessment duplicated": duplicate("/assessments", 0),
    "approval duplicated": duplicate("/approvals"),
    "approval deleted": delete("/approvals"),
    "decision moved to the end": move_to_end("/decisions", 0),
    "assessment moved to the end": move_to_end("/assessments", 4),
    "assessment replaced after its decision": _replace_assessment_after_its_decision,
    "one decision id for everything": _same_id_everywhere,
    "agent altered": _edit("/assessments", 2, agent="attacker"),
    "claim nulled": _edit("/decisions", 3, assessment_sha256=None),
    "latency beyond 64 bits": _big("/decisions", 1, latency_ns=2**70),
    "stamp below -2**63": _big("/decisions", 0, stamp_ns=-(2**70)),
    "stage time beyond 64 bits": _big(
        "/assessments", 0, stage_ns={"policy": 2**64, "scrub": 2**80 + 1}
    ),
    "wait beyond 64 bits": _big("/approvals", 0, wait_ns=2**65),
    "negative wait": _big("/approvals", 0, wait_ns=-(2**66)),
    "unreadable decision": _edit("/decisions", 2, verdict="maybe"),
    "unreadable assessment": _edit("/assessments", 3, decision_id=7),
    "unreadable approval": _edit("/approvals", 0, outcome="perhaps"),
    "schema broken elsewhere": _edit("/decisions", 0, trace_origin="bogus"),
    "non-ASCII everywhere": _both(
        _edit("/assessments", 0, agent="ñandú ☕", resource="file:/données/é"),
        _edit("/decisions", 0, reason="déjà vu — \u2028 — \x00", policy_id="política"),
    ),
    "lone surrogate in an agent": _raw("/assessments", 1, b'"agent":"bot"', b'"agent":"\\ud800"'),
    "lone surrogate in a reason": _raw("/decisions", 1, b'"reason":"', b'"reason":"\\udfff'),
    "not JSON": _raw("/decisions", 2, b"{", b"{{"),
    "re-chained after a duplicate": _both(duplicate("/decisions", 0), _rechain),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_an_edited_run_streams_the_in_memory_bytes(
    stored: StoredRun, name: str, tmp_path: Path
) -> None:
    EDITS[name](stored)
    path = stored.write(tmp_path / "edited.mcap")

    expected = encode_decision_trace_report_to_bytes(build_decision_trace_report(path))

    assert assert_streams_alike(list(iter_run(path)), expected) == expected
    json.loads(expected)  # a report, whatever the edit


def test_a_shadowed_run_streams_the_in_memory_bytes(tmp_path: Path) -> None:
    candidate = Policy.from_dict({**POLICY, "policy_id": "candidate", "default": "deny"})
    path = write_gate_run(tmp_path / "shadow.mcap", shadow=candidate).path

    expected = encode_decision_trace_report_to_bytes(build_decision_trace_report(path))

    assert b'"shadow_verdict": "deny"' in expected
    assert assert_streams_alike(list(iter_run(path)), expected) == expected


@pytest.mark.parametrize("cut", [0.6, 0.8, 0.95])
def test_a_cut_run_streams_the_in_memory_bytes(
    stored: StoredRun, tmp_path: Path, cut: float
) -> None:
    path = stored.write(tmp_path / "run.mcap")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * cut)])

    assert_streams_alike(list(iter_run(path)))


def test_a_damaged_chunk_streams_the_in_memory_bytes(tmp_path: Path) -> None:
    path = write_gate_run(tmp_path / "run.mcap", durability="chunk").path
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    items = list(iter_run(path))
    assert any(isinstance(item, ReadProblem) for item in items)

    assert_streams_alike(items)


def _shuffled(
    items: list[RunItem], order: Callable[[list[LoggedRecord]], list[LoggedRecord]]
) -> list[RunItem]:
    records = [item for item in items if isinstance(item, LoggedRecord)]
    rest = [item for item in items if not isinstance(item, LoggedRecord | ReadEnd)]
    ends = [item for item in items if isinstance(item, ReadEnd)]
    return [*rest, *order(records), *ends]


@pytest.mark.parametrize(
    "order",
    [lambda records: records[::-1], lambda records: records[1::2] + records[::2]],
    ids=["reversed", "interleaved"],
)
def test_records_yielded_out_of_file_order_stream_in_file_order(
    stored: StoredRun, tmp_path: Path, order: Callable[[list[LoggedRecord]], list[LoggedRecord]]
) -> None:
    path = stored.write(tmp_path / "run.mcap")
    items = list(iter_run(path))
    expected = in_memory_bytes(items)

    # The reader yields a record late when its channel is defined late: its position
    # still says where the file holds it, and the report is in file order.
    assert assert_streams_alike(_shuffled(items, order)) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace_run_items())
def test_a_generated_reader_stream_streams_the_in_memory_bytes(items: list[RunItem]) -> None:
    assert_streams_alike(items)


# --- the stores on disk: every path taken -----------------------------------------------------


def test_tiny_limits_put_every_store_on_disk_and_the_bytes_stay(
    stored: StoredRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replace_assessment_after_its_decision(stored)
    move_to_end("/decisions", 1)(stored)
    path = stored.write(tmp_path / "run.mcap")
    items = _shuffled(list(iter_run(path)), lambda records: records[::-1])
    expected = in_memory_bytes(items)
    sorts = Counter[str]()
    sorted_by_sqlite = SpilledList._sorted

    def counted(self: SpilledList) -> Iterator[bytes]:
        sorts["sqlite"] += 1
        return sorted_by_sqlite(self)

    monkeypatch.setattr(spilled_list.SpilledList, "_sorted", counted)
    trace = TraceStream(TINY_LIMITS)
    for item in items[:-1]:
        if isinstance(item, LoggedRecord):
            trace.record(item)
    end = items[-1]
    assert isinstance(end, ReadEnd)
    # Before the end: everything read is on disk, and the pairing needs settling.
    assert trace._held.spilled
    assert trace._records.spilled
    assert not trace._records.in_order
    assert len(trace._repair) >= 1
    assert trace._decisions.latencies.spilled
    assert trace._approval_tallies.waits.spilled
    assert trace._approval_tallies.resolved.spilled

    trace.finish(source_sha256=end.source_sha256, truncated=end.truncated)

    assert trace._records.spilled  # settled: re-paired, in file order, still on disk
    assert trace._pairing.stages.spilled
    assert sorts["sqlite"] >= 1
    written = tmp_path / "report.json"
    with trace, written.open("wb") as stream:
        trace.write(stream)
    assert written.read_bytes() == expected
    assert b'"agent": "replacement"' in expected  # the re-pairing shows


def test_a_stream_without_its_end_is_refused() -> None:
    with pytest.raises(ValueError, match="without a ReadEnd"):
        stream_trace([])


def test_the_check_of_every_trace_can_fail(
    stored: StoredRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other modules' comparison is only worth something if a wrong byte fails it.
    path = stored.write(tmp_path / "run.mcap")
    check_every_trace(monkeypatch)
    monkeypatch.setattr("analysis._trace_stream._record_bytes", lambda payload: b"{}")

    with pytest.raises(AssertionError):
        build_decision_trace_report(path)


def test_streamed_bytes_are_what_the_cli_writes(stored: StoredRun, tmp_path: Path) -> None:
    from analysis._cli import main

    path = stored.write(tmp_path / "run.mcap")
    output = tmp_path / "report.json"

    assert main(["trace-decisions", str(path), "--output", str(output)]) == 0
    assert output.read_bytes() == streamed_bytes(iter_run(path))
