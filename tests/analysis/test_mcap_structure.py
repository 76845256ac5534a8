"""The structure pass: ghost schemas inside chunks, bounded inflation, a file that vanishes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import zstandard
from mcap.records import Chunk

from analysis import IntegrityCheck, RunStatus, verify_run
from analysis import _mcap_structure as structure
from audit import SCHEMAS, TOPICS
from tests.analysis.stored_run import StoredRun
from tests.analysis.test_verify_run import data_end_offset


def chunk(data: bytes, size: int, compression: str = "zstd") -> Chunk:
    return Chunk(
        message_start_time=0,
        message_end_time=0,
        uncompressed_size=size,
        uncompressed_crc=1,
        compression=compression,
        data=data,
    )


PLAIN = b"records " * 100
PACKED = zstandard.ZstdCompressor().compress(PLAIN)


def test_the_bound_is_the_specs() -> None:
    assert structure.MAX_CHUNK_BYTES == 64 * 1024 * 1024


def test_a_zstd_chunk_inflates_to_its_claim() -> None:
    assert structure._inflate(chunk(PACKED, len(PLAIN))) == PLAIN


def test_a_chunk_of_several_frames_inflates_across_them() -> None:
    twice = PACKED + PACKED

    assert structure._inflate(chunk(twice, 2 * len(PLAIN))) == PLAIN + PLAIN


@pytest.mark.parametrize(
    "claim", [len(PLAIN) - 1, len(PLAIN) + 1, 0], ids=["inflates-beyond", "short", "zero"]
)
def test_a_chunk_that_does_not_inflate_to_its_claim_is_skipped(claim: int) -> None:
    assert structure._inflate(chunk(PACKED, claim)) is None


def test_a_corrupt_chunk_is_skipped() -> None:
    assert structure._inflate(chunk(b"\x28\xb5\x2f\xfd" + b"\xff" * 40, 100)) is None


def test_an_uncompressed_chunk_must_be_its_claimed_size() -> None:
    assert structure._inflate(chunk(PLAIN, len(PLAIN), compression="")) == PLAIN
    assert structure._inflate(chunk(PLAIN, len(PLAIN) + 1, compression="")) is None


def test_a_chunk_in_another_compression_is_left_to_the_reader() -> None:
    assert structure._inflate(chunk(PLAIN, len(PLAIN), compression="lz4")) is None


def test_no_chunk_is_inflated_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(structure, "MAX_CHUNK_BYTES", len(PLAIN))
    assert structure._inflate(chunk(PACKED, len(PLAIN))) == PLAIN

    monkeypatch.setattr(structure, "MAX_CHUNK_BYTES", len(PLAIN) - 1)
    assert structure._inflate(chunk(PACKED, len(PLAIN))) is None


def test_an_altered_schema_inside_a_chunk_of_a_cut_file_is_named(
    stored_runs: dict[str, StoredRun], tmp_path: Path
) -> None:
    # Cut before the summary: the copy in the chunk is the only one, so no reader
    # comparison of two definitions can catch it; only the structure pass does.
    stored = stored_runs["chunk"].copy()
    index = next(i for i, s in enumerate(stored.schemas) if s.name == "ghost.approval/1")
    stored.schemas[index] = replace(stored.schemas[index], data=b"{}")
    data = stored.write(tmp_path / "full.mcap").read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: data_end_offset(data) - 9])  # everything before DataEnd

    result = verify_run(cut)

    assert [(p.check, p.position) for p in result.problems] == [(IntegrityCheck.FILE, None)]
    assert "schema 4 is named ghost.approval/1" in result.problems[0].message
    assert result.status is RunStatus.TAMPERED
    assert result.truncated


def test_an_unchanged_chunked_run_cut_short_has_no_structure_problem(
    stored_runs: dict[str, StoredRun], tmp_path: Path
) -> None:
    data = stored_runs["chunk"].copy().write(tmp_path / "full.mcap").read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: data_end_offset(data) - 9])  # everything before DataEnd

    assert verify_run(cut).status is RunStatus.TRUNCATED


def test_a_schema_whose_encoding_was_emptied_says_so(
    stored_runs: dict[str, StoredRun], tmp_path: Path
) -> None:
    stored = stored_runs["process"].copy()
    stored.schemas[0] = replace(stored.schemas[0], encoding="", data=b"")

    result = verify_run(stored.write(tmp_path / "t.mcap"))

    messages = [p.message for p in result.problems if p.check is IntegrityCheck.FILE]
    assert len(messages) == 1
    assert "(0 bytes of no encoding, expected" in messages[0]


def test_a_file_that_cannot_be_read_again_is_a_problem(tmp_path: Path) -> None:
    found = structure.scan_structure(
        tmp_path / "gone.mcap", complete=True, topics=TOPICS, schemas=SCHEMAS
    )

    assert not found.ghost_channels
    assert [p.message for p in found.problems] == [
        "the file could not be read a second time (No such file or directory)"
    ]
