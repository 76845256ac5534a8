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
    refused: list[int] = []
    for offset in sorted(offsets, reverse=True):
        os.truncate(path, offset)  # shrinking one file is cheap; rewriting one per cut is not
        records, attachments = survivors(offset)
        if offset < MAGIC_SIZE or records == 0:
            # Before the chunk that carries ghost's channels and its /run record is
            # complete, nothing in the file shows it is a ghost log (SPEC §6): refused,
            # and no complete record is lost by the refusal.
            with pytest.raises(LogFormatError, match="not a"):
                read_run(path)
            refused.append(offset)
            continue
        log = read_run(path)
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
        assert counts == set(range(1, records + 1))
    else:
        # The /run record and its checkpoint have a chunk of their own (flushed at
        # once); the rest share one.
        assert counts == {2, records}


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
        # open_run wrote /run and the checkpoint after it; the head is that checkpoint.
        os.write(ack, ("/checkpoints " + sink.head_sha256 + "\\n").encode())
        for index in range(10_000):
            stamp = STAMP_NS + index * 1000
            decision_id = make_uuid7(stamp)
            address = sink.append("/assessments", assessment(decision_id, stamp_ns=stamp))
            acknowledge(sink, ack, "/assessments", address)
            address = sink.append("/decisions", decision(decision_id, address, stamp_ns=stamp))
            acknowledge(sink, ack, "/decisions", address)

    def acknowledge(sink, ack, topic, address):
        # One line per record the append wrote: its own, then the checkpoint that followed
        # it if one was due (the head is then that checkpoint). One write: one pipe message.
        lines = f"{topic} {address}\\n"
        if sink.head_sha256 != address:
            lines += f"/checkpoints {sink.head_sha256}\\n"
        os.write(ack, lines.encode())

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
        results.append(
            {"path": path, "acks": acks, "seen": wanted, "signal": os.WTERMSIG(status)}
        )
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


def _acknowledged(entry: dict[str, object], log: RunLog) -> list[tuple[str, str]]:
    """Every record the killed writer had acknowledged, as (topic, content address), in order.

    The first acknowledgement is the head after ``open_run``: the checkpoint written
    right after ``/run``. The ``/run`` record before it is the one that checkpoint names.
    """
    lines = entry["acks"]
    assert isinstance(lines, list)
    acks: list[tuple[str, str]] = []
    for line in lines:
        topic, address = line.split(" ")
        acks.append((topic, address))
    run, checkpoint = log.records[:2]
    assert run.topic == "/run"
    assert (checkpoint.topic, checkpoint.sha256) == acks[0], entry["path"]
    assert checkpoint.record is not None
    assert checkpoint.record["head_sha256"] == run.sha256
    return [("/run", run.sha256), *acks]


def _under_way(acknowledged: list[tuple[str, str]], log: RunLog) -> list[str]:
    """The topics of the records in the file beyond the acknowledged ones; check their shape.

    At most the append under way when the signal came can follow what was acknowledged:
    its record (the writer alternates assessments and decisions) and then the checkpoint
    that followed it, if one was due.
    """
    extra = [record.topic for record in log.records[len(acknowledged) :]]
    last = [topic for topic, _ in acknowledged if topic != "/checkpoints"][-1]
    following = "/decisions" if last == "/assessments" else "/assessments"
    assert extra in ([], [following], [following, "/checkpoints"]), extra
    return extra


def test_a_sigkilled_writer_loses_no_acknowledged_record(tmp_path: Path) -> None:
    rounds = _kill_rounds(tmp_path, "process", _rounds(50))
    overtaken = 0
    for entry in rounds:
        log = read_run(str(entry["path"]))
        assert log.truncated
        assert log.problems == ()
        acknowledged = _acknowledged(entry, log)
        stored = [(record.topic, record.sha256) for record in log.records]
        # Every acknowledged record -- checkpoints included -- is in the file, in order.
        assert stored[: len(acknowledged)] == acknowledged, entry["path"]
        _under_way(acknowledged, log)
        seen = entry["seen"]
        assert isinstance(seen, int)
        overtaken += len(acknowledged) - 1 > seen
    # Some signals reached a writer still appending (it had acknowledged more records than
    # the harness had read when it sent the signal), not one waiting at a quiet point.
    assert overtaken > 0


def test_a_sigkilled_chunk_writer_loses_at_most_its_open_chunk(tmp_path: Path) -> None:
    chunk_size = 4096
    losses = []
    for entry in _kill_rounds(tmp_path, "chunk", _rounds(20)):
        log = read_run(str(entry["path"]))
        assert log.truncated  # the loss is reported as a cut, not as damage
        assert log.problems == ()
        # /run and its checkpoint have a chunk of their own, written before open_run returns.
        acknowledged = _acknowledged(entry, log)
        stored = [(record.topic, record.sha256) for record in log.records]
        # A prefix of what was acknowledged, and at most the append that was under way (its
        # chunk written, its acknowledgement not yet printed).
        common = min(len(stored), len(acknowledged))
        assert stored[:common] == acknowledged[:common], entry["path"]
        _under_way(acknowledged, log)
        lost = acknowledged[len(stored) :]
        losses.append(len(lost))
        # What was lost fits in the one open chunk, which is written once it holds chunk_size
        # bytes: the lost records' bytes (each at least the smallest stored record's of its
        # topic, or of any topic) are fewer.
        smallest: dict[str, int] = {}
        for record in log.records[1:]:
            smallest[record.topic] = min(smallest.get(record.topic, chunk_size), len(record.data))
        floor = min(smallest.values())
        lost_bytes = sum(smallest.get(topic, floor) + MESSAGE_OVERHEAD for topic, _ in lost)
        assert lost_bytes < chunk_size, (lost, entry["path"])
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
