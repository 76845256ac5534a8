"""McapAuditSink.append_pair: an assessment and the decision naming it, written at once.

The gate hands each assessment and its decision to the sink together (ADR
0021): consecutive ``seq``, the decision built from the assessment's address,
and in ``process`` / ``fsync`` modes one finished chunk, one write and one
``fsync`` for both -- with every guarantee `append` gives one record.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcap.reader import make_reader

from audit import Durability, McapAuditSink, read_run
from runtime import Action, AuditError, Gate, Policy, canonical_bytes, make_uuid7, sha256_hex
from tests.records import STAMP_NS, assessment, decision, make_run_start


def pair(sink: McapAuditSink, index: int) -> tuple[str, str]:
    stamp = STAMP_NS + (index + 1) * 1000
    decision_id = make_uuid7(stamp)
    return sink.append_pair(
        "/assessments",
        assessment(decision_id, stamp_ns=stamp),
        "/decisions",
        lambda a_sha: decision(decision_id, a_sha, stamp_ns=stamp + 1, verdict="allow"),
    )


@pytest.mark.parametrize("durability", ["process", "fsync", "chunk"])
def test_the_pair_is_chained_consecutively_and_reads_back(
    tmp_path: Path, durability: Durability
) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path, durability=durability) as sink:
        sink.open_run(make_run_start())
        a_sha, d_sha = pair(sink, 0)
        assert sink.head_sha256 == d_sha
    log = read_run(path)
    assert log.problems == ()
    topics = [r.topic for r in log.records]
    at = topics.index("/assessments")
    first, second = log.records[at], log.records[at + 1]
    assert (first.topic, second.topic) == ("/assessments", "/decisions")
    assert (first.sha256, second.sha256) == (a_sha, d_sha)
    assert second.record is not None
    assert second.record["assessment_sha256"] == a_sha
    assert second.record["prev_sha256"] == a_sha
    assert second.data == canonical_bytes(second.record)
    assert sha256_hex(second.data) == d_sha


def chunk_topics(path: Path) -> list[tuple[str, ...]]:
    """Each chunk's message topics, by chunk, as the mcap library's summary indexes them."""
    with path.open("rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        assert summary is not None
        channels = {c.id: c.topic for c in summary.channels.values()}
        return [
            tuple(sorted(channels[channel_id] for channel_id in index.message_index_offsets))
            for index in summary.chunk_indexes
        ]


@pytest.mark.parametrize("durability", ["process", "fsync"])
def test_the_pair_shares_one_chunk_where_append_writes_one_each(
    tmp_path: Path, durability: Durability
) -> None:
    paired, single = tmp_path / "paired.mcap", tmp_path / "single.mcap"
    with McapAuditSink(paired, durability=durability) as sink:
        sink.open_run(make_run_start())
        pair(sink, 0)
        pair(sink, 1)
    with McapAuditSink(single, durability=durability) as sink:
        sink.open_run(make_run_start())
        for index in range(2):
            stamp = STAMP_NS + (index + 1) * 1000
            decision_id = make_uuid7(stamp)
            a_sha = sink.append("/assessments", assessment(decision_id, stamp_ns=stamp))
            sink.append("/decisions", decision(decision_id, a_sha, stamp_ns=stamp + 1))
    both = ("/assessments", "/decisions")
    assert chunk_topics(paired).count(both) == 2
    assert both not in chunk_topics(single)
    assert len(chunk_topics(paired)) == len(chunk_topics(single)) - 2


def test_fsync_mode_syncs_once_per_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr("audit._mcap_sink.os.fsync", counted)
    with McapAuditSink(tmp_path / "run.mcap", durability="fsync") as sink:
        sink.open_run(make_run_start())
        before = len(synced)
        pair(sink, 0)
        assert len(synced) == before + 1


def test_both_are_in_the_file_when_the_pair_returns(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(path)
    try:
        sink.open_run(make_run_start())
        a_sha, d_sha = pair(sink, 0)
        log = read_run(path)  # no footer yet: read as a cut file
        assert log.truncated
        assert [r.sha256 for r in log.records if r.topic != "/checkpoints"][-2:] == [a_sha, d_sha]
    finally:
        sink.close()


def test_a_refused_second_record_leaves_the_first_written(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())
        decision_id = make_uuid7(STAMP_NS)
        bad: dict[str, Any] = {"schema": "ghost.decision/1", "stamp_ns": 1.5}  # a float
        with pytest.raises(AuditError):
            sink.append_pair("/assessments", assessment(decision_id), "/decisions", lambda _: bad)
        a_sha, _ = pair(sink, 1)  # the sink still works
    log = read_run(path)
    assert log.problems == ()
    assessments = [r for r in log.records if r.topic == "/assessments"]
    assert len(assessments) == 2
    assert assessments[1].sha256 == a_sha


def test_a_failed_write_fails_the_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = McapAuditSink(tmp_path / "run.mcap", durability="fsync")
    sink.open_run(make_run_start())

    def broken_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("audit._mcap_sink.os.fsync", broken_disk)
    with pytest.raises(AuditError, match="No space left"):
        pair(sink, 0)
    monkeypatch.undo()
    with pytest.raises(AuditError, match="earlier write failed"):
        pair(sink, 1)
    sink.close()


def test_the_gate_writes_each_decision_beside_its_assessment(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    policy = Policy.from_dict({"policy_id": "p", "rules": [{"id": "all", "effect": "allow"}]})
    with McapAuditSink(path) as sink:
        gate = Gate(policy, sink=sink)
        for index in range(3):
            gate.check(Action("bot", "search", "tool:search", {"i": index}))
    assert chunk_topics(path).count(("/assessments", "/decisions")) == 3


class _Counting(McapAuditSink):
    """A host's sink that does something with each record it is given."""

    seen: list[str]

    def append(self, topic: str, record: Any) -> str:
        self.seen.append(topic)
        return super().append(topic, record)


def test_a_subclass_that_overrides_append_sees_every_record(tmp_path: Path) -> None:
    policy = Policy.from_dict({"policy_id": "p", "rules": [{"id": "all", "effect": "allow"}]})
    with _Counting(tmp_path / "run.mcap") as sink:
        sink.seen = []
        gate = Gate(policy, sink=sink)
        gate.check(Action("bot", "search", "tool:search"))
    assert sink.seen == ["/assessments", "/decisions"]
    log = read_run(tmp_path / "run.mcap")
    assert log.problems == ()
    assert [r.topic for r in log.records if r.topic in sink.seen] == sink.seen
