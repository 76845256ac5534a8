"""``ghost fleet verify`` with 1 and 2 workers, and ``ghost export`` against its single-run floor.

Fleet verification: N copies of runs of M decisions each, written by the
real gate and sink, verified by `analysis.verify_fleet` in this process
(``workers=1``: no pool) and on a 2-process pool (``workers=2``), the two
timed in the same interleaved rounds; the speed-up is the ratio of their
medians (issue 12's target: ≥ 1.7× on a 2-core machine).

Export: `analysis.export_run` of one run against the floor it cannot go
below, `analysis.verify_run` of the same file (the export is that one
streaming pass plus the Parquet writing), timed in the same rounds.

Scaled down: issue 12 asks for 1,000 runs × 1,000 decisions, about 2 million
records per pass; at the verifier's speed (a few thousand records per second
per core on the shared bench machine) that is many minutes per round, and
``make bench`` gives this module about half a minute: 64 runs × 1,000
decisions (the notes say how many, and give the full size measured once);
the speed-up is a ratio of two passes over the same files, and depends
little on their number once each worker has many runs to do.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path

from analysis import export_run, verify_fleet, verify_run
from analysis._demo import demo_policy_path
from audit import McapAuditSink
from bench._harness import Row, Section, interleaved
from runtime import Action, Gate, Policy

__all__ = ["run", "write_runs"]

_ACTIONS = (
    Action("support", "query", "db:customers", {"table": "customers", "limit": 500, "where": "x"}),
    Action("researcher", "search", "tool:web_search", {"query": "refund policy best practice"}),
    Action("support", "send", "mail:c", {"to": "a@example.com", "body": "your refund is sent"}),
    Action("support", "refund", "payments:stripe", {"amount": 20, "currency": "EUR"}),
)
_FULL_SIZE = (
    "Measured at issue 12's full size with `python -m bench.fleet --runs 1000 --decisions 1000`"
    " (2026-12-02, one round, quiet machine): 1 worker 101 s, 2 workers 43.2 s, speed-up 2.34×"
    " (target ≥ 1.7×: holds). At the scaled-down size above, the pool's start-up and per-task"
    " overhead weigh more, so its speed-up is lower."
)
_DISTINCT = 4
"""Runs written by the gate; the others are copies (verification does not care)."""


def write_runs(directory: Path, runs: int, decisions: int) -> list[str]:
    """Write ``runs`` sealed runs of ``decisions`` decisions each; return their paths."""
    policy = Policy.from_toml(demo_policy_path())
    originals: list[Path] = []
    for index in range(min(_DISTINCT, runs)):
        path = directory / f"original-{index}.mcap"
        with McapAuditSink(path) as sink:
            gate = Gate(policy, sink=sink)
            for step in range(decisions):
                gate.check(_ACTIONS[(index + step) % len(_ACTIONS)])
        originals.append(path)
    paths: list[str] = []
    for index in range(runs):
        path = directory / f"run-{index:04d}.mcap"
        shutil.copyfile(originals[index % len(originals)], path)
        paths.append(str(path))
    return paths


def run(
    *, quick: bool = False, runs: int | None = None, decisions: int | None = None
) -> list[Section]:
    """The fleet sections of BENCHMARKS.md (``runs`` × ``decisions``: the full-size run)."""
    full = runs is not None or decisions is not None
    default_runs, default_decisions = (4, 100) if quick else (64, 1000)
    runs = default_runs if runs is None else runs
    decisions = default_decisions if decisions is None else decisions
    rounds = 1 if quick or full else 3
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_runs(Path(tmp), runs, decisions)
        fleet = verify_fleet(paths, workers=2)
        if fleet.exit_code != 0:
            raise RuntimeError(f"the bench runs do not verify: {fleet.summary}")
        records = sum(verify_run(path).record_count for path in paths[:1]) * runs
        times = interleaved(
            {
                "1 worker": functools.partial(verify_fleet, paths, workers=1),
                "2 workers": functools.partial(verify_fleet, paths, workers=2),
            },
            rounds=rounds,
            calls=1,
        )
        speedup = times["1 worker"] / times["2 workers"]
        one = paths[0]
        out = Path(tmp) / "export"
        export_times = interleaved(
            {
                "floor": functools.partial(verify_run, one),
                "export": functools.partial(export_run, one, out),
            },
            rounds=rounds + 2,
            calls=1,
        )
        per_run = records // runs
    verify_rows = (
        Row(
            f"fleet verify, 1 worker ({runs} runs × {decisions:,} decisions)",
            times["1 worker"],
            "s",
        ),
        Row(
            f"fleet verify, 2 workers ({runs} runs × {decisions:,} decisions)",
            times["2 workers"],
            "s",
            round(1 / speedup, 3),
            "speed-up ≥ 1.7× (ratio ≤ 0.59)",
            speedup >= 1.7,
        ),
    )
    ratio = export_times["export"] / export_times["floor"]
    export_rows = (
        Row(
            f"export_run, one run ({per_run:,} records)",
            per_run / export_times["export"] / 1e3,
            "k records/s",
            round(ratio, 3),
        ),
    )
    scale = (
        f"Scaled down from issue 12's 1,000 runs × 1,000 decisions to {runs} runs ×"
        f" {decisions:,} decisions ({records:,} records per pass; {_DISTINCT} runs written"
        " by the gate, the rest copies) to keep this module near half a minute;"
        " `python -m bench.fleet --runs 1000 --decisions 1000` runs the full size"
        " (about six minutes, one round)."
        if not full
        else f"Full size: {runs:,} runs × {decisions:,} decisions ({records:,} records per"
        f" pass; {_DISTINCT} runs written by the gate, the rest copies), one round."
    )
    shared = (
        "The machine is shared (2 cores, other jobs running): a speed-up below the target"
        " says as much about the neighbours as about the pool; compare with `uptime`."
    )
    return [
        Section(
            "ghost fleet verify: 1 worker against 2",
            (
                "Seconds per pass of `analysis.verify_fleet` over the same sealed runs, in this"
                " process (1 worker) and on a 2-process pool, in the same interleaved rounds;"
                " ratio: 2 workers' time to 1 worker's (its inverse is the speed-up)."
            ),
            verify_rows,
            notes=(scale, f"Speed-up: {speedup:.2f}×.", _FULL_SIZE, shared)
            if not full
            else (scale, f"Speed-up: {speedup:.2f}×.", shared),
        ),
        Section(
            "ghost export against its single-run floor",
            (
                "Records per second of `analysis.export_run` (one run to four Parquet tables,"
                " partition replaced); ratio: its time to `verify_run` of the same file (the"
                " streaming pass the export makes anyway), in the same interleaved rounds."
            ),
            export_rows,
            notes=(
                (
                    f"verify_run {per_run / export_times['floor'] / 1e3:.1f} k records/s;"
                    f" export_run {per_run / export_times['export'] / 1e3:.1f} k records/s."
                ),
            ),
        ),
    ]


def main(argv: list[str]) -> int:
    import argparse
    import sys

    from bench._harness import render

    parser = argparse.ArgumentParser(description="ghost fleet verify, 1 worker against 2")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--decisions", type=int, default=1000)
    args = parser.parse_args(argv)
    sys.stdout.write(render(run(runs=args.runs, decisions=args.decisions), header=[]))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
