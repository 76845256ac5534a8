"""Cut, killed and damaged files: a cut keeps exactly its complete records; nothing raises.

The cut property is exact: a record is recovered if and only if all of its
bytes (its Message record, or the whole Chunk holding it) precede the cut;
the file then reads as truncated, with no problem. It is checked at every
byte of a small run in each durability mode and at a dense sample of a
large one. The crash test kills real writer processes with SIGKILL at
random moments and checks that every record whose ``append`` had returned is
in the file (``process`` mode), or that only the open chunk was lost
(``chunk`` mode). ``HYPOTHESIS_PROFILE=thorough`` (or ``GHOST_SIGKILL_ROUNDS``)
runs ten times the rounds.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcap.reader import make_reader

from audit import Durability, LogFormatError, McapAuditSink, RunLog, read_run
from tests.records import append_decisions, make_run_start, write_run

MAGIC_SIZE = 8
MESSAGE_OVERHEAD = 9 + 22  # opcode and length, then channel id, sequence, log and publish time
THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
ROOT = Path(__file__).parents[2]


def _completion(path: Path, log: RunLog) -> Callable[[int], tuple[int, int]]:
    """Return, for a cut at an offset, how many records and attachments must survive it."""
    chunk_ends: dict[int, int] = {}
    if log.end.chunk_count:
        with path.open("rb") as stream:
            summary = make_reader(stream).get_summary()
        assert summary is not None
        chunk_ends = {
            index.chunk_start_offset: index.chunk_start_offset + index.chunk_length
            for index in summary.chunk_indexes
        }
    record_ends = [
        chunk_ends[r.offset]
        if r.offset_in_chunk is not None
        else r.offset + MESSAGE_OVERHEAD + len(r.data)
        for r in log.records
    ]
    # An attachment record: opcode, length, two times, two strings, data length, data, CRC.
    attachment_ends = [
        a.offset
        + 9
        + 16
        + 4
        + len(a.name.encode())
        + 4
        + len(a.media_type.encode())
        + 8
        + len(a.data)
        + 4
        for a in log.attachments
    ]
    assert record_ends == sorted(record_ends)

    def survivors(cut: int) -> tuple[int, int]:
        return (
            sum(end <= cut for end in record_ends),
            sum(end <= cut for end in attachment_ends),
        )

    return survivors


def _check_cuts(path: Path, offsets: list[int]) -> tuple[set[int], RunLog]:
    """Cut ``path`` at each offset (largest first) and check what survives.

    Returns:
        How many records the cuts left (each count once), and the intact file's log.
    """
    full = read_run(path)
    assert full.problems == ()
    assert not full.truncated
    survivors = _completion(path, full)
    size = path.stat().st_size
    counts: set[int] = set()
    for offset in sorted(offsets, reverse=True):
        os.truncate(path, offset)  # shrinking one file is cheap; rewriting one per cut is not
        if offset < MAGIC_SIZE:
            with pytest.raises(LogFormatError):
                read_run(path)
            continue
        log = read_run(path)
        records, attachments = survivors(offset)
        assert log.records == full.records[:records], offset
        assert log.attachments == full.attachments[:attachments], offset
        assert log.problems == (), (offset, log.problems)
        assert log.truncated == (offset < size), offset
        assert log.end.size_bytes == offset
        counts.add(records)
    return counts, full


@pytest.mark.parametrize("durability", ["process", "chunk"])
def test_a_cut_at_every_byte_yields_exactly_the_complete_records(
    tmp_path: Path, durability: Durability
) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=1, durability=durability)
    size = path.stat().st_size
    counts, full = _check_cuts(path, list(range(size + 1)))
    records = len(full.records)
    # /run and its checkpoint, an assessment, a decision, an approval, the final
    # checkpoint and the seal.
    assert [r.topic for r in full.records] == [
        "/run",
        "/checkpoints",
        "/assessments",
        "/decisions",
        "/approvals",
        "/checkpoints",
        "/seal",
    ]
    if durability == "process":
        # Records reach the file one by one, so every prefix is some cut's.
        assert counts == set(range(records + 1))
    else:
        # The /run record and its checkpoint have a chunk of their own (flushed at
        # once); the rest share one.
        assert counts == {0, 2, records}


@pytest.mark.parametrize("durability", ["process", "chunk"])
def test_a_dense_sample_of_cuts_in_a_large_run(tmp_path: Path, durability: Durability) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path, durability=durability, chunk_size=16 * 1024) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 400 if THOROUGH else 60)
    full = read_run(path)
    size = path.stat().st_size
    # Both sides of every record's end (where a cut starts or stops losing it), then at random.
    ends = {r.offset for r in full.records} | {size - 8, size}
    rng = random.Random(size)
    offsets = {max(0, min(size, end + delta)) for end in ends for delta in (-1, 0, 1)}
    offsets |= {rng.randrange(size) for _ in range(2000 if THOROUGH else 150)}
    counts, _ = _check_cuts(path, sorted(offsets))
    assert max(counts) == len(full.records)
    if durability == "chunk":
        assert full.end.chunk_count > 3  # the sample crosses many chunk boundaries


# --- SIGKILL -------------------------------------------------------------------------

# One harness process imports ghost once and forks a writer per round; the harness kills
# it with SIGKILL after a random number of acknowledgements (an append that returned),
# then reports every acknowledgement the writer sent before it died.
_HARNESS = textwrap.dedent(
    """
    import json, os, random, signal, sys, time
    from audit import McapAuditSink
    from runtime import make_uuid7
    from tests.records import STAMP_NS, assessment, decision, make_run_start

    directory, durability = sys.argv[1], sys.argv[2]
    rounds, seed = int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)

    def write(path, ack):
        sink = McapAuditSink(path, durability=durability, chunk_size=4096)
        sink.open_run(make_run_start())
        os.write(ack, (sink.head_sha256 + "\\n").encode())
        for index in range(10_000):
            stamp = STAMP_NS + index * 1000
            decision_id = make_uuid7(stamp)
            address = sink.append("/assessments", assessment(decision_id, stamp_ns=stamp))
            os.write(ack, (address + "\\n").encode())
            address = sink.append("/decisions", decision(decision_id, address, stamp_ns=stamp))
            os.write(ack, (address + "\\n").encode())

    results = []
    for round_ in range(rounds):
        path = os.path.join(directory, f"killed-{round_}.mcap")
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            try:
                write(path, write_end)
            finally:
                os._exit(0)
        os.close(write_end)
        wanted = rng.randrange(1, 60)
        acks = []
        with os.fdopen(read_end, "rb") as pipe:
            while len(acks) < wanted:
                line = pipe.readline()
                if not line:
                    break
                acks.append(line.decode().strip())
            if rng.random() < 0.5:
                time.sleep(rng.random() / 1000)  # sometimes mid-append, sometimes between
            os.kill(pid, signal.SIGKILL)
            acks += [line.decode().strip() for line in pipe]
        _, status = os.waitpid(pid, 0)
        results.append({"path": path, "acks": acks, "signal": os.WTERMSIG(status)})
    print(json.dumps(results))
    """
)


def _kill_rounds(tmp_path: Path, durability: str, rounds: int) -> list[dict[str, object]]:
    result = subprocess.run(
        [sys.executable, "-c", _HARNESS, str(tmp_path), durability, str(rounds), str(rounds)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(["src", "."])},
    )
    assert result.returncode == 0, result.stderr
    rounds_run: list[dict[str, object]] = json.loads(result.stdout)
    assert len(rounds_run) == rounds
    assert all(entry["signal"] == 9 for entry in rounds_run)  # every writer died by SIGKILL
    return rounds_run


def _rounds(default: int) -> int:
    return int(os.environ.get("GHOST_SIGKILL_ROUNDS", default * 10 if THOROUGH else default))


def test_a_sigkilled_writer_loses_no_acknowledged_record(tmp_path: Path) -> None:
    rounds = _kill_rounds(tmp_path, "process", _rounds(50))
    lost_mid_record = 0
    for entry in rounds:
        acks = entry["acks"]
        assert isinstance(acks, list)
        log = read_run(str(entry["path"]))
        assert log.truncated
        assert log.problems == ()
        stored = [record.sha256 for record in log.records]
        # Every acknowledged record is in the file, in order; at most the one being
        # written when the signal came follows them.
        assert stored[: len(acks)] == acks, entry["path"]
        assert len(stored) - len(acks) in (0, 1)
        lost_mid_record += log.end.size_bytes > sum(
            MESSAGE_OVERHEAD + len(r.data) for r in log.records
        )
    assert lost_mid_record > 0  # some kills did land in the middle of a write


def test_a_sigkilled_chunk_writer_loses_at_most_its_open_chunk(tmp_path: Path) -> None:
    chunk_size = 4096
    losses = []
    for entry in _kill_rounds(tmp_path, "chunk", _rounds(20)):
        acks = entry["acks"]
        assert isinstance(acks, list)
        log = read_run(str(entry["path"]))
        assert log.truncated  # the loss is reported as a cut, not as damage
        assert log.problems == ()
        stored = [record.sha256 for record in log.records]
        # A prefix of what was acknowledged, and at most the one record whose append
        # was under way (its chunk written, its acknowledgement not yet printed).
        assert stored[: len(acks)] == acks[: len(stored)], entry["path"]
        assert len(stored) - len(acks) <= 1, entry["path"]
        lost = max(0, len(acks) - len(stored))
        losses.append(lost)
        # What was lost fits in the one open chunk, which is written once it holds chunk_size
        # bytes: the lost records' bytes (at least the smallest record's each) are fewer.
        smallest = min(len(record.data) for record in log.records[1:] or log.records)
        assert lost * (smallest + MESSAGE_OVERHEAD) < chunk_size, (lost, entry["path"])
    assert max(losses) > 0  # the open chunk was lost, not only whole records


# --- random damage ---------------------------------------------------------------------


class _Intact(dict[str, bytes]):
    """Intact files by durability; a short repr keeps Hypothesis's reports readable."""

    def __repr__(self) -> str:
        return f"<intact runs: {', '.join(self)}>"


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> _Intact:
    files = _Intact()
    for durability in ("process", "chunk"):
        path = tmp_path_factory.mktemp("intact") / "run.mcap"
        write_run(path, decisions=1, durability=durability)
        files[durability] = path.read_bytes()
    return files


@settings(
    max_examples=1000 if THOROUGH else 200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    durability=st.sampled_from(["process", "chunk"]),
    edits=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=12)),
        min_size=1,
        max_size=4,
    ),
    mode=st.sampled_from(["overwrite", "insert", "delete", "cut"]),
)
def test_damage_anywhere_never_escapes_as_a_traceback(
    tmp_path: Path,
    intact: _Intact,
    durability: str,
    edits: list[tuple[float, bytes]],
    mode: str,
) -> None:
    data = bytearray(intact[durability])
    for fraction, chunk in edits:
        at = int(fraction * len(data))
        if mode == "overwrite":
            data[at : at + len(chunk)] = chunk
        elif mode == "insert":
            data[at:at] = chunk
        elif mode == "delete":
            del data[at : at + len(chunk)]
        else:
            del data[at:]
    path = tmp_path / "damaged.mcap"
    path.write_bytes(bytes(data))
    try:
        log = read_run(path)
    except LogFormatError:
        return
    for record in log.records:
        assert (record.record is None) == (record.problem is not None)
    # Problems are machine-readable and said in words; the sentences are the same problems.
    assert log.problems == tuple(problem.message for problem in log.read_problems)
    assert log.end.size_bytes == len(data)
