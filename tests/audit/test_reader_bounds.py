"""Reading cannot be made to explode: bombs, oversize records and long runs cost bounded memory.

Memory is measured with tracemalloc (Python's allocations, which hold every
byte the reader keeps: bytes objects, decompressed chunks included), as the
peak over one read. No test measures time.
"""

from __future__ import annotations

import base64
import hashlib
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import lz4.frame
import pytest

from audit import (
    CrcStatus,
    LoggedRecord,
    McapAuditSink,
    ProblemKind,
    ReadEnd,
    ReadLimits,
    ReadProblem,
    iter_run,
    read_run,
)
from runtime import canonical_bytes
from tests.audit.mcap_tools import RecordWriter, ghost_prelude, zstd_rle_frame
from tests.records import append_decisions, make_run_start, write_run

GIB = 1 << 30
MIB = 1 << 20
T = TypeVar("T")


def _peak(call: Callable[[], T]) -> tuple[T, int]:
    """Run ``call``; return its result and the peak bytes Python allocated meanwhile."""
    tracemalloc.start()
    try:
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def _message(seq: int) -> bytes:
    return canonical_bytes({"schema": "ghost.decision/1", "seq": seq, "stamp_ns": seq})


def _ghost_file(path: Path, build: Callable[[RecordWriter], None]) -> Path:
    """A ghost-looking file: the prelude, what ``build`` adds, DataEnd, Footer."""
    writer = RecordWriter()
    ghost_prelude(writer)
    build(writer)
    writer.write_data_end()
    path.write_bytes(writer.finish())
    return path


def _chunk_of(records: RecordWriter, **fields: object) -> Callable[[RecordWriter], None]:
    def build(writer: RecordWriter) -> None:
        writer.write_message(3, 0, 0, 0, _message(0))  # a record before the chunk
        writer.write_chunk(bytes(records.buffer), **fields)  # type: ignore[arg-type]
        writer.write_message(3, 2, 2, 2, _message(2))  # and one after it

    return build


def _kinds(problems: tuple[ReadProblem, ...]) -> list[ProblemKind]:
    return [problem.kind for problem in problems]


def test_the_bomb_is_small_and_inflates_to_a_gibibyte() -> None:
    import zstandard

    bomb = zstd_rle_frame(GIB)
    assert len(bomb) < 33 * 1024
    # The same builder at 1 MiB: a real zstd decoder agrees on what it inflates to.
    assert zstandard.ZstdDecompressor().decompress(zstd_rle_frame(MIB, byte=7)) == b"\7" * MIB


def test_a_chunk_claiming_a_gibibyte_is_skipped_unread(tmp_path: Path) -> None:
    inner = RecordWriter()
    inner.write_message(3, 1, 1, 1, _message(1))
    path = _ghost_file(
        tmp_path / "bomb.mcap",
        _chunk_of(inner, compression="zstd", compressed=zstd_rle_frame(GIB), uncompressed_size=GIB),
    )
    assert path.stat().st_size < 64 * 1024
    log, peak = _peak(lambda: read_run(path))
    assert peak < 2 * MIB
    assert _kinds(log.read_problems) == [ProblemKind.CHUNK_TOO_LARGE]
    problem = log.read_problems[0]
    assert f"claims {GIB} bytes uncompressed" in problem.message
    assert problem.offset == log.records[0].offset + 9 + 22 + len(log.records[0].data)
    # The records around the bomb are read; the file is whole and its other CRCs hold.
    assert [record.sequence for record in log.records] == [0, 2]
    assert log.end.data_section_crc is CrcStatus.VALID
    assert not log.truncated


def test_a_chunk_that_inflates_beyond_its_claim_is_stopped_one_byte_past_it(
    tmp_path: Path,
) -> None:
    claim = 4096
    inner = RecordWriter()
    inner.write_message(3, 1, 1, 1, _message(1))
    path = _ghost_file(
        tmp_path / "bomb.mcap",
        _chunk_of(
            inner, compression="zstd", compressed=zstd_rle_frame(GIB), uncompressed_size=claim
        ),
    )
    log, peak = _peak(lambda: read_run(path))
    assert peak < 2 * MIB
    assert _kinds(log.read_problems) == [ProblemKind.CHUNK_OVERFLOW]
    assert f"inflates beyond the {claim} bytes it states" in log.problems[0]
    assert [record.sequence for record in log.records] == [0, 2]


def test_a_chunk_claiming_the_bound_cannot_inflate_past_it(tmp_path: Path) -> None:
    limits = ReadLimits(max_chunk_bytes=MIB)
    path = _ghost_file(
        tmp_path / "bomb.mcap",
        _chunk_of(
            RecordWriter(),
            compression="zstd",
            compressed=zstd_rle_frame(GIB),
            uncompressed_size=MIB,
        ),
    )
    log, peak = _peak(lambda: read_run(path, limits=limits))
    assert _kinds(log.read_problems) == [ProblemKind.CHUNK_OVERFLOW]
    # At most the claim plus one byte was ever inflated (in 256 KiB steps, then joined).
    assert MIB < peak < 3 * MIB


def test_an_lz4_bomb_is_stopped_too(tmp_path: Path) -> None:
    bomb = lz4.frame.compress(bytes(64 * MIB), compression_level=0)
    assert len(bomb) < MIB
    path = _ghost_file(
        tmp_path / "bomb.mcap",
        _chunk_of(RecordWriter(), compression="lz4", compressed=bomb, uncompressed_size=4096),
    )
    log, peak = _peak(lambda: read_run(path))
    assert _kinds(log.read_problems) == [ProblemKind.CHUNK_OVERFLOW]
    assert peak < 4 * MIB  # the compressed chunk itself, and at most 4097 bytes out


def test_a_zstd_frame_asking_for_a_huge_window_is_refused_before_it_allocates(
    tmp_path: Path,
) -> None:
    # A 128 MiB window (zstd's own default limit allows it) for a claimed 4 KiB of output.
    frame = zstd_rle_frame(GIB, window_log=27)
    path = _ghost_file(
        tmp_path / "window.mcap",
        _chunk_of(RecordWriter(), compression="zstd", compressed=frame, uncompressed_size=4096),
    )
    log = read_run(path)
    assert _kinds(log.read_problems) == [ProblemKind.CHUNK_CORRUPT]
    assert "zstd" in log.problems[0]


@pytest.mark.parametrize(
    ("compression", "packed", "kind", "words"),
    [
        ("zstd", b"not zstd at all", ProblemKind.CHUNK_CORRUPT, "zstd"),
        ("lz4", b"not lz4 at all", ProblemKind.CHUNK_CORRUPT, "lz4"),
        ("lz4", lz4.frame.compress(b"x" * 1000)[:-9], ProblemKind.CHUNK_CORRUPT, "cut short"),
        ("lz4", lz4.frame.compress(b"x" * 1000) + b"junk", ProblemKind.CHUNK_CORRUPT, "lz4"),
        ("brotli", b"...", ProblemKind.CHUNK_COMPRESSION_UNSUPPORTED, "'brotli'"),
        ("", b"short", ProblemKind.CHUNK_CORRUPT, "holds 5 bytes, not the 1000"),
        ("zstd", zstd_rle_frame(1 << 17), ProblemKind.CHUNK_OVERFLOW, "beyond the 1000"),
    ],
)
def test_a_chunk_that_does_not_inflate_to_its_size_is_a_problem(
    tmp_path: Path, compression: str, packed: bytes, kind: ProblemKind, words: str
) -> None:
    path = _ghost_file(
        tmp_path / "chunk.mcap",
        _chunk_of(
            RecordWriter(), compression=compression, compressed=packed, uncompressed_size=1000
        ),
    )
    log = read_run(path)
    assert _kinds(log.read_problems) == [kind]
    assert words in log.problems[0]
    assert log.problems[0].endswith("it was skipped")


def test_a_chunk_that_inflates_short_of_its_claim_is_corrupt(tmp_path: Path) -> None:
    inner = RecordWriter()
    inner.write_message(3, 1, 1, 1, _message(1))
    data = bytes(inner.buffer)
    for compression, packed in [
        ("zstd", __import__("zstandard").ZstdCompressor().compress(data)),
        ("lz4", lz4.frame.compress(data)),
    ]:
        path = _ghost_file(
            tmp_path / f"{compression}.mcap",
            _chunk_of(
                inner, compression=compression, compressed=packed, uncompressed_size=len(data) + 1
            ),
        )
        log = read_run(path)
        assert _kinds(log.read_problems) == [ProblemKind.CHUNK_CORRUPT], compression
        assert f"inflates to {len(data)} bytes, not the {len(data) + 1}" in log.problems[0]


@pytest.mark.parametrize("compression", ["", "zstd", "lz4"])
def test_chunks_in_every_compression_are_read(tmp_path: Path, compression: str) -> None:
    import zstandard

    inner = RecordWriter()
    inner.write_message(3, 1, 1, 1, _message(1))
    data = bytes(inner.buffer)
    packed = {
        "": data,
        "zstd": zstandard.ZstdCompressor().compress(data),
        "lz4": lz4.frame.compress(data),
    }[compression]
    path = _ghost_file(
        tmp_path / "chunk.mcap", _chunk_of(inner, compression=compression, compressed=packed)
    )
    log = read_run(path)
    assert log.problems == ()
    assert [(r.sequence, r.offset_in_chunk) for r in log.records] == [(0, None), (1, 0), (2, None)]
    assert log.end.chunk_count == 1


def test_a_message_over_the_record_bound_is_skipped_without_holding_it(tmp_path: Path) -> None:
    huge = b"{" + b" " * (17 * MIB) + b"}"

    def build(writer: RecordWriter) -> None:
        writer.write_message(3, 0, 0, 0, _message(0))
        writer.write_message(3, 1, 1, 1, huge)
        writer.write_message(3, 2, 2, 2, _message(2))

    path = _ghost_file(tmp_path / "huge.mcap", build)
    log, peak = _peak(lambda: read_run(path))
    assert peak < 2 * MIB  # 17 MiB were read past in 256 KiB blocks
    assert _kinds(log.read_problems) == [ProblemKind.RECORD_TOO_LARGE]
    assert f"over the {16 * MIB}-byte bound; it was skipped" in log.problems[0]
    assert [record.sequence for record in log.records] == [0, 2]
    assert log.end.data_section_crc is CrcStatus.VALID  # the skipped bytes were still checked
    assert log.source_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_records_over_the_bound_inside_a_chunk_are_skipped(tmp_path: Path) -> None:
    limits = ReadLimits(max_record_bytes=4000)  # above every ghost schema's size
    inner = RecordWriter()
    inner.write_message(3, 1, 1, 1, b"x" * 5000)
    inner.write_message(3, 3, 3, 3, _message(3))
    path = _ghost_file(tmp_path / "chunk.mcap", _chunk_of(inner))
    log = read_run(path, limits=limits)
    assert _kinds(log.read_problems) == [ProblemKind.RECORD_TOO_LARGE]
    assert "at offset 0 in the chunk at byte" in log.problems[0]
    assert [record.sequence for record in log.records] == [0, 3, 2]


def test_a_chunk_record_over_the_chunk_bound_is_read_past(tmp_path: Path) -> None:
    limits = ReadLimits(max_chunk_bytes=4096)
    inner = RecordWriter()
    inner.write_message(3, 1, 1, 1, b"x" * 8000)
    path = _ghost_file(tmp_path / "chunk.mcap", _chunk_of(inner))
    log = read_run(path, limits=limits)
    assert _kinds(log.read_problems) == [ProblemKind.CHUNK_TOO_LARGE]
    assert "the chunk record at byte" in log.problems[0]
    assert [record.sequence for record in log.records] == [0, 2]


def test_messages_waiting_for_a_channel_are_held_within_the_bound(tmp_path: Path) -> None:
    limits = ReadLimits(max_held_bytes=64 * 1024)

    def build(writer: RecordWriter) -> None:
        for seq in range(2000):  # about 110 KiB: about half fits
            writer.write_message(9, seq, seq, seq, _message(seq))
        writer.write_channel(9, 3, "/decisions", "json")

    log = read_run(_ghost_file(tmp_path / "late.mcap", build), limits=limits)
    kinds = _kinds(log.read_problems)
    assert kinds == [ProblemKind.MEMORY_LIMIT]
    assert "messages on channels not yet defined" in log.problems[0]
    kept = [record.sequence for record in log.records]
    assert 500 < len(kept) < 1500
    assert kept == list(range(len(kept)))  # the first ones are kept, in order


def test_definitions_are_held_within_the_bound(tmp_path: Path) -> None:
    limits = ReadLimits(max_held_bytes=64 * 1024)

    def build(writer: RecordWriter) -> None:
        for number in range(100, 400):
            writer.write_schema(number, f"other/{number}", "jsonschema", b"{}" * 200)

    log = read_run(_ghost_file(tmp_path / "defs.mcap", build), limits=limits)
    assert _kinds(log.read_problems) == [ProblemKind.MEMORY_LIMIT]
    assert log.problems[0].startswith("definitions from byte")


def test_read_run_keeps_a_prefix_within_its_bound_and_iter_run_streams_it_all(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=20)
    every = [item for item in iter_run(path) if isinstance(item, LoggedRecord)]
    limits = ReadLimits(max_retained_bytes=10_000)
    log = read_run(path, limits=limits)
    assert 0 < len(log.records) < len(every)
    assert log.records == tuple(every[: len(log.records)])
    assert sum(len(r.data) for r in log.records) + sum(len(a.data) for a in log.attachments) <= (
        10_000
    )
    (problem,) = log.read_problems
    assert problem.kind is ProblemKind.MEMORY_LIMIT
    assert problem.offset == every[len(log.records)].offset
    assert "10000-byte bound on what read_run holds" in problem.message
    assert not log.truncated


def test_reading_stops_after_too_many_problems_and_still_hashes_the_file(tmp_path: Path) -> None:
    limits = ReadLimits(max_problems=5)

    def build(writer: RecordWriter) -> None:
        for _ in range(20):
            writer.record(0x03, b"\x01")  # a schema too short to hold its fields
        writer.write_message(3, 0, 0, 0, _message(0))

    path = _ghost_file(tmp_path / "bad.mcap", build)
    log = read_run(path, limits=limits)
    assert _kinds(log.read_problems) == [ProblemKind.RECORD_UNPARSABLE] * 5 + [
        ProblemKind.TOO_MANY_PROBLEMS
    ]
    assert log.problems[-1] == "too many problems: reading stopped there"
    assert log.records == ()  # the message after the fifth problem was not read
    assert log.end.stopped
    assert not log.truncated
    assert log.end.size_bytes == path.stat().st_size
    assert log.source_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_appended_to_while_read_is_read_as_it_was_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "live.mcap"
    sink = McapAuditSink(path)
    sink.open_run(make_run_start())
    append_decisions(sink, 2)
    before = path.read_bytes()
    written_before = sink.record_count
    items = iter_run(path)
    first = next(items)  # the file is open and its size fixed
    append_decisions(sink, 3)
    assert sink.record_count > written_before
    rest = list(items)
    sink.close()
    end = rest[-1]
    assert isinstance(end, ReadEnd)
    assert end.size_bytes == len(before)
    assert end.source_sha256 == hashlib.sha256(before).hexdigest()
    assert end.truncated
    records = [item for item in [first, *rest] if isinstance(item, LoggedRecord)]
    # Exactly the records written before it was opened: as a copy of those bytes reads.
    assert len(records) == written_before
    snapshot = tmp_path / "snapshot.mcap"
    snapshot.write_bytes(before)
    assert tuple(records) == read_run(snapshot).records
    assert not [item for item in rest if isinstance(item, ReadProblem)]


def _synthetic_run(path: Path, messages: int, *, chunked: bool) -> Path:
    """A ghost-shaped run of 1 KiB records, written by the mcap library.

    Each record's noise is random base64, which no compressor shrinks below 3/4 of its
    size: a chunked file's size does not depend on the zstd version.
    """
    from mcap.writer import CompressionType, Writer

    from audit._schemas import TOPICS, schema_data

    with path.open("wb") as stream:
        writer = Writer(
            stream,
            chunk_size=64 * 1024,
            compression=CompressionType.ZSTD if chunked else CompressionType.NONE,
            use_chunking=chunked,
            enable_data_crcs=True,
        )
        writer.start(profile="", library="ghost-sdk; tests")
        channels = {}
        for topic, name in TOPICS.items():
            schema = writer.register_schema(name, "jsonschema", schema_data(name))
            channels[topic] = writer.register_channel(topic, "json", schema)
        rng = random.Random(messages)
        for seq in range(messages):
            noise = base64.b64encode(rng.randbytes(768)).decode()
            record = {"schema": "ghost.decision/1", "seq": seq, "noise": noise}
            writer.add_message(
                channels["/decisions"], log_time=seq, data=canonical_bytes(record), publish_time=seq
            )
        writer.finish()
    return path


def _stream(path: Path) -> int:
    count = 0
    for item in iter_run(path):
        count += isinstance(item, LoggedRecord)
    return count


@pytest.mark.parametrize("chunked", [False, True])
def test_streaming_memory_does_not_grow_with_the_run(tmp_path: Path, chunked: bool) -> None:
    # The files' fixed part (header, six schemas twice, summary) is about 11-16 KB: enough
    # records that four times as many make nearly four times the file.
    small = _synthetic_run(tmp_path / "small.mcap", 1000, chunked=chunked)
    large = _synthetic_run(tmp_path / "large.mcap", 4000, chunked=chunked)
    assert small.stat().st_size > 300 * 1024  # both larger than the 256 KiB read window
    assert large.stat().st_size > 3.9 * small.stat().st_size
    small_count, small_peak = _peak(lambda: _stream(small))
    large_count, large_peak = _peak(lambda: _stream(large))
    assert (small_count, large_count) == (1000, 4000)
    # Four times the records, the same memory: the window, one chunk, one record.
    assert large_peak < 1.1 * small_peak + 16 * 1024
    assert large_peak < 2 * MIB
    # What read_run keeps does grow: the contrast shows what the measure sees.
    _, kept_peak = _peak(lambda: read_run(small))
    assert kept_peak > 1.5 * small_peak + 600 * 1024


@pytest.mark.parametrize("durability", ["process", "chunk"])
def test_streaming_a_real_run_holds_little(tmp_path: Path, durability: str) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path, durability=durability, chunk_size=256 * 1024) as sink:  # type: ignore[arg-type]
        sink.open_run(make_run_start())
        append_decisions(sink, 300)
    count, peak = _peak(lambda: _stream(path))
    assert count == sink.record_count  # every record written, checkpoints and seal included
    assert peak < 2 * MIB


def test_limits_must_be_positive_ints() -> None:
    for bad in (0, -1, 1.5, True, "9"):
        with pytest.raises(ValueError, match=r"ReadLimits\.max_problems must be a positive int"):
            ReadLimits(max_problems=bad)  # type: ignore[arg-type]
    assert ReadLimits(max_problems=1).max_problems == 1


def test_a_summary_crc_is_checked_over_the_summary_and_footer(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    raw = bytearray(path.read_bytes())
    footer = len(raw) - 8 - 29
    # Flip a bit in the footer's summary-offset field: covered by the CRC, read by nobody else.
    raw[footer + 9 + 8] ^= 0x01
    path.write_bytes(bytes(raw))
    log = read_run(path)
    assert _kinds(log.read_problems) == [ProblemKind.SUMMARY_CRC_MISMATCH]
    assert log.end.summary_crc is CrcStatus.MISMATCH
    assert log.read_problems[0].offset == footer


def test_read_run_keeps_what_fits_the_bound_exactly(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=2)
    full = read_run(path)
    # The attachment comes first, then /run, then the first assessment.
    exact = len(full.attachments[0].data) + len(full.records[0].data) + len(full.records[1].data)
    log = read_run(path, limits=ReadLimits(max_retained_bytes=exact))
    assert (len(log.attachments), len(log.records)) == (1, 2)
    log = read_run(path, limits=ReadLimits(max_retained_bytes=exact - 1))
    assert (len(log.attachments), len(log.records)) == (1, 1)


def test_messages_released_to_their_channel_free_the_bound(tmp_path: Path) -> None:
    limits = ReadLimits(max_held_bytes=64 * 1024)

    def build(writer: RecordWriter) -> None:
        # Two batches of about 40 KiB each wait for a channel: together they would not fit.
        for channel_id in (9, 10):
            for seq in range(700):
                writer.write_message(channel_id, seq, seq, seq, _message(seq))
            writer.write_channel(channel_id, 3, "/decisions", "json")

    log = read_run(_ghost_file(tmp_path / "late.mcap", build), limits=limits)
    assert log.problems == ()
    assert len(log.records) == 1400


@pytest.mark.parametrize(
    "where",
    [
        "schema names",
        "schema encodings",
        "channel topics",
        "channel encodings",
        "channel metadata keys",
        "channel metadata values",
    ],
)
def test_definitions_count_every_field_against_the_bound(tmp_path: Path, where: str) -> None:
    limits = ReadLimits(max_held_bytes=64 * 1024)
    long = "x" * 2000

    def build(writer: RecordWriter) -> None:
        for number in range(100, 140):  # 40 definitions of 2000 bytes and more: over 64 KiB
            if where == "schema names":
                writer.write_schema(number, long, "jsonschema", b"")
            elif where == "schema encodings":
                writer.write_schema(number, f"s{number}", long, b"")
            elif where == "channel topics":
                writer.write_channel(number, 0, long, "json")
            elif where == "channel encodings":
                writer.write_channel(number, 0, f"/t{number}", long)
            elif where == "channel metadata keys":
                writer.write_channel(number, 0, f"/t{number}", "json", {long: "v"})
            else:
                writer.write_channel(number, 0, f"/t{number}", "json", {"k": long})

    log = read_run(_ghost_file(tmp_path / "defs.mcap", build), limits=limits)
    assert _kinds(log.read_problems)[:1] == [ProblemKind.MEMORY_LIMIT]


def test_the_zstd_window_allowed_is_the_smallest_power_of_two_holding_a_chunk() -> None:
    from audit._inflate import InflateError, Inflater

    bound = (1 << 20) + 1  # needs a 2 MiB window; 1 MiB is too small
    frame = zstd_rle_frame(1 << 23, window_log=21)  # declares a 2 MiB window, inflates to 8 MiB
    with pytest.raises(InflateError) as raised:
        Inflater(bound).inflate("zstd", memoryview(frame), bound)
    assert raised.value.kind is ProblemKind.CHUNK_OVERFLOW  # decoded, and stopped past the claim
    assert str(raised.value) == raised.value.why
    with pytest.raises(InflateError) as raised:
        Inflater(1 << 20).inflate("zstd", memoryview(frame), 1 << 20)
    assert raised.value.kind is ProblemKind.CHUNK_CORRUPT  # a window over the bound is refused


# --- the inflater on its own: the bound is one byte past the claim, frames follow frames ----


def test_inflation_stops_exactly_one_byte_past_the_claim() -> None:
    from audit._inflate import Inflater, _lz4_inflate

    lz4_bomb = lz4.frame.compress(bytes(64 * MIB), compression_level=0)
    zstd_bomb = memoryview(zstd_rle_frame(GIB))

    assert len(Inflater(MIB)._zstd_inflate(zstd_bomb, 4096)) == 4097
    # Past 256 KiB the output is asked for in parts: the last part asks only for what is left.
    assert len(Inflater(MIB)._zstd_inflate(zstd_bomb, 300_000)) == 300_001
    assert len(_lz4_inflate(memoryview(lz4_bomb), 4096)) == 4097


def test_the_bound_counts_the_frames_before_the_one_that_overflows() -> None:
    from audit._inflate import Inflater, _lz4_inflate

    zstd_frames = zstd_rle_frame(1 << 17, byte=1) + zstd_rle_frame(GIB)
    lz4_frames = lz4.frame.compress(b"a" * 1000) + lz4.frame.compress(bytes(64 * MIB))

    assert len(Inflater(MIB)._zstd_inflate(memoryview(zstd_frames), 200_000)) == 200_001
    assert len(_lz4_inflate(memoryview(lz4_frames), 4096)) == 4097


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_a_chunk_of_several_frames_inflates_to_all_of_them(compression: str) -> None:
    import zstandard

    from audit._inflate import Inflater

    parts = [b"first frame " * 50, b"second frame " * 70, b"third"]
    compress = {
        "zstd": zstandard.ZstdCompressor().compress,
        "lz4": lz4.frame.compress,
    }[compression]
    data = b"".join(compress(part) for part in parts)
    size = sum(map(len, parts))

    assert bytes(Inflater(MIB).inflate(compression, memoryview(data), size)) == b"".join(parts)


def test_the_smallest_zstd_window_allowed_is_one_kibibyte() -> None:
    import zstandard

    from audit._inflate import InflateError, Inflater

    # No content size in the header, so the frame declares its 2 KiB window (log 11).
    params = zstandard.ZstdCompressionParameters(window_log=11, write_content_size=False)
    frame = zstandard.ZstdCompressor(compression_params=params).compress(bytes(range(256)) * 16)
    assert zstandard.get_frame_parameters(frame).window_size == 2048

    with pytest.raises(InflateError) as raised:
        Inflater(500).inflate("zstd", memoryview(frame), 500)
    assert raised.value.kind is ProblemKind.CHUNK_CORRUPT  # the 2 KiB window is refused
    with pytest.raises(InflateError) as raised:
        Inflater(1025).inflate("zstd", memoryview(frame), 1025)
    assert raised.value.kind is ProblemKind.CHUNK_OVERFLOW  # 2 KiB allowed: decoded, stopped


def test_a_missing_decompressor_makes_its_chunks_unsupported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from audit import _inflate

    monkeypatch.setattr(_inflate, "zstandard", None)
    monkeypatch.setattr(_inflate, "lz4_frame", None)
    inflater = _inflate.Inflater(MIB)

    for compression, why in [
        ("zstd", "it is zstd, and zstandard is not installed"),
        ("lz4", "it is lz4, and lz4 is not installed"),
    ]:
        with pytest.raises(_inflate.InflateError) as raised:
            inflater.inflate(compression, memoryview(b"data"), 4)
        assert (raised.value.kind, raised.value.why) == (
            ProblemKind.CHUNK_COMPRESSION_UNSUPPORTED,
            why,
        )


def test_an_optional_decompressor_that_is_not_installed_is_none() -> None:
    from audit._inflate import _optional

    assert _optional("ghost_no_such_decompressor") is None
    assert _optional("zlib") is __import__("zlib")


# --- exactly at the bounds: what a definition costs, what waits for proof ---------------------

_OVERHEAD = 256  # what each definition costs besides its bytes (the objects around them)


def test_definitions_cost_their_bytes_plus_an_overhead_against_one_shared_bound(
    tmp_path: Path,
) -> None:
    # Schemas and channels are held against one bound, each costing its strings and data
    # plus 256 bytes: a file whose definitions cost exactly the bound keeps them all, and
    # with one byte less the last definition (a channel) is dropped and reported.
    writer = RecordWriter()
    writer.raw(b"\x89MCAP0\r\n")
    writer.write_header("", "x")
    writer.write_schema(3, "ghost.decision/1", "jsonschema", b"")  # the ghost evidence
    writer.write_channel(3, 3, "/decisions", "json")
    writer.write_schema(9, "n" * 100, "e", b"{}")
    extra_channel = len(writer)
    writer.write_channel(9, 9, "/t" * 50, "e", {"key": "value"})
    writer.write_data_end()
    path = tmp_path / "definitions.mcap"
    path.write_bytes(writer.finish())
    cost = (
        (len("ghost.decision/1") + len("jsonschema") + _OVERHEAD)
        + (len("/decisions") + len("json") + _OVERHEAD)
        + (100 + 1 + 2 + _OVERHEAD)
        + (100 + 1 + len("key") + len("value") + _OVERHEAD)
    )
    log = read_run(path, limits=ReadLimits(max_held_bytes=cost))
    assert log.problems == ()
    assert sorted(channel.channel_id for channel in log.channels) == [3, 9]
    log = read_run(path, limits=ReadLimits(max_held_bytes=cost - 1))
    (problem,) = log.read_problems
    assert problem.kind is ProblemKind.MEMORY_LIMIT
    assert problem.offset == extra_channel
    assert problem.message == (
        f"definitions from byte {extra_channel} on were dropped: they exceed the"
        f" {cost - 1}-byte bound on what reading holds"
    )
    assert [channel.channel_id for channel in log.channels] == [3]


def test_records_before_the_file_shows_it_is_ghosts_are_held_within_the_bound(
    tmp_path: Path,
) -> None:
    # Until a ghost channel or record appears, what is read is held back (it may be a
    # foreign file): within the bound, the first ones kept, one problem for the rest.
    writer = RecordWriter()
    writer.raw(b"\x89MCAP0\r\n")
    writer.write_header("", "x")
    offsets = []
    for number in range(20):
        offsets.append(len(writer))
        writer.write_attachment(f"a{number}", "t", bytes([number]) * 1000)
    writer.write_schema(3, "ghost.decision/1", "jsonschema", b"")
    writer.write_channel(3, 3, "/decisions", "json")
    after = len(writer)
    for number in range(20, 40):  # the file is known to be ghost's now: nothing held back
        writer.write_attachment(f"a{number}", "t", bytes([number]) * 1000)
    writer.write_data_end()
    path = tmp_path / "late-proof.mcap"
    path.write_bytes(writer.finish())
    log = read_run(path, limits=ReadLimits(max_held_bytes=10_000))
    (problem,) = log.read_problems
    assert problem.kind is ProblemKind.MEMORY_LIMIT
    assert problem.offset == offsets[10]
    assert problem.message == (
        f"records before the file shows it is ghost's from byte {offsets[10]} on were"
        " dropped: they exceed the 10000-byte bound on what reading holds"
    )
    names = [attachment.name for attachment in log.attachments]
    assert names == [f"a{number}" for number in [*range(10), *range(20, 40)]]
    assert log.attachments[10].offset == after
