"""``ghost summary``: one run at a glance, integrity first.

::

    ghost summary PATH [--json]
    ghost summary --mcap PATH [--json]

Reads the run once (`analysis._analyze.analyze_run`) for both of its views --
``verify_run``'s integrity verdict (intact, truncated, tampered) and the
decision trace report of what the agents did -- with a progress bar on stderr
for a large file at a terminal -- and prints a `analysis._summary.RunSummary`:
drawn with rich on a terminal, plain aligned text when piped or with
``NO_COLOR`` set, or JSON with ``--json``.

Exit codes (SPEC §6): 0 the summary was printed, whatever the run's
integrity (the summary says it; judging with an exit code is ``verify``'s
job); 1 the file cannot be read (missing, not MCAP, not a ghost log); 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Final

from analysis._cli_args import add_run_argument

__all__ = ["add_summary_command"]

_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_PROG: Final = "ghost"
_MAX_ERROR: Final = 6_000  # as the other commands: 20 x 300 characters


def add_summary_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``summary`` to the ``ghost`` parser's subcommands (handler in ``handler``)."""
    summary = commands.add_parser(
        "summary",
        help="a run at a glance: integrity, verdicts, latency, denials",
        description=(
            "Print what a person reads about a run in ten seconds: its integrity (intact,"
            " truncated or tampered, as `ghost verify` decides), decisions per verdict,"
            " latency percentiles, the top rules, the most denied actions, approvals and"
            " the detectors that fired. Exit 0: printed (whatever the integrity); 1: the file"
            " cannot be read; 2: usage."
        ),
    )
    add_run_argument(summary, "the run's MCAP file")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.set_defaults(handler=_summary)


def _summary(args: argparse.Namespace) -> int:
    from analysis._analyze import analyze_run
    from analysis._cli_progress import progress_bar
    from analysis._printable import printable
    from analysis._summary import summarize, summary_document
    from audit import LogFormatError

    path: Path = args.mcap  # PATH or --mcap, resolved by the parser (analysis._cli_args)
    try:
        with progress_bar(path) as progress:
            analysis = analyze_run(path, progress=progress)
    except LogFormatError as exc:
        message = printable(f"cannot read {exc.path}: {exc.problem}", limit=_MAX_ERROR)
        print(f"{_PROG}: error: {message}", file=sys.stderr)
        return _EXIT_FAILURE
    summary = summarize(analysis.report, analysis.verification)
    if args.json:
        text = json.dumps(summary_document(summary), sort_keys=True, indent=2, ensure_ascii=False)
        sys.stdout.buffer.write((text + "\n").encode("utf-8"))
        sys.stdout.flush()
        return _EXIT_OK
    from analysis._summary_render import render_summary

    terminal = sys.stdout.isatty()
    color = terminal and not os.environ.get("NO_COLOR")
    render_summary(summary, name=str(path), file=sys.stdout, terminal=terminal, color=color)
    return _EXIT_OK
