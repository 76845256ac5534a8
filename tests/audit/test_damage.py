"""Cut and damaged files: every cut yields a prefix, no damage yields a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit import Durability, LogFormatError, RunLog, read_run
from tests.records import write_run

MAGIC_SIZE = 8


def _full_run(tmp_path: Path, durability: Durability) -> tuple[bytes, RunLog]:
    path = tmp_path / f"full-{durability}.mcap"
    write_run(path, decisions=1, durability=durability)
    return path.read_bytes(), read_run(path)


@pytest.mark.parametrize("durability", ["process", "chunk"])
def test_a_cut_at_every_byte_yields_a_prefix_of_the_run(
    tmp_path: Path, durability: Durability
) -> None:
    data, full = _full_run(tmp_path, durability)
    expected = [(r.topic, r.data) for r in full.records]
    cut = tmp_path / "cut.mcap"
    seen_lengths: set[int] = set()
    for offset in range(len(data) + 1):
        cut.write_bytes(data[:offset])
        if offset < MAGIC_SIZE:
            with pytest.raises(LogFormatError):
                read_run(cut)
            continue
        log = read_run(cut)
        got = [(r.topic, r.data) for r in log.records]
        assert got == expected[: len(got)], offset
        assert log.problems == (), (offset, log.problems)
        assert log.truncated == (offset < len(data)), offset
        seen_lengths.add(len(got))
    # Every record is recovered by some cut: records reach the file one by one.
    if durability == "process":
        assert seen_lengths == set(range(len(expected) + 1))
    else:
        assert {0, len(expected)} <= seen_lengths


def test_a_sigkilled_writer_leaves_every_returned_record(tmp_path: Path) -> None:
    path = tmp_path / "killed.mcap"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from audit import McapAuditSink
        from tests.records import append_decisions, make_run_start
        sink = McapAuditSink({str(path)!r})
        sink.open_run(make_run_start())
        for address in append_decisions(sink, 3):
            print(address)
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        cwd=Path(__file__).parents[2],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(["src", "."])},
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    returned = [line for line in result.stdout.splitlines() if len(line) == 64]
    assert len(returned) == 7
    log = read_run(path)
    assert log.truncated
    assert log.problems == ()
    assert [r.sha256 for r in log.records[1:]] == returned


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
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    durability=st.sampled_from(["process", "chunk"]),
    edits=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.binary(min_size=1, max_size=12)),
        min_size=1,
        max_size=4,
    ),
    mode=st.sampled_from(["overwrite", "insert", "delete"]),
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
        else:
            del data[at : at + len(chunk)]
    path = tmp_path / "damaged.mcap"
    path.write_bytes(bytes(data))
    try:
        log = read_run(path)
    except LogFormatError:
        return
    for record in log.records:
        assert (record.record is None) == (record.problem is not None)
