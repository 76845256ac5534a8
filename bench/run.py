"""``make bench``: every benchmark, side by side with its peer, rewriting BENCHMARKS.md.

Each module in `MODULES` measures its rows against a peer or floor timed in the
same interleaved rounds (`bench._harness`) and states its targets; this script
runs them all in one process, prints the result, and writes it to
BENCHMARKS.md with the command and the machine. ``--quick`` runs fewer rounds
(a smoke run; its numbers are not for BENCHMARKS.md unless nothing else is).

Never run by ``make test``: timings on a shared machine are not assertions.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from pathlib import Path

import structlog

from bench import audit_log, gate, scrub, verify
from bench._harness import Section, render

MODULES = (gate, scrub, audit_log, verify)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run")
    parser.add_argument("--output", type=Path, default=Path("BENCHMARKS.md"))
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    sections: list[Section] = []
    for module in MODULES:
        sections.extend(module.run(quick=args.quick))
    header = [
        "# Benchmarks",
        "",
        (
            f"Produced by `make bench` (`python -m bench.run{' --quick' if args.quick else ''}`)"
            " — rewritten on every run. Ratios are against a peer or floor measured in the"
            " same interleaved rounds; absolute times are for context only."
        ),
        "",
        (
            f"Machine: Python {platform.python_version()} on {platform.machine()},"
            f" {os.cpu_count()} cores, {platform.system()} {platform.release()}."
        ),
    ]
    text = render(sections, header=header)
    args.output.write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
