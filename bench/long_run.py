"""A run of a million decisions: the time and memory of `ghost summary` and `ghost report`.

The run is made from what the real gate writes: the bundled demo script is
checked once by `runtime.Gate` under the bundled policy into a memory sink,
and its assessment / decision pairs are then replayed ``decisions`` times
into a real `audit.McapAuditSink` (chunk durability), each with a fresh
decision id, its own stamp and latency, and the link to its own assessment.
Replaying costs a sink append per record instead of a full gate check, so a
million decisions are written in minutes; the file is what a long sealed run
of that gate looks like, record for record.

Each command runs in its own process, as an operator runs it; its wall time
and peak resident memory (``wait4``'s ``ru_maxrss``) are measured. The run is
written by a child process too: Linux counts a forked child's copy of its
parent in the child's ``ru_maxrss``, so the parent must stay small. The floor,
timed on the same file in this process, is the least any reader must do:
stream it with the `mcap` library, ``json.loads`` and SHA-256 every message.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis._demo import SCRIPT, demo_policy_path
from audit import McapAuditSink, MemoryAuditSink
from bench._harness import Row, Section
from bench.verify import floor
from runtime import Gate, Policy, make_uuid7

__all__ = ["run", "write_long_run"]

_CHAINED = ("seq", "prev_sha256")  # the sink sets these


def _templates() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The demo script's (assessment, decision) pairs, as the real gate writes them."""
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_toml(demo_policy_path()), sink=sink)
    for call in SCRIPT:
        gate.check(call.action)
    sink.close()
    assessments: dict[str, Mapping[str, Any]] = {}
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for entry in sink.entries:
        if entry.topic == "/assessments":
            assessments[entry.record["decision_id"]] = entry.record
        elif entry.topic == "/decisions":
            assessment = assessments[entry.record["decision_id"]]
            pairs.append((_unchained(assessment), _unchained(entry.record)))
    return pairs


def _unchained(record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in _CHAINED}


def write_long_run(path: Path, decisions: int, *, seed: int = 0) -> None:
    """Write a sealed run of ``decisions`` decisions made from the real gate's records."""
    pairs = _templates()
    rng = random.Random(seed)
    start_ns = time.time_ns()
    with McapAuditSink(path, durability="chunk") as sink:
        gate = Gate(Policy.from_toml(demo_policy_path()), sink=sink)  # opens the run
        del gate
        for index in range(decisions):
            assessment, decision = pairs[index % len(pairs)]
            stamp_ns = start_ns + index * 1_000_000  # one decision per millisecond
            decision_id = make_uuid7(stamp_ns)
            stage_ns = {k: rng.randint(1_000, 400_000) for k in assessment["stage_ns"]}
            address = sink.append(
                "/assessments",
                {
                    **assessment,
                    "decision_id": decision_id,
                    "stamp_ns": stamp_ns,
                    "stage_ns": stage_ns,
                },
            )
            sink.append(
                "/decisions",
                {
                    **decision,
                    "decision_id": decision_id,
                    "stamp_ns": stamp_ns,
                    "assessment_sha256": address,
                    "latency_ns": sum(stage_ns.values()) + rng.randint(5_000, 50_000),
                },
            )


def _measure(command: Sequence[str | Path], output: Path) -> tuple[float, int]:
    """Run ``command`` (stdout to ``output``); return its wall seconds and peak resident bytes."""
    errors = output.with_suffix(".err")
    started = time.perf_counter()
    # Both streams to files: a pipe that fills up would stall the child while we wait.
    with output.open("wb") as stdout, errors.open("wb") as stderr:
        process = subprocess.Popen(list(command), stdout=stdout, stderr=stderr)  # noqa: S603
        _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    code = process.returncode = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{command} exited {code}: {errors.read_text(errors='replace')}")
    return elapsed, usage.ru_maxrss * 1024  # Linux reports KiB


def run(*, quick: bool = False) -> list[Section]:
    """The long-run section of BENCHMARKS.md."""
    decisions = 20_000 if quick else 1_000_000
    ghost: list[str | Path] = [sys.executable, "-m", "analysis"]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.mcap"
        written = time.perf_counter()
        # In a child of its own: a child inherits its parent's peak memory (Linux counts
        # the forked copy in ru_maxrss), so this process must stay small for the commands.
        subprocess.run(  # noqa: S603 - this interpreter, no shell
            [sys.executable, "-m", "bench.long_run", "--write", str(path), str(decisions)],
            check=True,
        )
        written = time.perf_counter() - written
        size = path.stat().st_size
        # The floor in a child too, so that all three are measured alike (start-up included).
        counted = Path(tmp) / "floor.txt"
        floor_s, floor_peak = _measure(
            [sys.executable, "-m", "bench.long_run", "--floor", path], counted
        )
        records = int(counted.read_text())
        rows.append(Row("floor: stream, decode, hash every message", floor_s, "s", 1.0))
        commands: dict[str, list[str | Path]] = {
            "ghost summary": [*ghost, "summary", path],
            "ghost report --html": [*ghost, "report", path, "--html", Path(tmp) / "report.html"],
        }
        memory = [f"floor: peak resident memory {floor_peak / 2**20:,.0f} MiB."]
        for name, command in commands.items():
            seconds, peak = _measure(command, Path(tmp) / "out.txt")
            rows.append(Row(name, seconds, "s", seconds / floor_s))
            memory.append(f"{name}: peak resident memory {peak / 2**20:,.0f} MiB.")
        report_size = (Path(tmp) / "report.html").stat().st_size
    notes = (
        (
            f"The run: {decisions:,} decisions, {records:,} records, {size / 1e6:,.0f} MB"
            f" (written in {written:,.0f} s)."
        ),
        *memory,
        f"The HTML report: {report_size / 1e6:,.1f} MB.",
    )
    return [
        Section(
            "A long run: ghost summary and ghost report",
            (
                f"A sealed run of {decisions:,} decisions made from the real gate's records"
                " (bench/long_run.py). Wall time of each command in its own process; ratio:"
                " to the floor (the `mcap` stream reader, `json.loads` and SHA-256 of every"
                " message) on the same file."
            ),
            tuple(rows),
            notes=notes,
        )
    ]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        write_long_run(Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[1:2] == ["--floor"]:
        print(floor(Path(sys.argv[2])))
    else:
        for section in run(quick="--quick" in sys.argv):
            print(section)
