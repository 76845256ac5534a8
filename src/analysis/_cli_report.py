"""``ghost report``: one self-contained HTML page about a run, integrity first.

::

    ghost report PATH --html OUT
    ghost report --mcap PATH --html OUT      (OUT '-': standard output)

Reads the run once (`analysis._analyze.analyze_run`: the integrity verdict and
the decision trace, with a progress bar on stderr for a large file at a terminal),
computes the page's aggregates (`analysis._report_data`), renders it
(`analysis._report_html`, with plotly, the optional extra
``ghost-sdk[report]``) and writes it. One line on stderr says what was
written and whether the run is intact, truncated or tampered.

Exit codes (SPEC §6): 0 the page was written, whatever the run's integrity
(the page says it first; judging with an exit code is ``verify``'s job);
1 the run cannot be read (missing, not MCAP, not a ghost log), the output
cannot be written or is the run itself, or plotly is not installed; 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

from analysis._cli_args import add_run_argument

__all__ = ["add_report_command"]

_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_PROG: Final = "ghost"
_STDOUT: Final = "-"
_MAX_ERROR: Final = 6_000  # as the other commands: 20 x 300 characters
_INSTALL_HINT: Final = "pip install 'ghost-sdk[report]'"


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` to the ``ghost`` parser's subcommands (handler in ``handler``)."""
    report = commands.add_parser(
        "report",
        help="a run as one HTML page: integrity, charts, every decision",
        description=(
            "Write one self-contained HTML page about a run that works offline: its integrity"
            " (intact, truncated or tampered, as `ghost verify` decides) at the top, decisions"
            " over time by verdict, latency per verdict and per gate stage, approval waits,"
            " rule hit counts, and a searchable, sortable table of every decision. Needs"
            f" plotly ({_INSTALL_HINT}). Exit 0: written (whatever the integrity); 1: the run"
            " cannot be read, the output cannot be written, or plotly is missing; 2: usage."
        ),
    )
    add_run_argument(report, "the run's MCAP file")
    report.add_argument(
        "--html",
        required=True,
        metavar="OUT",
        help=(
            "where to write the page ('-': standard output); an existing file is replaced,"
            " never the run itself"
        ),
    )
    report.set_defaults(handler=_report)


def _error(message: str) -> int:
    from analysis._printable import printable

    print(f"{_PROG}: error: {printable(message, limit=_MAX_ERROR)}", file=sys.stderr)
    return _EXIT_FAILURE


def _report(args: argparse.Namespace) -> int:
    from analysis._printable import printable
    from audit import LogFormatError

    try:
        # First, so that a missing extra is said before the run is read: the module
        # imports plotly.
        from analysis._report_html import render_report_html
    except ImportError as exc:
        return _error(
            f"`ghost report` draws its charts with plotly, which cannot be imported ({exc}):"
            f" {_INSTALL_HINT}"
        )
    from analysis._analyze import analyze_run
    from analysis._cli_progress import progress_bar
    from analysis._report_data import build_report_page

    path: Path = args.mcap  # PATH or --mcap, resolved by the parser (analysis._cli_args)
    out: str = args.html
    if out != _STDOUT and _same_file(path, Path(out)):
        return _error(
            f"will not write the report over the run itself ({out}): choose another --html"
        )
    try:
        with progress_bar(path) as progress:
            analysis = analyze_run(path, progress=progress)
    except LogFormatError as exc:
        return _error(f"cannot read {exc.path}: {exc.problem}")
    verification, report = analysis.verification, analysis.report
    page = build_report_page(verification, report)
    data = render_report_html(page, name=str(path), version=_version())
    if out == _STDOUT:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        where = "standard output"
    else:
        try:
            Path(out).write_bytes(data)
        except OSError as exc:
            return _error(f"cannot write {out}: {exc.strerror or exc}")
        where = out
    status = verification.status.value.upper()
    problems = f", {verification.problem_count} problem(s)" if verification.problem_count else ""
    line = (
        f"{_PROG}: wrote the report of {path} to {where}: {report.total_decisions} decision(s);"
        f" the run is {status}{problems}"
    )
    print(printable(line, limit=_MAX_ERROR), file=sys.stderr)
    return _EXIT_OK


def _same_file(run: Path, out: Path) -> bool:
    try:
        return out.exists() and run.exists() and run.samefile(out)
    except OSError:  # unreadable: the read or the write that follows says so
        return False


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ghost-sdk")
    except PackageNotFoundError:  # a source tree that was never installed
        return ""
