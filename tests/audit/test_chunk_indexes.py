"""The MCAP writer's chunk indexes, kept on disk: the same file, bounded memory."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader
from mcap.records import ChunkIndex
from mcap.writer import CompressionType, Writer

from audit import McapAuditSink
from audit._chunk_indexes import SpilledChunkIndexes, spill_chunk_indexes
from tests.records import append_decisions, write_run

_U64 = st.integers(min_value=0, max_value=2**64 - 1)
_INDEXES = st.builds(
    ChunkIndex,
    message_start_time=_U64,
    message_end_time=_U64,
    chunk_start_offset=_U64,
    chunk_length=_U64,
    message_index_offsets=st.dictionaries(
        st.integers(min_value=0, max_value=2**16 - 1), _U64, max_size=6
    ),
    message_index_length=_U64,
    compression=st.sampled_from(["", "zstd", "lz4"]),
    compressed_size=_U64,
    uncompressed_size=_U64,
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_INDEXES, max_size=40), st.integers(min_value=0, max_value=3))
def test_every_index_comes_back_equal_and_in_order(indexes: list[ChunkIndex], reads: int) -> None:
    spilled = SpilledChunkIndexes()
    try:
        for index in indexes:
            spilled.append(index)
        for _ in range(reads):  # iterating twice gives the same again
            assert list(spilled) == indexes
        assert len(spilled) == len(indexes)
    finally:
        spilled.close()


def test_indexes_past_a_batch_go_to_disk_and_come_back_in_order() -> None:
    spilled = SpilledChunkIndexes()
    indexes = [
        ChunkIndex(
            message_start_time=n,
            message_end_time=n + 1,
            chunk_start_offset=100 * n,
            chunk_length=90,
            message_index_offsets={1: 100 * n + 90, 3: 100 * n + 95},
            message_index_length=10,
            compression="",
            compressed_size=80,
            uncompressed_size=80,
        )
        for n in range(5_000)
    ]
    try:
        for index in indexes:
            spilled.append(index)
            assert spilled.pending_bytes < 64 * 1024 + 100
        assert list(spilled) == indexes
    finally:
        spilled.close()


def _write(chunks: int, compression: CompressionType, *, spill: bool) -> bytes:
    out = io.BytesIO()
    writer = Writer(out, chunk_size=2**62, compression=compression, enable_data_crcs=True)
    spilled = spill_chunk_indexes(writer) if spill else None
    if spill:
        assert spilled is not None
    writer.start(profile="", library="test")
    schema = writer.register_schema("s", "jsonschema", b"{}")
    channels = [writer.register_channel(f"/t{n}", "json", schema) for n in range(3)]
    for n in range(chunks):
        for channel in channels[: 1 + n % 3]:
            writer.add_message(channel, log_time=n, data=b'{"n":%d}' % n, publish_time=n)
        writer.flush()  # one chunk per step, as process durability does
    writer.finish()
    if spilled is not None:
        spilled.close()
    return out.getvalue()


def test_a_writer_with_spilled_indexes_writes_the_same_bytes() -> None:
    for compression in (CompressionType.NONE, CompressionType.ZSTD):
        # 3,000 chunks: past several batches, so most indexes come back from the file.
        spilled = _write(3_000, compression, spill=True)
        assert spilled == _write(3_000, compression, spill=False)


def test_a_writer_that_already_holds_indexes_is_left_alone() -> None:
    writer = Writer(io.BytesIO(), chunk_size=2**62)
    writer.start(profile="", library="test")
    schema = writer.register_schema("s", "jsonschema", b"{}")
    channel = writer.register_channel("/t", "json", schema)
    writer.add_message(channel, log_time=0, data=b"{}", publish_time=0)
    writer.flush()
    assert spill_chunk_indexes(writer) is None  # swapping now would lose the first index


def test_the_sink_keeps_its_chunk_indexes_on_disk(tmp_path: Path) -> None:
    # Pins the writer attribute this relies on: an mcap release that renames it fails here.
    path = tmp_path / "run.mcap"
    sink = write_run(path, decisions=0, close=False)
    spilled = sink._chunk_indexes
    assert isinstance(spilled, SpilledChunkIndexes)
    append_decisions(sink, 1_500)
    assert len(spilled) > 1_500  # process durability: a chunk (and an index) per record pair
    assert spilled.pending_bytes < 64 * 1024 + 100
    sink.close()
    with path.open("rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        assert summary is not None
        assert len(summary.chunk_indexes) == len(spilled)
        seen = sum(1 for _ in reader.iter_messages())
    assert seen == summary.statistics.message_count


def test_a_closed_sink_drops_its_spill_file(tmp_path: Path) -> None:
    with McapAuditSink(tmp_path / "run.mcap") as sink:
        spilled = sink._chunk_indexes
        assert spilled is not None
    assert spilled._file is None
