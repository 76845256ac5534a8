"""``make bench``: every benchmark, side by side with its peer, rewriting BENCHMARKS.md.

Each module in `MODULES` measures its rows against a peer or floor timed in the
same interleaved rounds (`bench._harness`) and states its targets; this script
runs them all in one process, prints the result, and writes it to
BENCHMARKS.md with the command and the machine. ``--quick`` runs fewer rounds
(a smoke run; its numbers are not for BENCHMARKS.md unless nothing else is).
``--only NAME`` re-measures one module (the million-decision run takes long)
and replaces its sections in the file, each then naming the command that
produced it; the other sections are kept as they were.

Never run by ``make test``: timings on a shared machine are not assertions.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import sys
from pathlib import Path
from types import ModuleType

import structlog

from bench import (
    audit_daemon,
    audit_log,
    budget,
    cedar_backend,
    decision,
    fleet,
    gate,
    long_run,
    scrub,
    scrub_peer,
    shadow_mode,
    throughput,
    verify,
)
from bench._harness import Section, render

MODULES = (
    decision,
    cedar_backend,
    budget,
    throughput,
    gate,
    shadow_mode,
    scrub,
    scrub_peer,
    audit_log,
    audit_daemon,
    verify,
    fleet,
    long_run,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run")
    parser.add_argument("--output", type=Path, default=Path("BENCHMARKS.md"))
    parser.add_argument(
        "--only",
        action="append",
        choices=[_name(module) for module in MODULES],
        help="run only this module (repeatable); its sections replace theirs in --output",
    )
    args = parser.parse_args(argv)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    sections: list[Section] = []
    chosen = [m for m in MODULES if args.only is None or _name(m) in args.only]
    for module in chosen:
        produced = module.run(quick=args.quick)
        if args.only is not None:
            command = (
                f"python -m bench.run --only {_name(module)}{' --quick' if args.quick else ''}"
            )
            produced = [
                dataclasses.replace(section, notes=(*section.notes, f"Produced by `{command}`."))
                for section in produced
            ]
        sections.extend(produced)
    if args.only is not None and args.output.exists():
        sections = _merged(args.output.read_text(), sections)
    # With --only, the other sections keep the command that made them; each fresh one names its own.
    quick = " --quick" if args.quick and args.only is None else ""
    header = [
        "# Benchmarks",
        "",
        (
            f"Produced by `make bench` (`python -m bench.run{quick}`)"
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


def _name(module: ModuleType) -> str:
    return module.__name__.rsplit(".", 1)[-1]


def _merged(existing: str, fresh: list[Section]) -> list[Section]:
    """The sections of ``existing``, kept as written unless a fresh one has their title."""
    by_title = {section.title: section for section in fresh}
    merged: list[Section] = []
    for chunk in existing.split("\n## ")[1:]:
        title, _, body = chunk.partition("\n")
        kept = Section(title, "", (), kept=body.strip("\n"))
        merged.append(by_title.pop(title, kept))
    return merged + list(by_title.values())


if __name__ == "__main__":
    raise SystemExit(main())
