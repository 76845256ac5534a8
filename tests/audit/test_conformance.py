"""The MCAP conformance files: upstream's bytes, no false alarm, refused as not ghost's."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from audit import CrcStatus, LogFormatError, read_run
from audit._mcap_records import AttachmentRecord, MessageRecord
from audit._mcap_scan import Found, McapScanner, check_mcap
from audit._problems import DEFAULT_LIMITS
from audit._source import open_source
from tests.audit.mcap_conformance import generate, variants

GOLDEN = Path(__file__).parents[1] / "golden" / "mcap-conformance"
FILES = sorted(GOLDEN.rglob("*.mcap"))


def _features(path: Path) -> set[str]:
    return set(path.stem.split("-")[1:])


def _found(path: Path) -> list[Found]:
    with open_source(path) as source:
        source.read_magic()
        return [
            event
            for event in McapScanner(source, DEFAULT_LIMITS).events()
            if isinstance(event, Found)
        ]


def test_the_files_are_upstreams() -> None:
    sums = {}
    for line in (GOLDEN / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ")
        sums[name] = digest
    assert len(sums) == 416
    assert {path.relative_to(GOLDEN).as_posix() for path in FILES} == set(sums)
    for path in FILES:
        name = path.relative_to(GOLDEN).as_posix()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sums[name], name


def test_rebuilding_them_gives_the_same_bytes() -> None:
    rebuilt = list(variants())
    assert len(rebuilt) == len(FILES)
    for variant in rebuilt:
        assert generate(variant) == (GOLDEN / variant.path).read_bytes(), variant.path


def test_every_crc_is_checked_and_none_fails() -> None:
    checked = {"chunk": 0, "attachment": 0}
    for path in FILES:
        problems, zeros, end = check_mcap(path)
        assert problems == [], path.name
        assert zeros == [], path.name
        assert not end.truncated, path.name
        assert end.footer, path.name
        assert end.data_end, path.name
        assert end.data_section_crc is CrcStatus.VALID, path.name
        assert end.summary_crc is CrcStatus.VALID, path.name
        features = _features(path)
        checked["chunk"] += end.chunk_count
        checked["attachment"] += path.stem.startswith("OneAttachment")
        # What the file holds besides its records, counted as written.
        assert end.chunk_count == ("ch" in features), path.name
        assert end.chunk_index_count == ("chx" in features), path.name
        assert end.statistics_count == ("st" in features), path.name
        assert (end.message_index_count > 0) == ("mx" in features), path.name
        assert end.has_summary == bool(features - {"ch", "mx", "pad"}), path.name
    assert checked == {"chunk": 308, "attachment": 14}


def test_padded_attachments_read_their_crc_from_its_field() -> None:
    padded = [
        path for path in FILES if path.stem.startswith("OneAttachment") and "pad" in path.stem
    ]
    # The seven files an earlier reader failed, reading the CRC from the record's last bytes.
    assert len(padded) == 7
    for path in padded:
        (found,) = [f for f in _found(path) if isinstance(f.record, AttachmentRecord)]
        attachment = found.record
        assert isinstance(attachment, AttachmentRecord)
        assert (attachment.name, attachment.data) == ("myFile", b"\1\2\3")
        assert (attachment.log_time, attachment.create_time) == (2, 1)
        assert found.offset == 8 + 9 + 8 + 3  # after the magic and the padded Header


@pytest.mark.parametrize(
    ("base", "log_times"),
    [
        ("OneMessage", [2]),
        ("OneSchemalessMessage", [2]),
        ("TenMessages", [0, 2, 1, 3, 3, 5, 4, 7, 8, 9]),
    ],
)
def test_messages_are_read_alike_chunked_or_not(base: str, log_times: list[int]) -> None:
    files = [path for path in FILES if path.stem.split("-")[0] == base]
    assert files
    for path in files:
        messages = [found for found in _found(path) if isinstance(found.record, MessageRecord)]
        records = [found.record for found in messages]
        assert [m.log_time for m in records if isinstance(m, MessageRecord)] == log_times
        assert all(m.data == b"\1\2\3" for m in records if isinstance(m, MessageRecord))
        chunked = "ch" in _features(path)
        assert all((found.offset_in_chunk is not None) == chunked for found in messages)


def test_none_of_them_is_a_ghost_log() -> None:
    for path in FILES:
        with pytest.raises(LogFormatError, match="not a ghost audit log") as raised:
            read_run(path)
        assert "written by: ''" in raised.value.problem, path.name
