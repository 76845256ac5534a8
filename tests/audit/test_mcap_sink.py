"""McapAuditSink: real MCAP files, read back by our reader and by the mcap library."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from mcap.reader import make_reader
from structlog.testing import capture_logs

from audit import Durability, LoggedRecord, McapAuditSink, read_run
from runtime import AuditError, AuditSink, canonical_bytes, content_address, sha256_hex
from tests.records import (
    POLICY_SOURCE,
    STAMP_NS,
    append_decisions,
    decision,
    make_run_start,
    write_run,
)

DURABILITIES: list[Durability] = ["process", "fsync", "chunk"]


def _assert_chain(records: tuple[LoggedRecord, ...]) -> None:
    previous = None
    for seq, logged in enumerate(records):
        assert logged.record is not None, logged.problem
        assert logged.record["seq"] == seq
        assert logged.record["prev_sha256"] == previous
        assert logged.data == canonical_bytes(logged.record)
        assert logged.sha256 == sha256_hex(logged.data) == content_address(logged.record)
        assert logged.sequence == seq
        assert logged.log_time_ns == logged.record["stamp_ns"]
        previous = logged.sha256


def test_is_an_audit_sink(tmp_path: Path) -> None:
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        assert isinstance(sink, AuditSink)


@pytest.mark.parametrize("durability", DURABILITIES)
def test_round_trip(tmp_path: Path, durability: Durability) -> None:
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(path, durability=durability)
    with sink:
        sink.open_run(make_run_start())
        addresses = append_decisions(sink, 3)
        assert sink.record_count == 2 + len(addresses)
        head = sink.head_sha256
    log = read_run(path)
    assert not log.truncated
    assert log.problems == ()
    assert log.source_sha256 == sha256_hex(path.read_bytes())
    _assert_chain(log.records)
    topics = [logged.topic for logged in log.records]
    assert topics[:2] == ["/run", "/checkpoints"]
    assert topics[-2:] == ["/checkpoints", "/seal"]
    assert [logged.sha256 for logged in log.records[2:-2]] == addresses
    run = log.records[0].record
    assert run is not None
    assert run["durability"] == durability
    assert run["pid"] == os.getpid()
    assert run["signing"] is None
    assert head == log.records[-3].sha256  # before close: the last appended record
    seal = log.records[-1].record
    assert seal is not None
    assert seal["record_count"] == len(log.records) - 1
    assert seal["head_sha256"] == log.records[-2].sha256  # the final checkpoint
    assert seal["stamp_ns"] >= log.records[-2].log_time_ns


@pytest.mark.parametrize("durability", DURABILITIES)
def test_the_mcap_library_reads_it_as_foxglove_would(
    tmp_path: Path, durability: Durability
) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, durability=durability)
    ours = read_run(path).records
    with path.open("rb") as stream:
        reader = make_reader(stream, validate_crcs=True)
        summary = reader.get_summary()
        assert summary is not None
        assert {s.id: (s.name, s.encoding) for s in summary.schemas.values()} == {
            1: ("ghost.run/1", "jsonschema"),
            2: ("ghost.assessment/1", "jsonschema"),
            3: ("ghost.decision/1", "jsonschema"),
            4: ("ghost.approval/1", "jsonschema"),
            5: ("ghost.seal/1", "jsonschema"),
            6: ("ghost.checkpoint/1", "jsonschema"),
        }
        for schema in summary.schemas.values():
            assert json.loads(schema.data)["title"] == schema.name
        channels = {c.topic: c for c in summary.channels.values()}
        assert {c.id: c.topic for c in summary.channels.values()} == {
            1: "/run", 2: "/assessments", 3: "/decisions", 4: "/approvals", 5: "/seal",
            6: "/checkpoints",
        }  # fmt: skip
        assert {c.message_encoding for c in channels.values()} == {"json"}
        for topic, channel in channels.items():
            schema = summary.schemas[channel.schema_id]
            assert schema.name == json.loads(schema.data)["properties"]["schema"]["const"], topic
        assert summary.statistics is not None
        assert summary.statistics.message_count == len(ours)
        if durability == "chunk":
            assert {i.compression for i in summary.chunk_indexes} == {"zstd"}
        else:
            # One uncompressed chunk per record, each indexed.
            assert {i.compression for i in summary.chunk_indexes} == {""}
            assert len(summary.chunk_indexes) == len(ours)
        assert all(i.message_index_offsets for i in summary.chunk_indexes)
        messages = list(reader.iter_messages(log_time_order=False))
    assert len(messages) == len(ours)
    for (_, channel, message), logged in zip(messages, ours, strict=True):
        record = json.loads(message.data)
        assert channel.topic == logged.topic
        assert message.data == logged.data == canonical_bytes(record)
        assert message.sequence == record["seq"]
        assert message.log_time == message.publish_time == record["stamp_ns"]


def test_canonical_bytes_are_on_disk_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    raw = path.read_bytes()
    for logged in read_run(path).records:
        assert logged.record is not None
        assert canonical_bytes(logged.record) in raw
    assert "café".encode() in raw  # non-ASCII kept, not \u-escaped


def test_attachment_holds_the_policy_source(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    log = read_run(path)
    (attachment,) = log.attachments
    assert attachment.name == "policy.toml"
    assert attachment.media_type == "application/toml"
    assert attachment.data == POLICY_SOURCE
    assert attachment.log_time_ns == STAMP_NS
    run = log.records[0].record
    assert run is not None
    assert attachment.sha256 == run["policy_source_sha256"]
    with path.open("rb") as stream:
        (theirs,) = make_reader(stream).iter_attachments()
    assert theirs.data == POLICY_SOURCE


@pytest.mark.parametrize("durability", ["process", "fsync"])
def test_every_record_is_in_the_file_when_append_returns(
    tmp_path: Path, durability: Durability
) -> None:
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(path, durability=durability)
    try:
        sink.open_run(make_run_start())
        log = read_run(path)
        assert log.truncated
        assert [r.topic for r in log.records] == ["/run", "/checkpoints"]
        assert log.attachments[0].data == POLICY_SOURCE
        addresses = append_decisions(sink, 2)
        # Without close: no footer, but every record is already readable.
        log = read_run(path)
        assert log.truncated
        assert log.problems == ()
        assert [r.sha256 for r in log.records[2:]] == addresses
        _assert_chain(log.records)
    finally:
        sink.close()
    assert not read_run(path).truncated


def test_fsync_mode_syncs_each_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr("audit._mcap_sink.os.fsync", synced.append)
    with McapAuditSink(tmp_path / "run.mcap", durability="fsync") as sink:
        sink.open_run(make_run_start())
        assert len(synced) == 1
        append_decisions(sink, 1)
        assert len(synced) == 4
    assert len(synced) == 5  # the seal and footer


def test_process_mode_never_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr("audit._mcap_sink.os.fsync", synced.append)
    write_run(tmp_path / "run.mcap")
    assert synced == []


def test_chunk_mode_flushes_the_run_at_once_and_the_rest_by_chunk(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path, durability="chunk") as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 2)
        log = read_run(path)
        # Only the open chunk is missing: the run record was flushed on its own.
        assert log.truncated
        assert [r.topic for r in log.records] == ["/run", "/checkpoints"]
    assert len(read_run(path).records) == 2 + 5 + 2


def test_chunk_mode_with_small_chunks_loses_nothing_finished(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path, durability="chunk", chunk_size=1) as sink:
        sink.open_run(make_run_start())
        addresses = append_decisions(sink, 3)
        log = read_run(path)
        assert log.truncated
        assert log.problems == ()
        assert [r.sha256 for r in log.records[2:]] == addresses
    log = read_run(path)
    assert not log.truncated
    _assert_chain(log.records)


def test_concurrent_appends_write_one_gapless_chain(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    threads_count, per_thread = 8, 15
    barrier = threading.Barrier(threads_count)
    # No time-based checkpoints: their number must not depend on the machine's speed.
    with McapAuditSink(path, checkpoint_every_ns=2**62) as sink:
        sink.open_run(make_run_start())

        def work() -> None:
            barrier.wait()
            append_decisions(sink, per_thread)

        threads = [threading.Thread(target=work) for _ in range(threads_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    log = read_run(path)
    appended = threads_count * (2 * per_thread + 1)
    checkpoints = 1 + appended // 100 + 1
    assert len(log.records) == 1 + appended + checkpoints + 1
    _assert_chain(log.records)


def test_sequence_is_seq_modulo_2_to_the_32(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())
        # Skip ahead: four billion records would take too long to write.
        sink._recorder._chain._next_seq = 2**32 + 5
        sink.append("/decisions", decision("d", None))
    record = read_run(path).records[2]
    assert record.record is not None
    assert record.record["seq"] == 2**32 + 5
    assert record.sequence == 5


def test_context_manager_seals_even_when_the_block_raises(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"

    def crash_inside() -> None:
        with McapAuditSink(path) as sink:
            sink.open_run(make_run_start())
            raise RuntimeError

    with pytest.raises(RuntimeError):
        crash_inside()
    log = read_run(path)
    assert [r.topic for r in log.records] == ["/run", "/checkpoints", "/checkpoints", "/seal"]
    assert not log.truncated


def test_close_is_idempotent_and_a_sink_without_run_is_an_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(path)
    sink.close()
    sink.close()
    assert sink.closed
    log = read_run(path)
    assert log.records == ()
    assert not log.truncated


def test_append_before_open_run(tmp_path: Path) -> None:
    with (
        McapAuditSink(tmp_path / "run.mcap") as sink,
        pytest.raises(AuditError, match="before open_run"),
    ):
        sink.append("/decisions", decision("d", None))


def test_append_and_open_run_after_close(tmp_path: Path) -> None:
    sink = write_run(tmp_path / "run.mcap")
    with pytest.raises(AuditError, match="after close"):
        sink.append("/decisions", decision("d", None))
    with pytest.raises(AuditError, match="after close"):
        sink.open_run(make_run_start())


def test_second_open_run(tmp_path: Path) -> None:
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        sink.open_run(make_run_start())
        with pytest.raises(AuditError, match="already called"):
            sink.open_run(make_run_start())


@pytest.mark.parametrize(
    ("topic", "record", "message"),
    [
        ("/decisions", {"schema": "ghost.approval/1", "stamp_ns": 1}, "must have schema"),
        ("/decisions", {"schema": "ghost.decision/1"}, "stamp_ns"),
        ("/run", {"schema": "ghost.run/1", "stamp_ns": 1}, "written by the sink"),
        ("/seal", {"schema": "ghost.seal/1", "stamp_ns": 1}, "written by the sink"),
        ("/elsewhere", {"schema": "ghost.decision/1", "stamp_ns": 1}, "not a ghost audit topic"),
        ("/decisions", {"schema": "ghost.decision/1", "stamp_ns": 1, "x": 0.5}, "encoded"),
    ],
)
def test_a_bad_record_is_refused_and_the_sink_goes_on(
    tmp_path: Path, topic: str, record: dict[str, Any], message: str
) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())
        with pytest.raises(AuditError, match=message):
            sink.append(topic, record)
        sink.append("/decisions", decision("d", None))
    log = read_run(path)
    _assert_chain(log.records)
    assert [r.topic for r in log.records] == [
        "/run", "/checkpoints", "/decisions", "/checkpoints", "/seal"
    ]  # fmt: skip


def test_missing_parent_directories_are_created(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "run.mcap"
    write_run(path)
    assert not read_run(path).truncated


def test_unwritable_path_fails_at_construction(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(AuditError, match=r"cannot create the directory .*file.* for audit log"):
        McapAuditSink(tmp_path / "file" / "run.mcap")
    with pytest.raises(AuditError, match="Is a directory"):
        McapAuditSink(tmp_path, overwrite=True)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"durability": "never"}, "durability must be"), ({"chunk_size": 0}, "chunk_size")],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        McapAuditSink(tmp_path / "run.mcap", **kwargs)
    assert not (tmp_path / "run.mcap").exists()


def test_a_failed_write_stops_the_sink_and_leaves_a_readable_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(path)
    sink.open_run(make_run_start())
    first = sink.append("/decisions", decision("d", None))

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sink._writer, "add_message", full_disk)
    with pytest.raises(AuditError, match="No space left on device") as raised:
        sink.append("/decisions", decision("d", None))
    assert isinstance(raised.value.__cause__, OSError)
    with pytest.raises(AuditError, match=r"earlier write failed.*before seq 3"):
        sink.append("/decisions", decision("d", None))
    with pytest.raises(AuditError, match="earlier write failed"):
        sink.open_run(make_run_start())
    sink.close()  # no seal after a failure, and no exception either
    log = read_run(path)
    assert log.truncated
    assert [r.sha256 for r in log.records][2:] == [first]


@pytest.mark.parametrize("durability", DURABILITIES)
def test_a_failed_flush_stops_the_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, durability: Durability
) -> None:
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(path, durability=durability, chunk_size=1)
    sink.open_run(make_run_start())

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sink._file, "flush", full_disk)
    monkeypatch.setattr(sink._writer, "flush", full_disk)
    with pytest.raises(AuditError, match="cannot write a record on /decisions"):
        sink.append("/decisions", decision("d", None))
    with pytest.raises(AuditError, match="earlier write failed"):
        sink.append("/decisions", decision("d", None))
    sink.close()


def test_a_failed_run_flush_stops_the_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = McapAuditSink(tmp_path / "run.mcap", durability="fsync")

    def broken_disk(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("audit._mcap_sink.os.fsync", broken_disk)
    with pytest.raises(AuditError, match=r"cannot write the /run record .*Input/output"):
        sink.open_run(make_run_start())
    with pytest.raises(AuditError, match="earlier write failed"):
        sink.append("/decisions", decision("d", None))
    sink.close()


def test_logs_open_and_seal_without_record_contents(tmp_path: Path) -> None:
    with capture_logs() as events:
        write_run(tmp_path / "run.mcap")
    names = [event["event"] for event in events]
    assert names == ["ghost.run_opened", "ghost.checkpoint", "ghost.checkpoint", "ghost.run_sealed"]
    assert events[-1]["record_count"] == 8  # the records before the seal
    text = repr(events)
    assert "researcher" not in text
    assert "read-public" not in text


def test_an_existing_log_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=20)
    before = path.read_bytes()
    with pytest.raises(AuditError, match=r"refusing to replace .*run\.mcap.*overwrite=True"):
        McapAuditSink(path)
    assert path.read_bytes() == before


def test_an_existing_directory_or_symlink_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="already exists"):
        McapAuditSink(tmp_path)
    link = tmp_path / "link.mcap"
    link.symlink_to(tmp_path / "target.mcap")
    with pytest.raises(AuditError, match="already exists"):
        McapAuditSink(link)
    # O_EXCL does not follow the link: nothing was created where it points.
    assert not (tmp_path / "target.mcap").exists()


def test_overwrite_replaces_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    path.write_bytes(b"old contents, longer than nothing at all" * 1000)
    with McapAuditSink(path, overwrite=True) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 1)
    log = read_run(path)
    assert not log.truncated
    assert log.problems == ()
    assert len(log.records) == 2 + 3 + 2


def test_permission_denied_fails_at_construction_even_as_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("audit._mcap_sink.os.open", denied)
    with pytest.raises(AuditError, match=r"cannot create audit log .*: Permission denied"):
        McapAuditSink(tmp_path / "run.mcap")


def test_a_failing_close_raises_once_and_closes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(path)
    sink.open_run(make_run_start())

    def full_disk() -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sink._writer, "finish", full_disk)
    with pytest.raises(AuditError, match=r"cannot seal audit log .*No space left on device"):
        sink.close()
    sink.close()
    assert sink._file.closed
    log = read_run(path)
    assert log.truncated
    # Each record reached the file as it was written; only the summary and footer are missing.
    assert [r.topic for r in log.records] == ["/run", "/checkpoints", "/checkpoints", "/seal"]


# --- run_id and close hooks (ADR 0016) -------------------------------------------------------


def test_run_id_and_close_hooks(tmp_path: Path) -> None:
    sink = McapAuditSink(tmp_path / "run.mcap")
    assert sink.run_id is None
    sink.open_run(make_run_start())
    calls: list[str] = []

    def hook() -> None:
        calls.append("hook")
        append_decisions(sink, 1)

    sink.on_close(hook)
    sink.close()
    sink.close()
    assert calls == ["hook"]
    records = read_run(tmp_path / "run.mcap").records
    assert sink.run_id == records[0].record["run_id"]  # type: ignore[index]
    assert [r.topic for r in records][-4:] == ["/decisions", "/approvals", "/checkpoints", "/seal"]


def test_a_failing_close_hook_still_seals_the_file(tmp_path: Path) -> None:
    sink = McapAuditSink(tmp_path / "run.mcap")
    sink.open_run(make_run_start())

    def failing() -> None:
        raise RuntimeError

    sink.on_close(failing)
    with pytest.raises(AuditError, match=r"a close hook failed \(RuntimeError\)"):
        sink.close()
    run = read_run(tmp_path / "run.mcap")
    assert not run.truncated
    assert run.records[-1].topic == "/seal"
