"""read_run on good, foreign, damaged and unreadable files: never a traceback."""

from __future__ import annotations

import dataclasses
import os
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest
from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer

from audit import (
    TOPICS,
    CrcStatus,
    Durability,
    LogFormatError,
    LoggedAttachment,
    LoggedChannel,
    LoggedRecord,
    McapAuditSink,
    ProblemKind,
    ReadEnd,
    ReadLimits,
    RunLog,
    iter_run,
    read_run,
)
from audit._schemas import schema_data
from runtime import sha256_hex
from tests.audit.mcap_tools import RecordWriter, ghost_prelude, rewrite_mcap
from tests.records import write_run

MAGIC = b"\x89MCAP0\r\n"


def _write_mcap(
    path: Path,
    channels: Sequence[tuple[str, str, str]],
    messages: Sequence[tuple[int, bytes]],
    *,
    chunked: bool = False,
) -> None:
    """Write an MCAP file with the mcap Writer: channels are (topic, schema name, encoding)."""
    with path.open("wb") as stream:
        writer = Writer(
            stream,
            use_chunking=chunked,
            compression=CompressionType.ZSTD if chunked else CompressionType.NONE,
            enable_data_crcs=True,  # as ghost writes them
        )
        writer.start()
        ids = []
        for topic, schema_name, message_encoding in channels:
            data = schema_data(schema_name) if schema_name.startswith("ghost.") else b"{}"
            schema_id = writer.register_schema(schema_name, "jsonschema", data)
            ids.append(writer.register_channel(topic, message_encoding, schema_id))
        for seq, (channel_index, data) in enumerate(messages):
            channel_id = ids[channel_index] if channel_index >= 0 else 99
            writer.add_message(channel_id, log_time=seq, data=data, publish_time=seq, sequence=seq)
        writer.finish()


GHOST_DECISIONS = ("/decisions", "ghost.decision/1", "json")


def _refused(path: Path, match: str) -> LogFormatError:
    with pytest.raises(LogFormatError, match=match) as raised:
        read_run(path)
    assert raised.value.path == path
    assert str(path) in str(raised.value)
    assert "not a readable ghost audit log" in str(raised.value)
    return raised.value


def test_missing_file(tmp_path: Path) -> None:
    _refused(tmp_path / "nope.mcap", "no such file")


def test_directory(tmp_path: Path) -> None:
    _refused(tmp_path, "is a directory")


def test_text_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are not the records you are looking for\n")
    _refused(path, "not an MCAP file")


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.mcap"
    path.write_bytes(b"")
    _refused(path, "the file is empty")


def test_four_byte_file_cut_inside_the_magic(tmp_path: Path) -> None:
    path = tmp_path / "cut.mcap"
    path.write_bytes(MAGIC[:4])
    _refused(path, "cut inside the MCAP magic: it holds only 4 bytes")


def test_four_byte_file_that_is_not_magic(tmp_path: Path) -> None:
    path = tmp_path / "junk.mcap"
    path.write_bytes(b"PK\x03\x04")
    _refused(path, "not an MCAP file")


def test_mcap_from_another_program(tmp_path: Path) -> None:
    path = tmp_path / "robot.mcap"
    _write_mcap(path, [("/camera", "sensor.Image", "json")], [(0, b"{}")] * 3)
    error = _refused(path, "not a ghost audit log")
    assert "/camera" in error.problem


def test_ghost_topic_with_a_foreign_schema_is_not_ghost(tmp_path: Path) -> None:
    path = tmp_path / "lookalike.mcap"
    _write_mcap(path, [("/decisions", "other.Decision", "json")], [(0, b"{}")])
    _refused(path, "none of its channels is a ghost topic with a ghost schema")


def test_magic_only_is_not_a_ghost_log(tmp_path: Path) -> None:
    # SPEC §6: no ghost channel and no ghost record -- nothing an auditor could verify.
    path = tmp_path / "magic.mcap"
    path.write_bytes(MAGIC)
    _refused(path, "not a ghost audit log")


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"not json at all", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2, 3]", "JSON an array, not an object"),
        (b'"text"', "JSON a string, not an object"),
        (b"42", "JSON a number, not an object"),
        (b"null", "JSON null, not an object"),
        (b'{"a": 1, "a": 2}', "the key 'a' appears twice"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": -Infinity}', "-Infinity is not a JSON number"),
        (b"[" * 200_000 + b"]" * 200_000, "cannot be parsed as JSON (RecursionError)"),
        (b"1" * 5000, "cannot be parsed as JSON (ValueError)"),
        (b"", "not valid JSON"),
    ],
)
def test_a_message_that_is_not_a_json_object(tmp_path: Path, data: bytes, problem: str) -> None:
    path = tmp_path / "run.mcap"
    _write_mcap(path, [GHOST_DECISIONS], [(0, b'{"schema": "ghost.decision/1"}'), (0, data)])
    log = read_run(path)
    assert log.problems == ()
    good, bad = log.records
    assert good.record == {"schema": "ghost.decision/1"}
    assert good.problem is None
    assert bad.record is None
    assert bad.problem is not None
    assert problem in bad.problem
    assert bad.data == data


def test_messages_on_foreign_topics_and_unknown_channels_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "mixed.mcap"
    _write_mcap(
        path,
        [GHOST_DECISIONS, ("/camera", "sensor.Image", "json")],
        [(0, b"{}"), (1, b"{}"), (1, b"{}"), (-1, b"{}")],
    )
    log = read_run(path)
    assert [r.topic for r in log.records] == ["/decisions"]
    assert log.problems == (
        "1 message(s) on channel 99, which is never defined, were left out",
        "2 message(s) on /camera, which is not a ghost topic, were left out",
    )


def test_a_ghost_topic_with_the_wrong_encoding_is_kept_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "odd.mcap"
    _write_mcap(path, [GHOST_DECISIONS, ("/approvals", "ghost.approval/1", "cbor")], [(1, b"{}")])
    log = read_run(path)
    assert [r.topic for r in log.records] == ["/approvals"]
    (problem,) = log.problems
    assert problem == (
        "channel 2 on /approvals does not carry the ghost.approval/1 JSON schema with JSON messages"
    )


def _data_end_offset(path: Path) -> int:
    """Where the DataEnd record of a finished file is: just before the summary."""
    raw = path.read_bytes()
    footer = len(raw) - 8 - 29  # the Footer record: opcode, length, summary_start, ...
    summary_start = int.from_bytes(raw[footer + 9 : footer + 17], "little")
    assert raw[summary_start - 13] == 0x0F
    return summary_start - 13


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x20
    path.write_bytes(bytes(data))


def test_a_corrupt_chunk_costs_only_its_own_records(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, durability="chunk")
    intact = read_run(path).records
    with path.open("rb") as stream:
        summary = make_reader(stream).get_summary()
    assert summary is not None
    chunks = sorted(summary.chunk_indexes, key=lambda index: index.chunk_start_offset)
    assert len(chunks) == 2  # the /run chunk (flushed at once), then the rest
    first, last = chunks
    # The /run chunk holds /run and the checkpoint after it; the other chunk, the rest.
    assert [r.topic for r in intact if r.offset == first.chunk_start_offset] == [
        "/run",
        "/checkpoints",
    ]
    kept = tuple(r for r in intact if r.offset != last.chunk_start_offset)
    assert 0 < len(kept) < len(intact)
    _flip(path, last.chunk_start_offset + last.chunk_length - 3)  # inside its compressed data
    log = read_run(path)
    assert not log.truncated
    assert [problem.kind for problem in log.read_problems] == [
        ProblemKind.CHUNK_CORRUPT,
        ProblemKind.DATA_CRC_MISMATCH,
    ]
    assert f"the chunk at byte {last.chunk_start_offset} is corrupt" in log.problems[0]
    assert "data section fails its CRC check" in log.problems[1]
    assert log.records == kept


@pytest.mark.parametrize("durability", ["process", "fsync"])
def test_a_changed_message_byte_costs_its_chunk_and_is_reported(
    tmp_path: Path, durability: Durability
) -> None:
    # In every mode a message is in a chunk with its CRC: in process and fsync mode one
    # uncompressed chunk per record, so a flipped message byte loses that record, reported.
    path = tmp_path / "run.mcap"
    write_run(path, durability=durability)
    intact = read_run(path).records
    raw = path.read_bytes()
    offset = raw.index(b"researcher")  # in the first assessment
    hit = [r for r in intact if r.offset < offset][-1]  # the record whose chunk holds it
    assert hit.topic == "/assessments"
    assert hit.offset_in_chunk == 0  # the record is alone in its chunk
    _flip(path, offset)
    log = read_run(path)
    assert not log.truncated
    assert [(problem.kind, problem.offset) for problem in log.read_problems] == [
        (ProblemKind.CHUNK_CRC_MISMATCH, hit.offset),
        (ProblemKind.DATA_CRC_MISMATCH, _data_end_offset(path)),
    ]
    assert "data section fails its CRC check" in log.problems[1]
    assert log.records == tuple(r for r in intact if r is not hit)  # that record, and only it
    assert all(r.record is None or r.record.get("agent") != "Researcher" for r in log.records)


def test_a_changed_byte_in_an_unchunked_message_fails_the_data_section_crc(
    tmp_path: Path,
) -> None:
    # A message outside any chunk (ghost no longer writes one; another writer may) has no
    # CRC of its own: only the data-section CRC notices, and the record is read back altered.
    written = tmp_path / "run.mcap"
    write_run(written)
    path = tmp_path / "unchunked.mcap"
    rewrite_mcap(written, path, lambda _, data: data)
    intact = read_run(path)
    assert intact.problems == ()
    assert intact.end.chunk_count == 0
    assert all(r.offset_in_chunk is None for r in intact.records)
    _flip(path, path.read_bytes().index(b"researcher"))
    log = read_run(path)
    assert [problem.kind for problem in log.read_problems] == [ProblemKind.DATA_CRC_MISMATCH]
    assert "data section fails its CRC check" in log.problems[0]
    # Every record is read; the one flipped byte is read back altered, the rest as written.
    first = intact.records_on("/assessments")[0]
    assert first.record is not None
    assert len(log.records) == len(intact.records)
    for before, after in zip(intact.records, log.records, strict=True):
        if before is first:
            assert after.record == {**first.record, "agent": "Researcher"}
        else:
            assert after == before


def test_a_changed_attachment_byte_fails_its_crc(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    _flip(path, path.read_bytes().index(b'support-agent"\ndefault'))
    log = read_run(path)
    assert any("attachment 'policy.toml'" in problem for problem in log.problems)


def test_a_changed_summary_byte_fails_the_summary_crc(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    raw = path.read_bytes()
    # The summary repeats the schemas: flip a byte in the last copy.
    _flip(path, raw.rindex(b"ghost.seal/1") + 2)
    log = read_run(path)
    assert "the summary section fails its CRC check" in log.problems
    assert any("defined twice, differently" in problem for problem in log.problems)


def test_bytes_after_the_end_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    with path.open("ab") as stream:
        stream.write(b"appended")
    log = read_run(path)
    assert not log.truncated
    assert log.problems[-1].startswith("8 bytes follow the end of the MCAP file")


def test_a_damaged_closing_magic_is_a_problem_not_a_cut(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    _flip(path, len(path.read_bytes()) - 1)
    log = read_run(path)
    assert not log.truncated
    assert log.problems == (f"the closing MCAP magic at byte {path.stat().st_size - 8} is damaged",)


def test_zeros_after_a_crash_read_as_a_cut(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    sink = write_run(path, close=False)
    sink._file.flush()
    intact = read_run(path).records
    with path.open("ab") as stream:
        stream.write(bytes(100))
    log = read_run(path)
    sink.close()
    assert log.truncated
    assert log.problems == ()
    assert log.records == intact


def _definitions(log: RunLog) -> list[LoggedChannel]:
    """The channels of ``log`` by id, without where each was read."""
    return sorted(
        (dataclasses.replace(channel, offset=0) for channel in log.channels),
        key=lambda channel: channel.channel_id,
    )


def _spoil_first_channel_topic(path: Path) -> int:
    """Make the first Channel record's topic (``/run``) invalid UTF-8; return its offset."""
    raw = bytearray(path.read_bytes())
    topic = raw.index(b"\x04\x00\x00\x00/run")  # the topic's length prefix, then the topic
    channel = topic - 4 - 9  # the channel and schema ids, then opcode and record length
    assert raw[channel] == 0x04
    raw[topic + 4] = 0xFF
    path.write_bytes(bytes(raw))
    return channel


def test_a_corrupt_definition_costs_the_run_chunk_and_the_summary_repeats_it(
    tmp_path: Path,
) -> None:
    # ghost writes the definitions in the first chunk, with /run: a spoilt definition fails
    # that chunk's CRC, so /run is lost and reported; the summary still defines every channel.
    path = tmp_path / "run.mcap"
    write_run(path)
    intact = read_run(path)
    (run,) = intact.records_on("/run")
    channel = _spoil_first_channel_topic(path)
    assert run.offset < channel < intact.records[1].offset  # inside the /run record's chunk
    log = read_run(path)
    assert not log.truncated
    assert [(problem.kind, problem.offset) for problem in log.read_problems] == [
        (ProblemKind.CHUNK_CRC_MISMATCH, run.offset),
        (ProblemKind.DATA_CRC_MISMATCH, _data_end_offset(path)),
    ]
    assert log.records == intact.records[1:]
    # Every channel, as defined before; all of them now from the summary.
    assert _definitions(log) == _definitions(intact)
    assert all(channel.offset > intact.records[-1].offset for channel in log.channels)


def test_a_corrupt_record_inside_the_file_is_skipped(tmp_path: Path) -> None:
    # Outside a chunk (as another writer may put it), a spoilt definition is one record
    # that cannot be parsed: it is skipped, and the summary repeats the channel.
    written = tmp_path / "run.mcap"
    write_run(written)
    path = tmp_path / "unchunked.mcap"
    rewrite_mcap(written, path, lambda _, data: data)
    intact = read_run(path)
    assert intact.problems == ()
    channel = _spoil_first_channel_topic(path)
    log = read_run(path)
    assert [(problem.kind, problem.offset) for problem in log.read_problems] == [
        (ProblemKind.RECORD_UNPARSABLE, channel),
        (ProblemKind.DATA_CRC_MISMATCH, _data_end_offset(path)),
    ]
    assert "cannot be parsed" in log.problems[0]
    assert "skipped" in log.problems[0]
    # No record is lost: the /run record waits for its channel's definition in the summary.
    assert log.records == intact.records
    assert _definitions(log) == _definitions(intact)
    # The spoilt one from the summary, the others where they were, in the data section.
    from_summary = {c.topic: c.offset > intact.records[-1].offset for c in log.channels}
    assert from_summary == {topic: topic == "/run" for topic in TOPICS}


def test_zlib_crc_of_intact_file_matches_what_the_writer_says(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    log: RunLog = read_run(path)
    assert log.problems == ()
    assert zlib.crc32(path.read_bytes()) != 0


def test_a_removed_data_end_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    raw = bytearray(path.read_bytes())
    footer = len(raw) - 8 - 29  # the Footer record: opcode, length, summary_start, ...
    summary_start = int.from_bytes(raw[footer + 9 : footer + 17], "little")
    # The DataEnd record sits just before the summary; an unknown opcode hides it.
    data_end = summary_start - 13
    assert raw[data_end] == 0x0F
    raw[data_end] = 0x80
    path.write_bytes(bytes(raw))
    log = read_run(path)
    assert not log.truncated
    assert any("no DataEnd record" in problem for problem in log.problems)


def test_an_altered_length_in_a_finished_file_is_damage_not_a_cut(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    raw = bytearray(path.read_bytes())
    raw[9:17] = (len(raw) * 2).to_bytes(8, "little")  # the Header record's length
    path.write_bytes(bytes(raw))
    log = read_run(path)
    assert not log.truncated
    assert log.records == ()
    (problem,) = log.problems
    assert problem == (
        "the record at byte 8 runs past the end of the file, yet the file ends with the"
        " MCAP closing magic: it was altered, not cut, and no message or attachment after"
        " that record could be read"
    )
    # The summary repeats the channels: the file still shows it is ghost's.
    assert [channel.topic for channel in log.channels] == list(TOPICS)


def _failing_open(monkeypatch: pytest.MonkeyPatch, path: Path, error: OSError) -> None:
    """Make opening ``path`` (and only it) fail as the operating system would."""
    real_open = os.open

    def failing(file: object, flags: int, *args: int, **kwargs: object) -> int:
        if os.fspath(file) == os.fspath(path):  # type: ignore[call-overload]
            raise error
        return real_open(file, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", failing)


def test_unreadable_file_even_as_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    _failing_open(monkeypatch, path, PermissionError(13, "Permission denied"))
    _refused(path, "permission denied")


def test_other_os_errors_are_reported_with_their_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    _failing_open(monkeypatch, path, OSError(5, "Input/output error"))
    _refused(path, r"cannot be read \(Input/output error\)")


def test_a_fifo_is_not_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "pipe.mcap"
    os.mkfifo(path)
    _refused(path, "not a regular file")


def test_records_on_selects_a_topic(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=3)
    log = read_run(path)
    assert [r.topic for r in log.records_on("/decisions")] == ["/decisions"] * 3
    assert log.records_on("/nowhere") == ()


def test_unknown_records_are_skipped_without_losing_anything(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    intact = read_run(path)
    raw = path.read_bytes()
    # The first record after the Header: the policy attachment (ghost's definitions travel in
    # the first chunk, after it). Everything but the Header follows the insertion.
    attachment = 8 + 9 + int.from_bytes(raw[9:17], "little")
    assert attachment == intact.attachments[0].offset
    assert raw[attachment] == 0x09
    unknown = b"\x80" + (3).to_bytes(8, "little") + b"new"  # a future MCAP record type
    path.write_bytes(raw[:attachment] + unknown + raw[attachment:])
    log = read_run(path)
    # Everything after the insertion moved by its 12 bytes; nothing else changed.
    assert [(r.topic, r.data, r.offset - 12) for r in log.records] == [
        (r.topic, r.data, r.offset) for r in intact.records
    ]
    assert [(a.data, a.offset - 12) for a in log.attachments] == [
        (a.data, a.offset) for a in intact.attachments
    ]
    # The data-section CRC notices the insertion; so does the footer, whose pointer to the
    # summary it moved (the summary itself, and the attachment's CRC, still hold).
    assert [problem.kind for problem in log.read_problems] == [
        ProblemKind.DATA_CRC_MISMATCH,
        ProblemKind.SUMMARY_START_INVALID,
    ]
    assert "data section fails its CRC check" in log.problems[0]
    assert log.problems[1].startswith("the footer says the summary starts at byte")


# --- what a ghost log is, and what it is not ------------------------------------------------


def _header_only(library: str) -> bytes:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", library)
    return bytes(writer.buffer)


def test_a_file_cut_before_its_first_ghost_channel_is_not_a_ghost_log(tmp_path: Path) -> None:
    # A header is no evidence (anyone can write "ghost-sdk" into one): until a ghost
    # channel or record is in the file, there is no ghost audit log (SPEC §6).
    path = tmp_path / "new.mcap"
    ghost_header = _header_only("ghost-sdk; mcap 1.6")
    for content in (MAGIC + b"\x01", MAGIC + b"\x01\x05\x00", ghost_header[:-3], ghost_header):
        path.write_bytes(content)
        _refused(path, "not a ghost audit log")


def test_a_cut_file_from_another_writer_is_not_a_ghost_log(tmp_path: Path) -> None:
    path = tmp_path / "other.mcap"
    path.write_bytes(_header_only("someone else"))
    error = _refused(path, "not a ghost audit log")
    assert "written by: 'someone else'" in error.problem


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00" * 40,  # zeros after the magic
        b"PK\x03\x04 a zip file, say",
        b"\x01" + (2**40).to_bytes(8, "little") + b"junk",  # a header opcode, an absurd length
        bytes(range(256)),
    ],
)
def test_the_magic_followed_by_garbage_is_not_a_ghost_log(tmp_path: Path, garbage: bytes) -> None:
    path = tmp_path / "garbage.mcap"
    path.write_bytes(MAGIC + garbage)
    error = _refused(path, "what follows is not MCAP")
    assert error.problem.startswith("it begins with the MCAP magic, but what follows is not MCAP: ")


def test_an_empty_mcap_file_from_another_program_is_not_a_ghost_log(tmp_path: Path) -> None:
    path = tmp_path / "empty.mcap"
    with path.open("wb") as stream:
        writer = Writer(stream)
        writer.start(profile="", library="robot")
        writer.finish()
    error = _refused(path, "it is an MCAP file, but not a ghost audit log")
    assert "(its topics: none; written by: 'robot')" in error.problem


def test_iter_run_yields_nothing_from_a_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "robot.mcap"
    _write_mcap(path, [("/camera", "sensor.Image", "json")], [(0, b"{}")])
    items = iter_run(path)
    with pytest.raises(LogFormatError):
        next(items)


def test_iter_run_raises_only_when_iterated(tmp_path: Path) -> None:
    items = iter_run(tmp_path / "missing.mcap")  # no error yet: nothing is opened
    with pytest.raises(LogFormatError, match="no such file"):
        next(items)


def test_ghost_channels_without_a_run_record_are_ghosts_log(tmp_path: Path) -> None:
    path = tmp_path / "headless.mcap"
    _write_mcap(path, [GHOST_DECISIONS], [(0, b'{"schema": "ghost.decision/1"}')])
    log = read_run(path)
    assert [record.topic for record in log.records] == ["/decisions"]
    assert log.records_on("/run") == ()  # for the verifier to call tampered


def test_a_sink_closed_without_a_run_is_an_empty_whole_log(tmp_path: Path) -> None:
    path = tmp_path / "unused.mcap"
    McapAuditSink(path).close()
    log = read_run(path)
    assert log.records == ()
    assert [channel.topic for channel in log.channels] == list(TOPICS)
    assert not log.truncated
    assert log.problems == ()


def test_a_ghost_record_on_a_renamed_channel_shows_the_file_is_ghosts(tmp_path: Path) -> None:
    path = tmp_path / "renamed.mcap"
    record = b'{"schema":"ghost.decision/1","seq":1}'
    _write_mcap(path, [("/elsewhere", "other.Thing", "json")], [(0, b"{}"), (0, record)])
    log = read_run(path)
    assert log.records == ()
    assert [problem.kind for problem in log.read_problems] == [ProblemKind.FOREIGN_TOPIC]
    assert log.problems == (
        "2 message(s) on /elsewhere, which is not a ghost topic, were left out",
    )
    # Looking like one is not enough: the record must name a ghost schema.
    _write_mcap(path, [("/elsewhere", "other.Thing", "json")], [(0, b'{"schema":"ghost.nope/1"}')])
    _refused(path, "not a ghost audit log")


def test_a_ghost_header_does_not_make_a_file_ghosts(tmp_path: Path) -> None:
    path = tmp_path / "renamed.mcap"
    with path.open("wb") as stream:
        writer = Writer(stream, enable_data_crcs=True)
        writer.start(profile="", library="ghost-sdk; edited")
        schema = writer.register_schema("emptied", "jsonschema", b"")
        channel = writer.register_channel("/decisions", "json", schema)
        writer.add_message(channel, log_time=1, data=b"{}", publish_time=1)
        writer.finish()
    error = _refused(path, "not a ghost audit log")
    assert "its topics: /decisions" in error.problem


# --- ghost's CRC rules ---------------------------------------------------------------------


def test_a_zeroed_data_section_crc_is_damage_in_a_ghost_log(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    intact = read_run(path)
    assert intact.end.data_section_crc is CrcStatus.VALID
    raw = bytearray(path.read_bytes())
    footer = len(raw) - 8 - 29
    summary_start = int.from_bytes(raw[footer + 9 : footer + 17], "little")
    data_end = summary_start - 13
    raw[data_end + 9 : data_end + 13] = bytes(4)  # the one check that covers every byte
    path.write_bytes(bytes(raw))
    log = read_run(path)
    (problem,) = log.read_problems
    assert problem.kind is ProblemKind.CRC_MISSING
    assert problem.offset == data_end
    assert problem.message == (
        f"the data-section CRC (DataEnd at byte {data_end}) is zero, but ghost always writes"
        " it: the file was altered after it was written"
    )
    assert log.end.data_section_crc is CrcStatus.ZERO
    assert log.records == intact.records


def test_every_zero_crc_is_damage_in_a_ghost_log(tmp_path: Path) -> None:
    writer = RecordWriter()
    ghost_prelude(writer)
    writer.write_attachment("policy.toml", "application/toml", b"p", crc=0)
    inner = RecordWriter()
    inner.write_message(3, 1, 1, 1, b'{"schema":"ghost.decision/1"}')
    writer.write_chunk(bytes(inner.buffer), crc=0)
    writer.write_data_end(0)
    data = bytearray(writer.finish())
    data[-8 - 4 : -8] = bytes(4)
    path = tmp_path / "zeros.mcap"
    path.write_bytes(bytes(data))
    log = read_run(path)
    assert [problem.kind for problem in log.read_problems] == [ProblemKind.CRC_MISSING] * 4
    assert [problem.message.split(" is zero")[0] for problem in log.read_problems] == [
        f"the attachment 'policy.toml' at byte {log.attachments[0].offset}",
        f"the CRC of the chunk at byte {log.records[0].offset}",
        f"the data-section CRC (DataEnd at byte {log.read_problems[2].offset})",
        f"the summary CRC (Footer at byte {len(data) - 8 - 29})",
    ]
    # The records are still read: a missing CRC proves nothing about them either way.
    assert [record.sequence for record in log.records] == [1]
    assert log.end.summary_crc is CrcStatus.ZERO


def test_a_real_run_has_every_crc_and_a_full_summary(tmp_path: Path) -> None:
    for durability in ("process", "fsync", "chunk"):
        path = tmp_path / f"{durability}.mcap"
        write_run(path, durability=durability)  # type: ignore[arg-type]
        log = read_run(path)
        end = log.end
        assert log.problems == ()
        assert (end.footer, end.data_end, end.truncated, end.stopped) == (True, True, False, False)
        assert end.data_section_crc is CrcStatus.VALID
        assert end.summary_crc is CrcStatus.VALID
        assert end.has_summary
        assert end.statistics_count == 1
        assert end.chunk_index_count == end.chunk_count
        # Every message is in an indexed chunk, in every mode: one message index per
        # channel of each chunk.
        assert all(record.offset_in_chunk is not None for record in log.records)
        chunks: dict[int, set[int]] = {}
        for record in log.records:
            chunks.setdefault(record.offset, set()).add(record.channel_id)
        assert end.chunk_count == len(chunks)
        assert end.message_index_count == sum(len(channels) for channels in chunks.values())
        if durability == "chunk":
            assert 1 < end.chunk_count < len(log.records)
        else:
            assert end.chunk_count == len(log.records)  # one chunk per record
        assert end.library is not None
        assert end.library.startswith("ghost-sdk")
        assert end.size_bytes == path.stat().st_size
        assert log.source_sha256 == end.source_sha256 == sha256_hex(path.read_bytes())
        assert end.path == path


def test_a_padded_attachment_in_a_ghost_log_is_checked_from_its_crc_field(
    tmp_path: Path,
) -> None:
    path = tmp_path / "padded.mcap"
    writer = RecordWriter()
    ghost_prelude(writer)
    writer.pad = b"\x01\xff\xff"  # what the conformance files do, and the old reader misread
    writer.write_attachment("policy.toml", "application/toml", b"policy")
    writer.pad = b""
    writer.write_data_end()
    path.write_bytes(writer.finish())
    log = read_run(path)
    assert log.problems == ()
    assert log.attachments[0].data == b"policy"
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"policy", raw.index(b"toml"))] ^= 0x20
    path.write_bytes(bytes(raw))
    kinds = [problem.kind for problem in read_run(path).read_problems]
    assert kinds == [ProblemKind.ATTACHMENT_CRC_MISMATCH, ProblemKind.DATA_CRC_MISMATCH]


# --- order, late definitions, fields -----------------------------------------------------------


def test_messages_before_their_channel_wait_for_it_and_keep_their_place(tmp_path: Path) -> None:
    path = tmp_path / "late.mcap"
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "ghost-sdk; tests")
    writer.write_channel(3, 3, "/decisions", "json")  # its schema comes later
    writer.write_message(9, 0, 0, 0, b'{"n":0}')  # its channel comes later
    writer.write_message(3, 1, 1, 1, b'{"n":1}')
    writer.write_schema(3, "ghost.decision/1", "jsonschema", schema_data("ghost.decision/1"))
    writer.write_message(3, 2, 2, 2, b'{"n":2}')
    writer.write_channel(9, 3, "/decisions", "json")
    writer.write_data_end()
    path.write_bytes(writer.finish())
    streamed = [item for item in iter_run(path) if isinstance(item, LoggedRecord | LoggedChannel)]
    assert [
        (type(item).__name__, item.sequence if isinstance(item, LoggedRecord) else item.channel_id)
        for item in streamed
    ] == [
        ("LoggedChannel", 3),
        ("LoggedRecord", 1),
        ("LoggedRecord", 2),
        ("LoggedChannel", 9),
        ("LoggedRecord", 0),
    ]
    log = read_run(path)
    assert log.problems == ()
    assert [record.sequence for record in log.records] == [0, 1, 2]  # file order again
    assert all(channel.is_ghost for channel in log.channels)


def test_a_channel_whose_schema_never_comes_is_kept_without_one(tmp_path: Path) -> None:
    path = tmp_path / "schemaless.mcap"
    writer = RecordWriter()
    ghost_prelude(writer)  # channels 1-6: what makes the file a ghost log
    writer.write_channel(20, 17, "/decisions", "json")
    writer.write_message(20, 1, 1, 1, b"{}")
    writer.write_data_end()
    path.write_bytes(writer.finish())
    log = read_run(path)
    assert [problem.kind for problem in log.read_problems] == [ProblemKind.CHANNEL_NOT_GHOST]
    (channel,) = [channel for channel in log.channels if channel.channel_id == 20]
    assert (channel.schema_id, channel.schema_name, channel.schema_encoding) == (17, None, None)
    assert [record.sequence for record in log.records] == [1]


def test_a_schema_with_id_zero_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "zero.mcap"
    writer = RecordWriter()
    ghost_prelude(writer)
    writer.write_schema(0, "x", "jsonschema", b"{}")
    writer.write_data_end()
    path.write_bytes(writer.finish())
    (problem,) = read_run(path).read_problems
    assert problem.kind is ProblemKind.RECORD_UNPARSABLE
    assert "has id 0, which MCAP reserves" in problem.message


def test_a_channel_redefined_differently_keeps_its_first_definition(tmp_path: Path) -> None:
    path = tmp_path / "twice.mcap"
    writer = RecordWriter()
    ghost_prelude(writer)
    writer.write_channel(3, 3, "/decisions", "json")  # the same again: fine
    at = len(writer)
    writer.write_channel(3, 3, "/approvals", "json")
    writer.write_data_end()
    path.write_bytes(writer.finish())
    log = read_run(path)
    (problem,) = log.read_problems
    assert problem.kind is ProblemKind.DEFINITION_CONFLICT
    assert problem.offset == at
    assert problem.message == (
        f"channel 3 is defined twice, differently (again at byte {at}); the first definition"
        " is used"
    )
    assert [channel.topic for channel in log.channels if channel.channel_id == 3] == ["/decisions"]


def test_records_carry_where_and_how_they_were_logged(tmp_path: Path) -> None:
    for durability in ("process", "chunk"):
        path = tmp_path / f"{durability}.mcap"
        write_run(path, durability=durability)  # type: ignore[arg-type]
        raw = path.read_bytes()
        log = read_run(path)
        for record in log.records:
            assert record.publish_time_ns == record.log_time_ns
            assert record.channel_id == [c.topic for c in log.channels].index(record.topic) + 1
            opcode = raw[record.offset]
            assert opcode == (0x06 if record.offset_in_chunk is not None else 0x05)
        assert [r.position for r in log.records] == sorted(r.position for r in log.records)
        (attachment,) = log.attachments
        assert raw[attachment.offset] == 0x09
        assert attachment.create_time_ns == 0
        for channel in log.channels:
            assert channel.is_ghost
            assert channel.schema_name == TOPICS[channel.topic]
            assert channel.schema_data == schema_data(TOPICS[channel.topic])
            assert channel.schema_encoding == "jsonschema"
            assert channel.message_encoding == "json"
            assert dict(channel.metadata) == {}


def test_iter_run_ends_with_exactly_one_read_end(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    items = list(iter_run(path))
    assert isinstance(items[-1], ReadEnd)
    assert sum(isinstance(item, ReadEnd) for item in items) == 1
    first_record = next(i for i, item in enumerate(items) if isinstance(item, LoggedRecord))
    # Before the first record: the policy attachment, then every channel, in id order.
    assert isinstance(items[0], LoggedAttachment)
    channels = [item for item in items[1:first_record] if isinstance(item, LoggedChannel)]
    assert len(channels) == first_record - 1
    assert [channel.topic for channel in channels] == list(TOPICS)


def test_problems_are_capped_across_both_layers(tmp_path: Path) -> None:
    path = tmp_path / "many.mcap"
    writer = RecordWriter()
    ghost_prelude(writer)
    for channel_id in range(10, 20):
        writer.write_message(channel_id, 0, 0, 0, b"{}")  # each on a channel never defined
    writer.write_data_end()
    path.write_bytes(writer.finish())
    log = read_run(path, limits=ReadLimits(max_problems=3))
    assert [problem.kind for problem in log.read_problems] == [ProblemKind.UNKNOWN_CHANNEL] * 3 + [
        ProblemKind.TOO_MANY_PROBLEMS
    ]
    assert read_run(path, limits=ReadLimits(max_problems=10)).read_problems[-1].kind is (
        ProblemKind.TOO_MANY_PROBLEMS
    )
    assert len(read_run(path, limits=ReadLimits(max_problems=11)).read_problems) == 10


# --- what the reader keeps of headers, definitions and channels ----------------------------


def test_the_first_header_names_the_writer(tmp_path: Path) -> None:
    # A Header later in the file (inserted, say, to change who wrote it) is not the header.
    path = tmp_path / "two-headers.mcap"
    writer = RecordWriter()
    ghost_prelude(writer, library="ghost-sdk; first")
    writer.write_header("", "someone else")
    writer.write_data_end()
    path.write_bytes(writer.finish())
    log = read_run(path)
    assert log.problems == ()
    assert log.end.library == "ghost-sdk; first"


def test_a_ghost_log_without_a_header_is_read_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "headless.mcap"
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_schema(3, "ghost.decision/1", "jsonschema", schema_data("ghost.decision/1"))
    writer.write_channel(3, 3, "/decisions", "json")
    writer.write_message(3, 1, 1, 1, b'{"schema":"ghost.decision/1"}')
    writer.write_data_end()
    path.write_bytes(writer.finish())
    log = read_run(path)
    assert [problem.kind for problem in log.read_problems] == [ProblemKind.HEADER_MISSING]
    assert log.end.library is None
    assert [record.sequence for record in log.records] == [1]


def test_a_foreign_file_without_a_header_is_written_by_an_unknown_program(
    tmp_path: Path,
) -> None:
    path = tmp_path / "headless-robot.mcap"
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_channel(1, 0, "/camera", "json")
    writer.write_data_end()
    path.write_bytes(writer.finish())
    error = _refused(path, "it is an MCAP file, but not a ghost audit log")
    assert error.problem.endswith("(its topics: /camera; written by: unknown)")


def test_a_schema_redefined_differently_keeps_its_first_definition(tmp_path: Path) -> None:
    path = tmp_path / "twice.mcap"
    writer = RecordWriter()
    ghost_prelude(writer)
    at = len(writer)
    writer.write_schema(3, "ghost.decision/1", "jsonschema", b"{}")  # emptied, say
    writer.write_data_end()
    path.write_bytes(writer.finish())
    log = read_run(path)
    (problem,) = log.read_problems
    assert problem.kind is ProblemKind.DEFINITION_CONFLICT
    assert problem.offset == at
    assert problem.message == (
        f"schema 3 is defined twice, differently (again at byte {at}); the first definition is used"
    )
    (decisions,) = [channel for channel in log.channels if channel.topic == "/decisions"]
    assert decisions.schema_data == schema_data("ghost.decision/1")


def test_a_schemaless_channel_is_yielded_where_it_is_defined(tmp_path: Path) -> None:
    # Schema id 0 means "no schema": such a channel waits for nothing, so it and its
    # messages stream in file order, before what follows them.
    path = tmp_path / "schemaless.mcap"
    writer = RecordWriter()
    ghost_prelude(writer)
    writer.write_channel(20, 0, "/decisions", "json")
    writer.write_message(20, 1, 1, 1, b"{}")
    writer.write_message(3, 2, 2, 2, b"{}")
    writer.write_data_end()
    path.write_bytes(writer.finish())
    streamed = [
        (type(item).__name__, item.sequence if isinstance(item, LoggedRecord) else item.channel_id)
        for item in iter_run(path)
        if isinstance(item, LoggedRecord | LoggedChannel)
    ]
    assert streamed[-3:] == [("LoggedChannel", 20), ("LoggedRecord", 1), ("LoggedRecord", 2)]
    (channel,) = [channel for channel in read_run(path).channels if channel.channel_id == 20]
    assert (channel.schema_id, channel.schema_name, channel.is_ghost) == (0, None, False)


def test_only_a_record_as_ghost_writes_it_shows_a_file_is_ghosts(tmp_path: Path) -> None:
    # Ghost's records are canonical bytes (SPEC §5: separators "," and ":"), so a ghost
    # record always holds `"schema":"ghost.`. A foreign message that parses to a ghost
    # schema name but is spelled otherwise is not a ghost record: no evidence.
    path = tmp_path / "lookalike.mcap"
    spaced = b'{"schema": "ghost.decision/1", "seq": 1}'
    _write_mcap(path, [("/elsewhere", "other.Thing", "json")], [(0, spaced)])
    _refused(path, "not a ghost audit log")


def test_a_ghost_log_stays_ghosts_whatever_foreign_messages_follow(tmp_path: Path) -> None:
    # Once a ghost channel has shown the file is ghost's, a later foreign message that
    # looks like a ghost record but is none cannot turn the log into "not a ghost log"
    # (exit 1 instead of the tampering it is).
    path = tmp_path / "mixed.mcap"
    lookalike = b'{"schema":"ghost.nope/1"}'
    _write_mcap(
        path,
        [GHOST_DECISIONS, ("/elsewhere", "other.Thing", "json")],
        [(0, b'{"schema":"ghost.decision/1"}'), (1, lookalike), (1, b'{"schema":"ghost.')],
    )
    log = read_run(path)
    assert [record.topic for record in log.records] == ["/decisions"]
    assert log.problems == (
        "2 message(s) on /elsewhere, which is not a ghost topic, were left out",
    )
