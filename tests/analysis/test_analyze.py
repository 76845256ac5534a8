"""`analyze_run`: a run's verification and decision trace from one streaming pass."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import audit
from analysis import build_decision_trace_report, verify_run
from analysis._analyze import PROGRESS_STEPS, analyze_run, run_items
from analysis._cli_progress import progress_bar
from analysis._decision_trace import trace_items, trace_run
from audit import LoggedRecord, ReadEnd, read_run
from runtime import canonical_bytes, make_uuid7, sha256_hex
from tests.analysis.test_trace_statistics import _write_known_run
from tests.audit.mcap_tools import RecordWriter, ghost_prelude, rewrite_mcap
from tests.records import STAMP_NS, assessment, decision, write_run

# Every report built here is also streamed and compared byte for byte (tests/analysis/streamed.py).
pytestmark = pytest.mark.usefixtures("streamed_trace_checked")


def _runs(tmp_path: Path) -> dict[str, Path]:
    known = tmp_path / "known.mcap"
    _write_known_run(known)
    live, cut = tmp_path / "live.mcap", tmp_path / "cut.mcap"
    sink = write_run(live, decisions=4, close=False)
    cut.write_bytes(live.read_bytes())  # what a crash leaves: no seal, no footer
    sink.close()
    edited = tmp_path / "edited.mcap"

    def allow_it(topic: str, data: bytes) -> bytes:
        return data.replace(b'"verdict":"pending"', b'"verdict":"allow"')

    rewrite_mcap(live, edited, allow_it)
    return {"known": known, "truncated": cut, "tampered": edited}


@pytest.mark.parametrize("kind", ["known", "truncated", "tampered"])
def test_one_pass_gives_what_the_two_readings_give(tmp_path: Path, kind: str) -> None:
    path = _runs(tmp_path)[kind]

    analysis = analyze_run(path)

    assert analysis.verification == verify_run(path)
    assert analysis.report == build_decision_trace_report(path)
    assert analysis.report == trace_run(read_run(path))  # the in-memory reading agrees
    assert (
        analysis.verification.status.value
        == {
            "known": "intact",
            "truncated": "truncated",
            "tampered": "tampered",
        }[kind]
    )
    assert analysis.report.sealed is (kind != "truncated")
    assert analysis.report.truncated is (kind == "truncated")


def test_the_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _runs(tmp_path)["known"]
    opened: list[Path] = []
    real = audit.iter_run

    def counting(target: Path, **kwargs: Any) -> Iterator[audit.RunItem]:
        opened.append(target)
        return real(target, **kwargs)

    monkeypatch.setattr(audit, "iter_run", counting)

    analysis = analyze_run(path)

    assert opened == [path]
    assert analysis.report.total_decisions == 10


def test_progress_moves_forward_and_ends_at_the_file_size(tmp_path: Path) -> None:
    path = tmp_path / "long.mcap"
    write_run(path, decisions=400)
    size = path.stat().st_size
    heard: list[tuple[int, int]] = []

    analysis = analyze_run(path, progress=lambda done, total: heard.append((done, total)))

    assert analysis.report.total_decisions == 400
    assert heard[-1] == (size, size)
    assert len(heard) > 1  # it moved before the end
    assert len(heard) <= PROGRESS_STEPS + 1
    done = [d for d, _ in heard]
    assert done == sorted(done)
    assert all(total == size and 0 < d <= size for d, total in heard)


def test_without_a_progress_callback_the_stream_is_iter_runs(tmp_path: Path) -> None:
    path = _runs(tmp_path)["known"]

    assert list(run_items(path)) == list(audit.iter_run(path))
    assert list(run_items(path, progress=lambda done, total: None)) == list(audit.iter_run(path))


def test_a_stream_without_its_end_is_refused(tmp_path: Path) -> None:
    path = _runs(tmp_path)["known"]
    items = [item for item in audit.iter_run(path) if not isinstance(item, ReadEnd)]

    with pytest.raises(ValueError, match="without a ReadEnd"):
        trace_items(items)


def test_a_record_the_reader_yields_late_is_traced_where_the_file_holds_it(
    tmp_path: Path,
) -> None:
    # The first assessment sits on a channel defined only later in the file, so
    # the reader yields it after the second one. File order decides which one
    # is "last logged" (ADR-0022), and the decision's claim is to the second.
    decision_id = make_uuid7(STAMP_NS)
    first = canonical_bytes(assessment(decision_id, agent="first"))
    second = canonical_bytes(assessment(decision_id, agent="second"))
    claim = canonical_bytes(decision(decision_id, sha256_hex(second)))
    writer = RecordWriter()
    ghost_prelude(writer)  # /assessments is channel 2, /decisions channel 3
    writer.write_message(9, 0, 0, 0, first)  # its channel comes later
    writer.write_message(2, 1, 1, 1, second)
    writer.write_message(3, 2, 2, 2, claim)
    writer.write_channel(9, 2, "/assessments", "json")
    writer.write_data_end()
    path = tmp_path / "late.mcap"
    path.write_bytes(writer.finish())
    yielded = [i.data for i in audit.iter_run(path) if isinstance(i, LoggedRecord)]
    assert yielded == [second, claim, first]  # the late one really comes last

    report = analyze_run(path).report

    (record,) = report.records
    assert record.agent == "second"
    assert record.chain_status.value == "verified"
    assert report.duplicate_assessment_count == 1
    assert report == trace_run(read_run(path))


def test_the_seal_is_judged_on_the_last_two_records_in_file_order(tmp_path: Path) -> None:
    # A sealed run whose first record the reader yields late still ends in its seal.
    path = _runs(tmp_path)["known"]
    report = analyze_run(path).report
    items = list(audit.iter_run(path))
    records = [i for i in items if isinstance(i, LoggedRecord)]
    reordered = [records[-1], *records[:-1], *[i for i in items if isinstance(i, ReadEnd)]]

    assert report.sealed
    assert trace_items(reordered).sealed  # the seal is still last by position
    assert not trace_items([*records[:-1], items[-1]]).sealed  # without it, not sealed


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_progress_bar_that_it_then_erases(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=50)
    screen = _Terminal()

    with progress_bar(path, stream=screen, min_bytes=0) as progress:
        assert progress is not None
        analyze_run(path, progress=progress)

    drawn = screen.getvalue()
    assert "reading" in drawn
    assert f"{path.stat().st_size / 1000:.1f}" in drawn  # the file's size, in kB
    assert "\x1b[2K" in drawn  # transient: the line is cleared at the end


def test_no_bar_when_piped_or_for_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=2)
    size = path.stat().st_size

    with progress_bar(path, stream=io.StringIO(), min_bytes=0) as piped:
        assert piped is None
    with progress_bar(path, stream=_Terminal(), min_bytes=size + 1) as small:
        assert small is None
    with progress_bar(path, stream=_Terminal(), min_bytes=size) as big:
        assert big is not None
    with progress_bar(tmp_path / "missing.mcap", stream=_Terminal()) as gone:
        assert gone is None  # no size to show; the reader says the file is missing


def _sealed_run(path: Path, records: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """Write ``records`` (topic, record) through a real sink; return each one's address by tag."""
    from audit import McapAuditSink
    from runtime.testing import ManualClock
    from tests.records import make_run_start

    addresses: dict[str, str] = {}
    with McapAuditSink(path, clock=ManualClock()) as sink:
        sink.open_run(make_run_start())
        for topic, record in records:
            tag = record.pop("_tag", None)
            address = sink.append(topic, record)
            if tag:
                addresses[tag] = address
    return addresses


def test_a_decision_logged_before_its_assessment_is_paired_at_the_end(tmp_path: Path) -> None:
    # A chain cannot make this verified (the claim would have to name an address
    # that depends on the claim), but the trace must still pair the two: the
    # decision is "broken", not "assessment_missing", and shows the action.
    path = tmp_path / "late.mcap"
    decision_id = make_uuid7(STAMP_NS)
    addresses = _sealed_run(
        path,
        [
            ("/decisions", decision(decision_id, "f" * 64)),
            ("/assessments", {**assessment(decision_id, agent="x"), "_tag": "a"}),
        ],
    )

    (record,) = analyze_run(path).report.records

    assert record.chain_status.value == "broken"
    assert record.recomputed_assessment_sha256 == addresses["a"]
    assert (record.agent, record.verb, record.resource) == ("x", "read", "file:/data/q3.txt")
    assert dict(record.stage_ns) == {"policy": 1200, "narrow": 300, "scrub": 4500}


def test_an_assessment_replaced_after_its_decision_repairs_the_pairing(tmp_path: Path) -> None:
    path = tmp_path / "replaced.mcap"
    decision_id = make_uuid7(STAMP_NS)
    first = assessment(decision_id, agent="first", findings=[])
    second = assessment(decision_id, agent="second")
    addresses = _sealed_run(
        path,
        [
            ("/assessments", {**first, "_tag": "first"}),
            ("/decisions", {**decision(decision_id, None), "_tag": "d"}),
            ("/assessments", {**second, "_tag": "second"}),
        ],
    )

    report = analyze_run(path).report

    (record,) = report.records
    assert record.agent == "second"  # the last logged wins, though it came after
    assert record.detectors == ("email",)
    assert record.chain_status.value == "no_assessment_claimed"
    assert report.duplicate_assessment_count == 1
    assert addresses["first"] != addresses["second"]


def test_damage_the_reader_finds_is_listed_first_among_the_reports_problems(
    tmp_path: Path,
) -> None:
    path = _runs(tmp_path)["known"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a chunk: its CRC no longer matches
    path.write_bytes(bytes(data))
    damage = read_run(path).problems
    assert damage  # the reader saw it

    report = analyze_run(path).report

    assert report.problems[: len(damage)] == damage
    assert report == build_decision_trace_report(path) == trace_run(read_run(path))
