"""The reader's layers one by one: the hashing source, the record decoder, the MCAP scanner."""

from __future__ import annotations

import hashlib
import os
import random
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import CrcStatus, LogFormatError, ProblemKind
from audit._mcap_records import (
    MessageRecord,
    RecordError,
    opcode_name,
    read_attachment,
    read_channel,
    read_chunk,
    read_data_end,
    read_footer,
    read_header,
    read_message,
    read_schema,
)
from audit._mcap_scan import Found, McapScanner, ScanEnd, ZeroCrc, check_mcap
from audit._problems import DEFAULT_LIMITS, ReadLimits, ReadProblem
from audit._source import open_source
from tests.audit.mcap_tools import MAGIC, RecordWriter, string, u16, u32, u64

BLOCK = 256 * 1024


# --- ByteSource -------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    size=st.sampled_from([0, 1, 100, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 17]),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["read", "skip", "ensure", "mark"]),
            st.one_of(st.integers(0, 20), st.integers(0, 2 * BLOCK)),
        ),
        max_size=12,
    ),
)
def test_the_source_reads_hashes_and_crcs_like_a_plain_file(
    tmp_path_factory: pytest.TempPathFactory, size: int, steps: list[tuple[str, int]]
) -> None:
    data = bytes((index * 7 + index // 251) % 256 for index in range(size))
    path = tmp_path_factory.mktemp("source") / "data.bin"
    path.write_bytes(data)
    with open_source(path) as source:
        position = 0
        mark: int | None = None
        for step, count in steps:
            if step == "read":
                got = source.read(count)
                assert got == data[position : position + count]
                position += len(got)
            elif step == "skip":
                source.skip(count)
                position = min(size, position + count)
            elif step == "ensure":
                source.ensure(count)
            else:
                source.mark()
                mark = position
            assert source.position == position
            assert source.remaining == size - position
            # CRCs at the current position, and at the start of a small record read here.
            assert source.crc_at(position) == zlib.crc32(data[:position])
            if mark is not None:
                assert source.crc_since_mark_at(position) == zlib.crc32(data[mark:position])
            assert source.sha256_hex() == hashlib.sha256(data[:position]).hexdigest()
        source.drain()
        assert source.position == size
        assert source.sha256_hex() == hashlib.sha256(data).hexdigest()
        assert source.read(1) == b""


def test_crcs_at_a_record_start_stay_available_for_a_small_record(tmp_path: Path) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB: the window moves several times
    with open_source(_write(tmp_path, data)) as source:
        source.mark()
        for start in (0, 1000, BLOCK - 5, 2 * BLOCK + 3):
            source.skip(start - source.position)
            source.ensure(4105)
            source.read(4105)
            assert source.crc_at(start) == zlib.crc32(data[:start])
            assert source.crc_since_mark_at(start) == zlib.crc32(data[:start])
        with pytest.raises(ValueError, match="not in the window"):
            source.crc_at(0)  # long gone: the window moved on
        with pytest.raises(ValueError, match="not in the window"):
            source.crc_at(source.position + 1)  # not read yet


def test_no_crc_since_a_mark_that_was_never_set(tmp_path: Path) -> None:
    with open_source(_write(tmp_path, b"abc")) as source:
        source.read(2)
        assert source.crc_since_mark_at(2) is None


def test_read_at_does_not_move_the_sequential_read(tmp_path: Path) -> None:
    data = bytes(range(200))
    with open_source(_write(tmp_path, data)) as source:
        assert source.read(10) == data[:10]
        assert source.read_at(150, 10) == data[150:160]
        assert source.read_at(195, 10) == data[195:]
        assert source.read_at(-1, 10) == b""
        assert source.read_at(500, 10) == b""
        assert source.read(10) == data[10:20]
        assert source.sha256_hex() == hashlib.sha256(data[:20]).hexdigest()


def test_a_file_that_shrinks_while_read_ends_where_it_now_ends(tmp_path: Path) -> None:
    data = bytes(3 * BLOCK)
    path = _write(tmp_path, data)
    with open_source(path) as source:
        assert source.size == 3 * BLOCK
        source.read(10)
        path.write_bytes(data[: BLOCK + 5])  # truncated under the reader
        source.skip(2 * BLOCK)
        assert source.size == BLOCK + 5
        assert source.remaining == 0
        assert source.sha256_hex() == hashlib.sha256(data[: BLOCK + 5]).hexdigest()


def test_a_large_read_past_the_window_is_whole(tmp_path: Path) -> None:
    data = bytes(range(256)) * 8192  # 2 MiB
    with open_source(_write(tmp_path, data)) as source:
        source.read(3)
        assert source.read(BLOCK + 1) == data[3 : BLOCK + 4]
        assert source.read(len(data)) == data[BLOCK + 4 :]
        assert source.sha256_hex() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "the file is empty"),
        (MAGIC[:5], "cut inside the MCAP magic: it holds only 5 bytes"),
        (b"\x89MCAP1\r\n", "not an MCAP file"),
        (b"PK", "not an MCAP file"),
    ],
)
def test_the_magic_is_checked(tmp_path: Path, content: bytes, words: str) -> None:
    with open_source(_write(tmp_path, content)) as source, pytest.raises(LogFormatError) as raised:
        source.read_magic()
    assert words in raised.value.problem


def _write(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    return path


# --- the record decoder -------------------------------------------------------------------


def test_records_decode_field_by_field_and_padding_is_ignored() -> None:
    pad = b"\x01\xff\xff"
    header = read_header(memoryview(string("p") + string("lib") + pad))
    assert (header.profile, header.library) == ("p", "lib")
    schema = read_schema(memoryview(u16(7) + string("n") + string("e") + u32(2) + b"{}" + pad))
    assert (schema.id, schema.name, schema.encoding, schema.data) == (7, "n", "e", b"{}")
    pairs = string("k") + string("v") + string("k2") + string("")
    channel = read_channel(
        memoryview(u16(3) + u16(7) + string("/t") + string("json") + u32(len(pairs)) + pairs + pad)
    )
    assert (channel.id, channel.schema_id, channel.topic, channel.message_encoding) == (
        3,
        7,
        "/t",
        "json",
    )
    assert channel.metadata == (("k", "v"), ("k2", ""))
    message = read_message(memoryview(u16(3) + u32(9) + u64(10) + u64(11) + b"data"))
    assert (message.channel_id, message.sequence, message.log_time, message.publish_time) == (
        3,
        9,
        10,
        11,
    )
    assert message.data == b"data"
    body = u64(1) + u64(2) + u64(5) + u32(77) + string("zstd") + u64(3) + b"abc" + pad
    chunk = read_chunk(memoryview(body))
    assert (chunk.uncompressed_size, chunk.uncompressed_crc, chunk.compression) == (5, 77, "zstd")
    assert bytes(chunk.records) == b"abc"
    covered = u64(4) + u64(3) + string("a") + string("t") + u64(2) + b"xy"
    attachment = read_attachment(memoryview(covered + u32(0xDEADBEEF) + pad))
    assert (attachment.log_time, attachment.create_time, attachment.name) == (4, 3, "a")
    assert (attachment.media_type, attachment.data, attachment.crc) == ("t", b"xy", 0xDEADBEEF)
    assert bytes(attachment.crc_covered) == covered
    assert read_data_end(memoryview(u32(1234) + pad)) == 1234
    footer = read_footer(memoryview(u64(10) + u64(20) + u32(30)))
    assert (footer.summary_start, footer.summary_offset_start, footer.summary_crc) == (10, 20, 30)


@pytest.mark.parametrize(
    ("decode", "body", "words"),
    [
        (read_header, string("p")[:-1], "profile runs past"),
        (read_header, string("p"), "library runs past"),
        (read_header, u32(1) + b"\xff" + string(""), "profile is not UTF-8"),
        (read_schema, u16(1) + string("n") + string("e") + u32(5) + b"{}", "data runs past"),
        (read_channel, u16(1) + u16(1) + string("t") + string("e") + u32(9), "metadata runs past"),
        # A map entry that would run past the map's own stated size.
        (
            read_channel,
            u16(1) + u16(1) + string("t") + string("e") + u32(6) + string("long") + string(""),
            "metadata runs past",
        ),
        (read_message, u16(1) + u32(1) + u64(1) + b"\0" * 7, "header runs past"),
        (read_chunk, u64(0) * 3 + u32(0) + string("") + u64(9) + b"abc", "records runs past"),
        (
            read_attachment,
            u64(0) + u64(0) + string("a") + string("t") + u64(1) + b"x",
            "crc runs past",
        ),
        (read_data_end, b"\0\0\0", "data section crc runs past"),
        (read_footer, b"\0" * 19, "fields runs past"),
    ],
)
def test_a_field_that_runs_past_its_record_is_an_error(
    decode: object, body: bytes, words: str
) -> None:
    with pytest.raises(RecordError, match=words):
        decode(memoryview(body))  # type: ignore[operator]


def test_opcodes_are_named() -> None:
    assert opcode_name(0x08) == "chunk index"
    assert opcode_name(0x05) == "message"
    assert opcode_name(0x80) == "unknown (0x80)"


# --- the scanner ------------------------------------------------------------------------


def _scan(tmp_path: Path, data: bytes, limits: ReadLimits = DEFAULT_LIMITS) -> list[object]:
    path = tmp_path / "scan.mcap"
    path.write_bytes(data)
    with open_source(path) as source:
        source.read_magic()
        return list(McapScanner(source, limits).events())


def _problems(events: list[object]) -> list[ProblemKind]:
    return [event.kind for event in events if isinstance(event, ReadProblem)]


def _end(events: list[object]) -> ScanEnd:
    end = events[-1]
    assert isinstance(end, ScanEnd)
    return end


def _minimal(*, pad: bytes = b"", build: object = None, data_crc: int | None = None) -> bytes:
    writer = RecordWriter(pad=pad)
    writer.raw(MAGIC)
    writer.write_header("", "someone")
    if callable(build):
        build(writer)
    writer.write_data_end(data_crc)
    return writer.finish()


def test_a_minimal_file_is_whole_with_every_crc_valid(tmp_path: Path) -> None:
    events = _scan(tmp_path, _minimal())
    assert _problems(events) == []
    end = _end(events)
    assert (end.truncated, end.footer, end.data_end, end.stopped) == (False, True, True, False)
    assert end.data_section_crc is CrcStatus.VALID
    assert end.summary_crc is CrcStatus.VALID
    assert not end.has_summary
    header = events[0]
    assert isinstance(header, Found)
    assert header.offset == 8


def test_zero_crcs_are_reported_as_absent_not_as_mismatches(tmp_path: Path) -> None:
    def build(writer: RecordWriter) -> None:
        writer.write_attachment("a", "t", b"x", crc=0)
        writer.write_chunk(b"", crc=0)

    data = bytearray(_minimal(build=build, data_crc=0))
    data[-8 - 4 : -8] = u32(0)  # the summary CRC
    events = _scan(tmp_path, bytes(data))
    assert _problems(events) == []
    zeros = [event for event in events if isinstance(event, ZeroCrc)]
    assert [zero.what.split(" ")[1] for zero in zeros] == [
        "attachment",
        "CRC",
        "data-section",
        "summary",
    ]
    end = _end(events)
    assert end.data_section_crc is CrcStatus.ZERO
    assert end.summary_crc is CrcStatus.ZERO


def test_every_crc_mismatch_is_reported_with_its_record(tmp_path: Path) -> None:
    def build(writer: RecordWriter) -> None:
        writer.write_attachment("a", "t", b"x", crc=1)
        writer.write_chunk(b"", crc=1)

    data = bytearray(_minimal(build=build, data_crc=1))
    data[-8 - 4 : -8] = u32(1)
    events = _scan(tmp_path, bytes(data))
    assert _problems(events) == [
        ProblemKind.ATTACHMENT_CRC_MISMATCH,
        ProblemKind.CHUNK_CRC_MISMATCH,
        ProblemKind.DATA_CRC_MISMATCH,
        ProblemKind.SUMMARY_CRC_MISMATCH,
    ]
    for problem in events:
        if isinstance(problem, ReadProblem):
            assert problem.offset is not None
            assert data[problem.offset] in (0x09, 0x06, 0x0F, 0x02)  # each names its record
    attachment, chunk, data_end, _ = (e for e in events if isinstance(e, ReadProblem))
    assert attachment.message == (
        f"the attachment 'a' at byte {attachment.offset} fails its CRC check"
    )
    assert chunk.message == (
        f"the chunk at byte {chunk.offset} is corrupt (it fails its CRC check); the records"
        " in it are left out"
    )
    assert data_end.message == (
        f"the data section fails its CRC check: bytes before byte {data_end.offset} differ"
        " from what was written"
    )
    end = _end(events)
    assert end.data_section_crc is CrcStatus.MISMATCH
    assert end.summary_crc is CrcStatus.MISMATCH


def test_padding_after_fields_is_allowed_everywhere_it_may_be(tmp_path: Path) -> None:
    def build(writer: RecordWriter) -> None:
        writer.write_schema(1, "s", "e", b"{}")
        writer.write_channel(1, 1, "/t", "json", {"k": "v"})
        writer.write_message(1, 0, 0, 0, b"m")
        writer.write_attachment("a", "t", b"xyz")
        writer.write_metadata("m", {"k": "v"})

    events = _scan(tmp_path, _minimal(pad=b"\x01\xff\xff" * 5, build=build))
    assert _problems(events) == []
    found = [event.record for event in events if isinstance(event, Found)]
    assert len(found) == 5  # header, schema, channel, message, attachment
    # A DataEnd may be padded too: its CRC is read from its field.
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    crc = zlib.crc32(writer.buffer)
    writer.record(0x0F, u32(crc) + b"\0" * 4087)
    assert _problems(_scan(tmp_path, writer.finish())) == []
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.record(0x0F, u32(zlib.crc32(writer.buffer)) + b"\0" * 4093)  # over the 4096 bound
    assert _problems(_scan(tmp_path, writer.finish())) == [
        ProblemKind.RECORD_TOO_LARGE,
        ProblemKind.DATA_END_MISSING,
    ]


def test_a_record_at_the_bound_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    limits = ReadLimits(max_record_bytes=100)

    def message(size: int) -> bytes:
        return _minimal(build=lambda w: w.write_message(1, 0, 0, 0, b"x" * (size - 22)))

    at_bound = _scan(tmp_path, message(100), limits)
    assert _problems(at_bound) == []
    over = _scan(tmp_path, message(101), limits)
    assert _problems(over) == [ProblemKind.RECORD_TOO_LARGE]


def test_a_chunk_claim_at_the_bound_is_read_and_one_byte_more_is_not(tmp_path: Path) -> None:
    limits = ReadLimits(max_chunk_bytes=64)
    inner = RecordWriter()
    inner.write_message(1, 0, 0, 0, b"x" * (64 - 31))
    records = bytes(inner.buffer)
    assert len(records) == 64
    fine = _scan(tmp_path, _minimal(build=lambda w: w.write_chunk(records)), limits)
    assert _problems(fine) == []
    claims_more = _minimal(build=lambda w: w.write_chunk(records, uncompressed_size=65))
    assert _problems(_scan(tmp_path, claims_more, limits)) == [ProblemKind.CHUNK_TOO_LARGE]


def test_a_chunk_whose_records_overrun_it_keeps_the_records_before(tmp_path: Path) -> None:
    inner = RecordWriter()
    inner.write_message(1, 0, 0, 0, b"a")
    inner.write_message(1, 1, 1, 1, b"b")
    for cut in (5, 9 + 10):  # inside a record's prefix; inside its body
        records = bytes(inner.buffer)[: 9 + 23 + cut]
        events = _scan(tmp_path, _minimal(build=lambda w, r=records: w.write_chunk(r)))
        assert _problems(events) == [ProblemKind.CHUNK_CORRUPT]
        (problem,) = [e for e in events if isinstance(e, ReadProblem)]
        assert problem.message == (
            f"the chunk at byte {problem.offset} is corrupt (its record at offset 32 runs past"
            " the chunk's end); the records from there on are lost"
        )
        messages = [e for e in events if isinstance(e, Found) and e.offset_in_chunk is not None]
        assert [found.offset_in_chunk for found in messages] == [0]


def test_an_unparsable_record_in_a_chunk_is_skipped(tmp_path: Path) -> None:
    inner = RecordWriter()
    inner.record(0x04, b"\x01")  # a channel too short for its fields
    inner.record(0x80, b"future")  # an unknown record: skipped silently
    inner.write_message(1, 0, 0, 0, b"a")
    events = _scan(tmp_path, _minimal(build=lambda w: w.write_chunk(bytes(inner.buffer))))
    assert _problems(events) == [ProblemKind.RECORD_UNPARSABLE]
    problem = next(e for e in events if isinstance(e, ReadProblem))
    assert "the channel record at offset 0 in the chunk at byte" in problem.message
    assert [e.offset_in_chunk for e in events if isinstance(e, Found)][1:] == [9 + 1 + 9 + 6]


def test_a_file_that_does_not_begin_with_a_header_is_told_so(tmp_path: Path) -> None:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_message(1, 0, 0, 0, b"x")
    writer.write_header("", "late")  # a header elsewhere does not count
    writer.write_data_end()
    events = _scan(tmp_path, writer.finish())
    assert _problems(events) == [ProblemKind.HEADER_MISSING]
    (problem,) = [e for e in events if isinstance(e, ReadProblem)]
    assert (problem.offset, problem.message) == (
        8,
        "the file does not begin with an MCAP Header record",
    )


def test_a_second_data_end_is_ignored(tmp_path: Path) -> None:
    def build(writer: RecordWriter) -> None:
        writer.write_data_end()

    events = _scan(tmp_path, _minimal(build=build, data_crc=12345))
    # The first DataEnd holds the right CRC; the second is not read as one. The summary
    # starts where the first ends, so the helper's footer CRC (from the footer) fails.
    assert _problems(events) == [ProblemKind.SUMMARY_CRC_MISMATCH]
    assert _end(events).data_section_crc is CrcStatus.VALID


def test_a_footer_without_data_end_cannot_check_the_summary(tmp_path: Path) -> None:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    events = _scan(tmp_path, writer.finish())
    assert _problems(events) == [ProblemKind.DATA_END_MISSING]
    assert _end(events).summary_crc is CrcStatus.ABSENT
    assert _end(events).data_section_crc is CrcStatus.ABSENT


def test_a_footer_that_points_elsewhere_is_a_problem(tmp_path: Path) -> None:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_data_end()
    summary = len(writer)
    writer.write_schema(1, "s", "e", b"")
    # The CRC is right for what the footer says, but the summary starts where DataEnd ends.
    data = writer.finish(summary_start=summary + 1)
    assert _problems(_scan(tmp_path, data)) == [
        ProblemKind.SUMMARY_START_INVALID,
        ProblemKind.SUMMARY_CRC_MISMATCH,
    ]
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_data_end()
    summary = len(writer)
    writer.write_schema(1, "s", "e", b"")
    events = _scan(tmp_path, writer.finish(summary_start=summary))
    assert _problems(events) == []
    assert _end(events).has_summary


def test_the_end_of_a_file_tells_a_cut_from_an_alteration(tmp_path: Path) -> None:
    whole = _minimal(build=lambda w: w.write_message(1, 0, 0, 0, b"x" * 40))
    message_at = 8 + 9 + 8 + 7
    # Cut anywhere inside the message: truncated, no problem.
    for cut in (message_at + 3, message_at + 9, message_at + 30):
        events = _scan(tmp_path, whole[:cut])
        assert _problems(events) == []
        assert _end(events).truncated
    # Cut inside the closing magic: truncated, no problem, the footer was read.
    events = _scan(tmp_path, whole[:-3])
    assert _problems(events) == []
    assert _end(events).truncated
    assert _end(events).footer
    # A length altered in a finished file: it ends with the closing magic.
    altered = bytearray(whole)
    altered[message_at + 1 : message_at + 9] = u64(10**6)
    events = _scan(tmp_path, bytes(altered))
    assert _problems(events) == [ProblemKind.ALTERED_LENGTH]
    assert not _end(events).truncated
    # A file of fewer than two magics that ends with one cannot have been altered so.
    assert _problems(_scan(tmp_path, MAGIC + b"\x05\x00\x00")) == []
    # The footer removed, its closing magic kept: the file ends inside a "record".
    no_footer = whole[: -8 - 29] + MAGIC
    assert _problems(_scan(tmp_path, no_footer)) == [ProblemKind.ALTERED_LENGTH]
    # Damaged closing magic, and bytes after a whole file.
    damaged = whole[:-1] + b"X"
    events = _scan(tmp_path, damaged)
    assert _problems(events) == [ProblemKind.CLOSING_MAGIC_DAMAGED]
    assert not _end(events).truncated
    events = _scan(tmp_path, whole + b"more")
    assert _problems(events) == [ProblemKind.TRAILING_BYTES]
    trailing = next(e for e in events if isinstance(e, ReadProblem))
    assert trailing.offset == len(whole)
    assert trailing.message == f"4 bytes follow the end of the MCAP file at byte {len(whole)}"


def test_an_altered_file_has_its_definitions_recovered_from_the_summary(tmp_path: Path) -> None:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_schema(1, "s", "e", b"{}")
    writer.write_channel(1, 1, "/t", "json")
    writer.write_data_end()
    summary = len(writer)
    writer.write_schema(1, "s", "e", b"{}")
    writer.record(0x08, b"\0" * 10)  # an index record: read past
    writer.write_channel(1, 1, "/t", "json")
    data = bytearray(writer.finish(summary_start=summary))
    data[8 + 1 : 8 + 9] = u64(len(data))  # the Header's length, now past the end
    events = _scan(tmp_path, bytes(data))
    assert _problems(events) == [ProblemKind.ALTERED_LENGTH]
    recovered = [event for event in events if isinstance(event, Found)]
    assert [type(found.record).__name__ for found in recovered] == ["SchemaRecord", "ChannelRecord"]
    assert all(found.offset >= summary for found in recovered)


@pytest.mark.parametrize(
    "tail",
    [
        b"\x02" + u64(19) + b"\0" * 20,  # not a footer's length
        b"\x02" + u64(20) + u64(5) + u64(0) + u32(0),  # summary start inside the magic
        b"\x02" + u64(20) + u64(10**6) + u64(0) + u32(0),  # summary start past the footer
    ],
)
def test_no_recovery_without_a_plausible_footer(tmp_path: Path, tail: bytes) -> None:
    data = MAGIC + b"\x01" + u64(1000) + b"\0" * 50 + tail + MAGIC
    events = _scan(tmp_path, data)
    assert _problems(events) == [ProblemKind.ALTERED_LENGTH]
    assert not [event for event in events if isinstance(event, Found)]


def test_recovery_stops_at_a_summary_record_that_does_not_parse(tmp_path: Path) -> None:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_data_end()
    summary = len(writer)
    writer.write_schema(1, "s", "e", b"{}")
    writer.record(0x04, b"\x01")  # a broken channel
    writer.write_schema(2, "s2", "e", b"{}")
    data = bytearray(writer.finish(summary_start=summary))
    data[8 + 1 : 8 + 9] = u64(len(data))
    events = _scan(tmp_path, bytes(data))
    assert len([event for event in events if isinstance(event, Found)]) == 1


def test_recovery_stops_at_a_summary_record_that_runs_into_the_footer(tmp_path: Path) -> None:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_data_end()
    summary = len(writer)
    writer.write_schema(1, "s", "e", b"{}")
    channel = len(writer)
    writer.write_channel(1, 1, "/t", "json")
    data = bytearray(writer.finish(summary_start=summary))
    data[8 + 1 : 8 + 9] = u64(len(data))  # altered: the header runs past the end
    # The channel's length, lengthened into the footer: the bytes after its fields would
    # read as padding, but the record does not end before the footer, so it is not one.
    stored = int.from_bytes(data[channel + 1 : channel + 9], "little")
    data[channel + 1 : channel + 9] = u64(stored + 10)
    events = _scan(tmp_path, bytes(data))
    assert _problems(events) == [ProblemKind.ALTERED_LENGTH]
    recovered = [event.record for event in events if isinstance(event, Found)]
    assert [type(record).__name__ for record in recovered] == ["SchemaRecord"]


def test_recovery_does_not_follow_a_summary_start_inside_the_leading_magic(
    tmp_path: Path,
) -> None:
    # Read from byte 7 (the magic's last byte), the file would seem to hold a record
    # ending exactly where a schema starts: a footer pointing there is not followed.
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")  # a 9-byte body: bytes 8..16 read as a length of 2305
    schema_at = 7 + 9 + (0x01 | 9 << 8)
    writer.record(0x80, b"\0" * (schema_at - len(writer) - 9))
    assert len(writer) == schema_at
    writer.write_schema(1, "s", "e", b"{}")
    message = len(writer)
    writer.write_message(1, 0, 0, 0, b"m")
    writer.write_data_end()
    data = bytearray(writer.finish(summary_start=7))
    data[message + 1 : message + 9] = u64(len(data))  # altered: runs past the end
    events = _scan(tmp_path, bytes(data))
    assert _problems(events) == [ProblemKind.ALTERED_LENGTH]
    found = [event.offset for event in events if isinstance(event, Found)]
    assert found == [8, schema_at]  # the header and the schema, each once, where they are


def test_check_mcap_collects_problems_zeros_and_the_end(tmp_path: Path) -> None:
    path = tmp_path / "file.mcap"
    path.write_bytes(_minimal(build=lambda w: w.write_attachment("a", "t", b"", crc=0)))
    problems, zeros, end = check_mcap(path)
    assert problems == []
    assert len(zeros) == 1
    assert not end.truncated
    path.write_bytes(_minimal(build=lambda w: w.write_attachment("a", "t", b"", crc=1)))
    problems, zeros, end = check_mcap(path)
    assert [problem.kind for problem in problems] == [ProblemKind.ATTACHMENT_CRC_MISMATCH]
    assert zeros == []
    path.write_bytes(b"nope")
    with pytest.raises(LogFormatError):
        check_mcap(path)


def test_unknown_and_index_records_are_read_past_without_limit(tmp_path: Path) -> None:
    limits = ReadLimits(max_record_bytes=16)

    def build(writer: RecordWriter) -> None:
        writer.record(0x80, b"\0" * 1000)  # unknown
        writer.record(0x07, b"\0" * 1000)  # a message index: counted, not held

    events = _scan(tmp_path, _minimal(build=build), limits)
    assert _problems(events) == []
    assert _end(events).message_index_count == 1


def test_two_magics_and_nothing_else_were_altered_not_cut(tmp_path: Path) -> None:
    assert _problems(_scan(tmp_path, MAGIC + MAGIC)) == [ProblemKind.ALTERED_LENGTH]
    assert _problems(_scan(tmp_path, MAGIC + MAGIC[:7])) == []  # fifteen bytes: a cut


def _altered_with_summary_at(summary_at: int | None, limits: ReadLimits) -> list[object]:
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_schema(1, "s", "e", b"{}")
    writer.write_channel(1, 1, "/t", "json")
    message = len(writer)
    writer.write_message(1, 0, 0, 0, b"m")
    writer.write_data_end()
    summary = len(writer)
    writer.write_schema(1, "s", "e", b"{}")
    data = bytearray(writer.finish(summary_start=summary if summary_at is None else summary_at))
    data[message + 1 : message + 9] = u64(len(data))  # the message now runs past the end
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        return _scan(Path(directory), bytes(data), limits)


def test_recovery_reads_a_summary_that_starts_right_after_the_magic() -> None:
    events = _altered_with_summary_at(8, DEFAULT_LIMITS)
    assert _problems(events) == [ProblemKind.ALTERED_LENGTH]
    recovered = [event for event in events if isinstance(event, Found) and event.offset > 8]
    # Read again from offset 8: the header is passed over, the definitions are recovered,
    # and the altered message (running past the footer) ends the walk.
    assert [type(found.record).__name__ for found in recovered] == [
        "SchemaRecord",
        "ChannelRecord",
        "SchemaRecord",
        "ChannelRecord",
    ]


def test_recovery_takes_a_definition_exactly_at_the_record_bound() -> None:
    schema_body = 2 + 4 + 1 + 4 + 1 + 4 + 2  # id, name "s", encoding "e", data "{}"

    def schemas(events: list[object]) -> int:
        return sum(
            isinstance(e, Found) and type(e.record).__name__ == "SchemaRecord" for e in events
        )

    # The data section's schema, and the summary's, recovered: both exactly at the bound.
    assert schemas(_altered_with_summary_at(None, ReadLimits(max_record_bytes=schema_body))) == 2
    below = _altered_with_summary_at(None, ReadLimits(max_record_bytes=schema_body - 1))
    assert ProblemKind.RECORD_TOO_LARGE in _problems(below)
    assert schemas(below) == 0


def test_decoded_records_and_reader_values_are_frozen_and_slotted() -> None:
    import dataclasses

    from audit import LoggedAttachment, LoggedChannel, LoggedRecord, ReadEnd, ReadProblem
    from audit._mcap_records import (
        AttachmentRecord,
        ChannelRecord,
        ChunkRecord,
        FooterRecord,
        HeaderRecord,
        MessageRecord,
        SchemaRecord,
    )
    from audit._mcap_scan import ScanEnd

    for cls in (
        HeaderRecord,
        SchemaRecord,
        ChannelRecord,
        MessageRecord,
        ChunkRecord,
        AttachmentRecord,
        FooterRecord,
        Found,
        ZeroCrc,
        ScanEnd,
        ReadProblem,
        ReadLimits,
        ReadEnd,
        LoggedRecord,
        LoggedAttachment,
        LoggedChannel,
    ):
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen, cls
        assert "__slots__" in vars(cls), cls
        assert dataclasses.is_dataclass(cls)
    header = HeaderRecord("p", "l")
    with pytest.raises(dataclasses.FrozenInstanceError):
        header.library = "x"  # type: ignore[misc]


# --- the scanner's edges: window edges, exact bounds, cuts, appended files ---------------


def _data_end_at(offset: int) -> bytes:
    """A whole file whose DataEnd starts at ``offset`` (an unknown record fills the gap)."""
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.record(0x80, b"\0" * (offset - len(writer) - 9))  # read past, never held
    assert len(writer) == offset
    writer.write_data_end()
    return writer.finish()


def test_data_end_and_footer_are_checked_wherever_the_read_window_ends(tmp_path: Path) -> None:
    # The CRCs of DataEnd and the Footer are taken at their first byte, so that byte must
    # still be in the source's window when their body is read: a record that straddles
    # the first 256 KiB block (prefix before the edge, body after it; or the prefix cut
    # by the edge) must be checked like any other, not crash or lose its CRC.
    for data_end in range(BLOCK - 45, BLOCK + 2):  # the Footer starts 13 bytes later
        events = _scan(tmp_path, _data_end_at(data_end))
        assert _problems(events) == [], data_end
        end = _end(events)
        assert end.data_section_crc is CrcStatus.VALID, data_end
        assert end.summary_crc is CrcStatus.VALID, data_end


def test_a_data_end_of_exactly_the_small_record_bound_is_read(tmp_path: Path) -> None:
    # DataEnd's body may carry padding up to 4096 bytes in all (the bound on the records
    # that have fixed fields); the CRC is read from its field, not from its last bytes.
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.record(0x0F, u32(zlib.crc32(writer.buffer)) + b"\0" * (4096 - 4))
    events = _scan(tmp_path, writer.finish())
    assert _problems(events) == []
    assert _end(events).data_section_crc is CrcStatus.VALID


def _chunk_record(records: bytes, record_length: int) -> tuple[bytes, int]:
    """A whole file with one uncompressed chunk padded to ``record_length``; and its offset."""
    body = u64(0) + u64(0) + u64(len(records)) + u32(zlib.crc32(records))
    body += string("") + u64(len(records)) + records
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    chunk_at = len(writer)
    writer.record(0x06, body + b"\0" * (record_length - len(body)))  # padding: allowed
    writer.write_data_end()
    return writer.finish(), chunk_at


def test_a_chunk_record_may_exceed_its_bound_by_the_worst_compression_overhead(
    tmp_path: Path,
) -> None:
    # A compressed chunk can be larger than its records (incompressible data): a chunk
    # record may be as long as the bound on chunks plus zstd's worst-case expansion
    # (1/256) plus 1 KiB, and not one byte longer.
    limits = ReadLimits(max_chunk_bytes=4096)
    allowed = 4096 + 4096 // 256 + 1024
    inner = RecordWriter()
    inner.write_message(1, 0, 0, 0, b"m")
    records = bytes(inner.buffer)
    events = _scan(tmp_path, _chunk_record(records, allowed)[0], limits)
    assert _problems(events) == []
    assert [type(e.record).__name__ for e in events if isinstance(e, Found)][1:] == [
        "MessageRecord"
    ]
    data, chunk_at = _chunk_record(records, allowed + 1)
    events = _scan(tmp_path, data, limits)
    assert _problems(events) == [ProblemKind.CHUNK_TOO_LARGE]
    (problem,) = [e for e in events if isinstance(e, ReadProblem)]
    assert problem.message == (
        f"the chunk record at byte {chunk_at} is {allowed + 1} bytes long, over the"
        f" {allowed}-byte bound; it was skipped"
    )


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_full_chunk_of_incompressible_records_is_read(tmp_path: Path, compression: str) -> None:
    limits = ReadLimits(max_chunk_bytes=64 * 1024)
    inner = RecordWriter()
    inner.write_message(1, 0, 0, 0, random.Random(7).randbytes(64 * 1024 - 31))
    records = bytes(inner.buffer)
    assert len(records) == limits.max_chunk_bytes
    packed = {"zstd": zstandard.ZstdCompressor().compress, "lz4": lz4.frame.compress}[compression](
        records
    )
    assert len(packed) > len(records)  # the compression made it larger
    data = _minimal(
        build=lambda w: w.write_chunk(records, compression=compression, compressed=packed)
    )
    events = _scan(tmp_path, data, limits)
    assert _problems(events) == []
    (message,) = [e.record for e in events if isinstance(e, Found) and e.offset_in_chunk == 0]
    assert isinstance(message, MessageRecord)
    assert message.data == records[9 + 22 :]


def test_a_record_in_a_chunk_at_the_bound_is_read_and_one_byte_more_is_not(
    tmp_path: Path,
) -> None:
    limits = ReadLimits(max_record_bytes=100)
    for size, kinds in ((100, []), (101, [ProblemKind.RECORD_TOO_LARGE])):
        inner = RecordWriter()
        inner.write_message(1, 0, 0, 0, b"x" * (size - 22))
        events = _scan(
            tmp_path, _minimal(build=lambda w, r=inner: w.write_chunk(bytes(r.buffer))), limits
        )
        assert _problems(events) == kinds, size
        assert len([e for e in events if isinstance(e, Found)]) == 1 + (not kinds), size


def test_a_chunk_may_end_with_a_record_that_has_no_body(tmp_path: Path) -> None:
    inner = RecordWriter()
    inner.write_message(1, 0, 0, 0, b"a")
    inner.record(0x80, b"")  # nine bytes: an opcode and a zero length
    events = _scan(tmp_path, _minimal(build=lambda w: w.write_chunk(bytes(inner.buffer))))
    assert _problems(events) == []
    assert [e.offset_in_chunk for e in events if isinstance(e, Found)] == [None, 0]


def test_a_cut_file_has_no_footer_and_no_summary(tmp_path: Path) -> None:
    whole = _minimal(build=lambda w: w.write_message(1, 0, 0, 0, b"x" * 40))
    footer_at = len(whole) - 8 - 29
    data_end_at = footer_at - 13
    # Cut in the data section: nothing after it was read.
    end = _end(_scan(tmp_path, whole[: data_end_at - 5]))
    assert (end.truncated, end.footer, end.data_end, end.has_summary) == (True, False, False, False)
    counts = (end.chunk_count, end.chunk_index_count, end.message_index_count)
    assert (*counts, end.statistics_count) == (0, 0, 0, 0)
    assert (end.data_section_crc, end.summary_crc) == (CrcStatus.ABSENT, CrcStatus.ABSENT)
    # Cut after DataEnd, inside the Footer: the data section was checked, the summary not.
    end = _end(_scan(tmp_path, whole[: footer_at + 10]))
    assert (end.truncated, end.footer, end.data_end, end.has_summary) == (True, False, True, False)
    assert (end.data_section_crc, end.summary_crc) == (CrcStatus.VALID, CrcStatus.ABSENT)


def test_a_record_cut_while_the_file_is_read_is_not_yielded(tmp_path: Path) -> None:
    # The file shrinks under the reader (rotated, or cut by another process) in the middle
    # of a record larger than the read window: the part of it that was read is not a record.
    data = _minimal(build=lambda w: w.write_message(1, 0, 0, 0, b"m" * (3 * BLOCK)))
    path = tmp_path / "shrinking.mcap"
    path.write_bytes(data)
    with open_source(path) as source:
        source.read_magic()
        events = McapScanner(source, DEFAULT_LIMITS).events()
        header = next(events)
        assert isinstance(header, Found)
        os.truncate(path, 2 * BLOCK)
        rest = list(events)
    assert [event for event in rest if not isinstance(event, ScanEnd)] == []
    end = _end(rest)
    assert end.truncated
    assert end.size_bytes == 2 * BLOCK
    assert end.source_sha256 == hashlib.sha256(data[: 2 * BLOCK]).hexdigest()


def _defined_and_altered(length: int) -> tuple[bytes, int]:
    """A whole file with a summary; its message's length field set to ``length``."""
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_schema(1, "s", "e", b"{}")
    writer.write_channel(1, 1, "/t", "json")
    message = len(writer)
    writer.write_message(1, 0, 0, 0, b"m")
    writer.write_data_end()
    summary = len(writer)
    writer.write_schema(1, "s", "e", b"{}")
    writer.write_channel(1, 1, "/t", "json")
    data = bytearray(writer.finish(summary_start=summary))
    data[message + 1 : message + 9] = u64(length)
    return bytes(data), summary


def test_a_length_altered_past_the_bound_and_the_end_is_both_problems(tmp_path: Path) -> None:
    # A length set to a terabyte: over the record bound, and past the end of a file that
    # ends with the closing magic. Both are said, and the summary's definitions recovered.
    data, summary = _defined_and_altered(1 << 40)
    events = _scan(tmp_path, data)
    assert _problems(events) == [ProblemKind.RECORD_TOO_LARGE, ProblemKind.ALTERED_LENGTH]
    recovered = [e for e in events if isinstance(e, Found) and e.offset >= summary]
    assert [type(found.record).__name__ for found in recovered] == ["SchemaRecord", "ChannelRecord"]
    assert not _end(events).truncated


def test_a_cut_right_after_a_record_is_a_cut_whatever_the_record_ends_with(
    tmp_path: Path,
) -> None:
    # A file cut exactly at the end of a record whose last bytes happen to be the closing
    # magic (a message may hold any bytes) was cut, not altered.
    writer = RecordWriter()
    writer.raw(MAGIC)
    writer.write_header("", "x")
    writer.write_message(1, 0, 0, 0, b"data" + MAGIC)
    events = _scan(tmp_path, bytes(writer.buffer))
    assert _problems(events) == []
    assert _end(events).truncated
    assert len([e for e in events if isinstance(e, Found)]) == 2
    # The same over the record bound: skipped as too large, and still a cut.
    events = _scan(tmp_path, bytes(writer.buffer), ReadLimits(max_record_bytes=16))
    assert _problems(events) == [ProblemKind.RECORD_TOO_LARGE]
    assert _end(events).truncated


def test_a_cut_and_damaged_closing_magic_is_damage(tmp_path: Path) -> None:
    whole = _minimal()
    cut = whole[:-3]  # five bytes of the closing magic: a cut
    assert not _problems(_scan(tmp_path, cut))
    damaged = cut[:-1] + b"X"  # five bytes that do not begin the magic
    events = _scan(tmp_path, damaged)
    assert _problems(events) == [ProblemKind.CLOSING_MAGIC_DAMAGED]
    assert not _end(events).truncated


def test_a_file_appended_after_the_closing_magic_is_not_read(tmp_path: Path) -> None:
    # Bytes after the end -- here a whole second MCAP file, forged records and all -- are
    # one problem; none of them is read as a record.
    first = _minimal()
    second = _minimal(build=lambda w: w.write_message(1, 0, 0, 0, b"forged"))
    events = _scan(tmp_path, first + second)
    assert _problems(events) == [ProblemKind.TRAILING_BYTES]
    assert len([e for e in events if isinstance(e, Found)]) == 1  # the first file's header
    assert not _end(events).truncated
