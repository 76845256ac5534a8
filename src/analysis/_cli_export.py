"""``ghost export``: captured runs as Parquet tables, one partition per run (ADR 0030).

::

    ghost export RUN.mcap... --parquet OUT_DIR

Each run (a path, a glob, or a directory of ``*.mcap`` files) is read once
and written to ``OUT_DIR/<table>/date=<run start>/run=<run key>/``
(`analysis._export.export_run`), replacing its earlier export. One line per
run on stdout: where it went, its row counts and its verification status.
A tampered or truncated run is exported too (its ``runs`` row says so):
judging is ``ghost verify``'s and ``ghost fleet verify``'s job.

Exit codes: 0 every run exported; 1 some run could not be read (missing,
not MCAP, not a ghost log), was named twice (two files with one run key:
the first is kept), or could not be written, or ``pyarrow`` is not
installed (the others are still exported); 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Final

__all__ = ["add_export_command"]

_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_PROG: Final = "ghost"
_MAX_ERROR: Final = 6_000  # as the other commands: 20 x 300 characters


def add_export_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``export`` to the ``ghost`` parser's subcommands."""
    export = commands.add_parser(
        "export",
        help="runs as Parquet tables, Hive-partitioned by date and run",
        description=(
            "Export captured runs as Parquet tables (runs, decisions, assessments, approvals;"
            " schema version in each row and each file's metadata) under OUT_DIR, partitioned"
            " by the run's start date and its run id. Re-exporting a run replaces its"
            " partition. Needs ghost-sdk[fleet]. Exit 0: every run exported; 1: a run could"
            " not be read or written; 2: usage."
        ),
    )
    export.add_argument(
        "runs", nargs="+", metavar="RUN", help="an MCAP file, a glob, or a directory of them"
    )
    export.add_argument(
        "--parquet", required=True, type=Path, metavar="OUT_DIR", help="the export's root"
    )
    export.set_defaults(handler=_export)


def _export(args: argparse.Namespace) -> int:
    from analysis._export import DuplicateRunError, ExportError, export_run
    from analysis._fleet_deps import MissingExtraError
    from analysis._fleet_verify import expand_paths
    from audit import LogFormatError

    out: Path = args.parquet
    code = _EXIT_OK
    exported: dict[str, str] = {}
    for path in expand_paths(args.runs):
        try:
            result = export_run(path, out, taken=exported)
        except MissingExtraError as exc:
            return _fail(str(exc))
        except LogFormatError as exc:
            code = _fail(f"cannot read {exc.path}: {exc.problem}")
            continue
        except DuplicateRunError as exc:
            code = _fail(
                f"{path} holds run {exc.run_key}, as {exported[exc.run_key]} does: not exported"
                " (the first is kept; `ghost fleet verify` both to see which is genuine)"
            )
            continue
        except ExportError as exc:
            return _fail(f"cannot write the export: {exc.path}: {exc.problem}")
        exported[result.run_key] = path
        rows = result.rows
        _say(
            f"{path}: {result.status.value}: {rows['decisions']} decisions,"
            f" {rows['assessments']} assessments, {rows['approvals']} approvals ->"
            f" date={result.date}/run={result.run_key}"
        )
    return code


def _say(line: str) -> None:
    from analysis._printable import printable

    sys.stdout.write(printable(line, limit=_MAX_ERROR) + "\n")
    sys.stdout.flush()


def _fail(message: str) -> int:
    from analysis._printable import printable

    print(f"{_PROG}: error: {printable(message, limit=_MAX_ERROR)}", file=sys.stderr)
    return _EXIT_FAILURE
