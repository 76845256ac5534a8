"""rewrite_mcap: the tampering helper produces valid MCAP files that differ only as asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcap.reader import make_reader

from audit import read_run
from runtime import canonical_bytes
from tests.audit.mcap_tools import rewrite_mcap
from tests.records import write_run


@pytest.fixture
def original(tmp_path: Path) -> Path:
    path = tmp_path / "original.mcap"
    write_run(path, decisions=2)
    return path


@pytest.mark.parametrize("chunked", [False, True])
def test_identity_rewrite_keeps_every_record(original: Path, tmp_path: Path, chunked: bool) -> None:
    copy = tmp_path / "copy.mcap"
    written = rewrite_mcap(original, copy, lambda topic, data: data, chunked=chunked)
    before, after = read_run(original), read_run(copy)
    assert written == len(before.records)
    assert after.problems == ()
    assert not after.truncated
    assert [(r.topic, r.data, r.log_time_ns, r.sequence) for r in after.records] == [
        (r.topic, r.data, r.log_time_ns, r.sequence) for r in before.records
    ]
    assert [(a.name, a.media_type, a.log_time_ns, a.data) for a in after.attachments] == [
        (a.name, a.media_type, a.log_time_ns, a.data) for a in before.attachments
    ]
    with original.open("rb") as a, copy.open("rb") as b:
        sa, sb = make_reader(a).get_summary(), make_reader(b).get_summary()
    assert sa is not None
    assert sb is not None
    assert sa.schemas == sb.schemas
    assert sa.channels == sb.channels


def test_transform_can_drop_and_change_messages(original: Path, tmp_path: Path) -> None:
    copy = tmp_path / "tampered.mcap"

    def tamper(topic: str, data: bytes) -> bytes | None:
        if topic == "/approvals":
            return None
        if topic == "/decisions":
            record = json.loads(data)
            record["verdict"] = "deny"
            return canonical_bytes(record)
        return data

    rewrite_mcap(original, copy, tamper)
    before, after = read_run(original), read_run(copy)
    assert after.problems == ()  # a valid MCAP file: only the chain can tell
    assert len(after.records) == len(before.records) - 1
    assert [r.topic for r in after.records_on("/approvals")] == []
    for record in after.records_on("/decisions"):
        assert record.record is not None
        assert record.record["verdict"] == "deny"
    unchanged = [r.data for r in before.records if r.topic in ("/run", "/assessments", "/seal")]
    assert [r.data for r in after.records if r.topic in ("/run", "/assessments", "/seal")] == (
        unchanged
    )
