"""``ghost fleet``: many runs -- ``verify`` them in parallel, ``query`` and ``summary`` an export.

::

    ghost fleet verify PATHS_OR_GLOBS... [--engine local|ray] [--workers N]
                       [--address ADDR] [--connect-timeout-s S] [--json OUT]
    ghost fleet query OUT_DIR "SQL" [--json]
    ghost fleet summary OUT_DIR [--json]

``verify`` runs `verify_run` on every file (`analysis._fleet_verify`): for
each failing run its problems and its summary line, then one line of
counts. Exit 0 only when every run is intact and sealed; else 3 if any is
tampered, else 4 if any is truncated, else 1 (a file that cannot be read,
as ``ghost verify`` exits for it alone); 2 usage (no file named, bad
``--workers``, an address that is no Ray address); 1 also when ``ray`` is
asked for and not installed or the cluster cannot be reached (a ``HOST:PORT``
address is probed first, so an unreachable one fails within
``--connect-timeout-s`` instead of after Ray's own minutes of retries).

``query`` and ``summary`` open the export with DuckDB
(`analysis._fleet_sql`): ``query`` runs the SQL given over the views
``runs``, ``decisions``, ``assessments``, ``approvals``; ``summary`` runs
`FLEET_QUERIES`. Exit 0 answered; 2 the SQL is wrong (DuckDB's message, on
one line); 1 the export holds no run or cannot be read, or duckdb is not
installed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from analysis._fleet_verify import CONNECT_TIMEOUT_S

__all__ = ["add_fleet_command"]

_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_EXIT_USAGE: Final = 2
_PROG: Final = "ghost"
_MAX_ERROR: Final = 6_000  # as the other commands: 20 x 300 characters


def add_fleet_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``fleet`` (``verify``, ``query``, ``summary``) to the ``ghost`` parser's subcommands."""
    fleet = commands.add_parser(
        "fleet",
        help="many runs: verify in parallel, SQL over an export",
        description="Work on many runs at once: verify files, query a Parquet export.",
    )
    actions = fleet.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)

    verify = actions.add_parser(
        "verify",
        help="verify many runs in parallel (a process pool or a Ray cluster)",
        description=(
            "Run `ghost verify`'s checks on every run named (paths, globs, directories of"
            " *.mcap), in parallel, and print each failing run's problems and a fleet summary."
            " Exit 0: every run intact and sealed; 3: any tampered; else 4: any truncated;"
            " else 1: a file cannot be read; 2: usage."
        ),
    )
    verify.add_argument("paths", nargs="+", metavar="PATH_OR_GLOB", help="runs to verify")
    verify.add_argument("--engine", choices=("local", "ray"), default="local")
    verify.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="local: processes to use (default: the CPU count; 1: no pool)",
    )
    verify.add_argument(
        "--address",
        metavar="ADDR",
        help="ray: the cluster to join (ray.init(address=...): auto, HOST:PORT, ray://HOST:10001)",
    )
    verify.add_argument(
        "--connect-timeout-s",
        type=float,
        default=CONNECT_TIMEOUT_S,
        metavar="S",
        help=(
            "ray: how long a HOST:PORT address may take to accept a connection before"
            f" the cluster counts as unreachable (exit 1; default {CONNECT_TIMEOUT_S:g})"
        ),
    )
    verify.add_argument(
        "--json", type=Path, metavar="OUT", help="also write every run's result as JSON to OUT"
    )
    verify.set_defaults(handler=_verify, fleet_parser=verify)

    query = actions.add_parser(
        "query",
        help="SQL over an export (DuckDB, embedded)",
        description=(
            "Run one SQL statement with DuckDB over the export in OUT_DIR: the views runs,"
            " decisions, assessments and approvals, with the partition columns date and run."
            " Exit 0: answered; 2: DuckDB rejected the SQL; 1: no export there."
        ),
    )
    query.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="the export's root")
    query.add_argument("sql", metavar="SQL", help="the statement")
    query.add_argument("--json", action="store_true", help="print the rows as JSON")
    query.set_defaults(handler=_query)

    summary = actions.add_parser(
        "summary",
        help="a fleet at a glance: verdicts, denials, latency, approvals",
        description=(
            "Summarize the export in OUT_DIR with DuckDB: runs by verification status, verdicts"
            " by day, the most denied (agent, verb, resource), latency percentiles by policy"
            " hash, approvals by outcome. Exit 0: printed; 1: no export there."
        ),
    )
    summary.add_argument("out_dir", type=Path, metavar="OUT_DIR", help="the export's root")
    summary.add_argument("--json", action="store_true", help="print the summary as JSON")
    summary.set_defaults(handler=_summary)


# --- verify ----------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    from analysis._fleet_deps import MissingExtraError
    from analysis._fleet_verify import expand_paths, verify_fleet

    parser: argparse.ArgumentParser = args.fleet_parser
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be at least 1, not {args.workers}")
    if args.address is not None and args.engine != "ray":
        parser.error("--address is for --engine ray")
    timeout_s = args.connect_timeout_s
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        parser.error(f"--connect-timeout-s must be a positive number of seconds, not {timeout_s}")
    paths = expand_paths(args.paths)
    try:
        fleet = verify_fleet(
            paths,
            engine=args.engine,
            workers=args.workers,
            address=args.address,
            connect_timeout_s=timeout_s,
        )
    except MissingExtraError as exc:
        return _fail(str(exc))
    except ValueError as exc:  # an address that is no Ray address
        parser.error(str(exc))
    except (ConnectionError, RuntimeError) as exc:  # ray.init: no cluster at that address
        return _fail(f"cannot use the Ray cluster: {type(exc).__name__}: {exc}")
    lines: list[str] = []
    for run in fleet.runs:
        if run.exit_code == _EXIT_OK:
            continue
        lines.extend(f"problem: {run.path}: {problem}" for problem in run.problems)
        unlisted = run.problem_count - len(run.problems)
        if unlisted > 0:
            lines.append(f"problem: {run.path}: ... and {unlisted} more (ghost verify lists them)")
        lines.append(f"{run.path}: {run.summary}")
    lines.append(fleet.summary)
    _write_lines(lines)
    if args.json is not None:
        text = json.dumps(fleet.document(), sort_keys=True, indent=2, ensure_ascii=False)
        try:
            args.json.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            return _fail(f"cannot write {args.json}: {exc.strerror or type(exc).__name__}")
    return fleet.exit_code


# --- query, summary --------------------------------------------------------------------------


def _query(args: argparse.Namespace) -> int:
    from analysis._fleet_deps import MissingExtraError
    from analysis._fleet_sql import FleetQueryError, open_export, run_query

    try:
        connection = open_export(args.out_dir)
    except (MissingExtraError, FleetQueryError) as exc:
        return _fail(str(exc))
    try:
        result = run_query(connection, args.sql)
    except FleetQueryError as exc:
        _error(f"SQL: {exc.problem}")
        return _EXIT_USAGE
    finally:
        connection.close()
    if args.json:
        _write_json(result.documents())
    else:
        _write_lines(_table(result.columns, result.rows))
    return _EXIT_OK


def _summary(args: argparse.Namespace) -> int:
    from analysis._fleet_deps import MissingExtraError
    from analysis._fleet_sql import FLEET_QUERIES, FleetQueryError, open_export, run_query

    try:
        connection = open_export(args.out_dir)
    except (MissingExtraError, FleetQueryError) as exc:
        return _fail(str(exc))
    try:
        results = {title: run_query(connection, sql) for title, sql in FLEET_QUERIES.items()}
    except FleetQueryError as exc:  # never with the export's own tables: a damaged file
        return _fail(f"cannot summarize {args.out_dir}: {exc.problem}")
    finally:
        connection.close()
    if args.json:
        _write_json({title: result.documents() for title, result in results.items()})
        return _EXIT_OK
    lines: list[str] = []
    for title, result in results.items():
        lines.extend(("", title) if lines else (title,))
        lines.extend(_table(result.columns, result.rows) if result.rows else ["  (none)"])
    _write_lines(lines)
    return _EXIT_OK


# --- output ----------------------------------------------------------------------------------


def _table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Aligned columns, every cell made printable (cells come from files anyone may write)."""
    from analysis._printable import printable

    cells = [[printable(str(value), limit=200) for value in columns]]
    cells.extend(
        [printable("" if value is None else str(value), limit=200) for value in row] for row in rows
    )
    widths = [max(len(row[index]) for row in cells) for index in range(len(columns))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in cells
    ]


def _write_json(document: object) -> None:
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, default=str)
    sys.stdout.buffer.write((text + "\n").encode("utf-8", "backslashreplace"))
    sys.stdout.flush()


def _write_lines(lines: Sequence[str]) -> None:
    from analysis._printable import printable

    data = "".join(printable(line, limit=_MAX_ERROR) + "\n" for line in lines)
    sys.stdout.buffer.write(data.encode("utf-8"))
    sys.stdout.flush()


def _error(message: str) -> None:
    from analysis._printable import printable

    print(f"{_PROG}: error: {printable(message, limit=_MAX_ERROR)}", file=sys.stderr)


def _fail(message: str) -> int:
    _error(message)
    return _EXIT_FAILURE
