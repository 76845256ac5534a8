"""DuckDB over an export: the four tables as views, the fleet summary's queries (ADR 0030).

`open_export` connects an in-memory DuckDB (embedded: no server, no file of
its own) and defines one view per exported table -- ``runs``,
``decisions``, ``assessments``, ``approvals`` -- over that table's Parquet
files, with the Hive partition columns ``date`` and ``run``. The files are
listed by the export's own layout (``<table>/date=*/run=*/*.parquet``) and
handed to DuckDB as a list, so no character of OUT_DIR is ever read as SQL
or as a glob.

`FLEET_QUERIES` are the fleet-level equivalents of ``ghost summary``; they
compute what the decision trace report computes, in SQL: percentiles by
nearest rank (``sorted[ceil(p * n / 100) - 1]``, as `analysis.LatencyStats`),
and an assessment joined to its decision by run and decision id, the last
one logged winning when two share an id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from analysis._export_schema import TABLES
from analysis._fleet_deps import load_extra

__all__ = ["FLEET_QUERIES", "FleetQueryError", "QueryResult", "open_export", "run_query"]


class FleetQueryError(Exception):
    """The export cannot be opened (no exported run), or DuckDB rejected a query.

    Attributes:
        problem: what is wrong, as DuckDB or the export layout says it.
        bad_sql: the query itself is wrong (a usage error), not the export.
    """

    def __init__(self, problem: str, *, bad_sql: bool) -> None:
        self.problem = problem
        self.bad_sql = bad_sql
        super().__init__(problem)


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A query's answer: its column names and rows."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def documents(self) -> list[dict[str, Any]]:
        """The rows as JSON-ready objects keyed by column name."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


FLEET_QUERIES: Final[Mapping[str, str]] = {
    "runs by status": """
        SELECT status, count(*) AS runs, sum(decision_count) AS decisions
        FROM runs GROUP BY status ORDER BY status
    """,
    "verdicts by day": """
        SELECT make_timestamp(stamp_ns // 1000)::DATE AS day, verdict, count(*) AS decisions
        FROM decisions GROUP BY day, verdict ORDER BY day, verdict
    """,
    "top denied": """
        WITH last_assessment AS (
            SELECT run, decision_id, agent, verb, resource
            FROM assessments
            QUALIFY row_number() OVER (PARTITION BY run, decision_id ORDER BY seq DESC) = 1
        )
        SELECT a.agent, a.verb, a.resource, count(*) AS denied
        FROM decisions AS d
        LEFT JOIN last_assessment AS a ON a.run = d.run AND a.decision_id = d.decision_id
        WHERE d.verdict = 'deny'
        GROUP BY a.agent, a.verb, a.resource
        ORDER BY denied DESC, a.agent NULLS LAST, a.verb NULLS LAST, a.resource NULLS LAST
        LIMIT 10
    """,
    # Percentiles by nearest rank, in integers: rank = ceil(p * n / 100) = (p * n + 99) // 100.
    "latency by policy": """
        SELECT policy_sha256, any_value(n) AS decisions, min(latency_ns) AS min_ns,
               max(CASE WHEN rank = (50 * n + 99) // 100 THEN latency_ns END) AS p50_ns,
               max(CASE WHEN rank = (90 * n + 99) // 100 THEN latency_ns END) AS p90_ns,
               max(CASE WHEN rank = (99 * n + 99) // 100 THEN latency_ns END) AS p99_ns,
               max(latency_ns) AS max_ns
        FROM (
            SELECT policy_sha256, latency_ns,
                   row_number() OVER (PARTITION BY policy_sha256 ORDER BY latency_ns) AS rank,
                   count(*) OVER (PARTITION BY policy_sha256) AS n
            FROM decisions
        )
        GROUP BY policy_sha256 ORDER BY policy_sha256 NULLS LAST
    """,
    "approvals": """
        SELECT outcome, any_value(n) AS approvals,
               max(CASE WHEN rank = (50 * n + 99) // 100 THEN wait_ns END) AS wait_p50_ns,
               max(wait_ns) AS wait_max_ns
        FROM (
            SELECT outcome, wait_ns,
                   row_number() OVER (PARTITION BY outcome ORDER BY wait_ns) AS rank,
                   count(*) OVER (PARTITION BY outcome) AS n
            FROM approvals
        )
        GROUP BY outcome ORDER BY outcome
    """,
}
"""The fleet summary: title -> its query over the export's views."""


def open_export(out_dir: str | Path) -> Any:
    """Connect an in-memory DuckDB with a view per exported table of ``out_dir``.

    Returns:
        The ``duckdb`` connection (close it when done).

    Raises:
        FleetQueryError: ``out_dir`` holds no exported run.
        analysis._fleet_deps.MissingExtraError: duckdb is not installed.
    """
    duckdb = load_extra("duckdb", "fleet")
    root = Path(out_dir)
    files = {table: _table_files(root / table) for table in TABLES}
    if not files["runs"]:
        raise FleetQueryError(
            f"{root} holds no exported run (write one with `ghost export RUN.mcap --parquet"
            f" {root}`)",
            bad_sql=False,
        )
    connection = duckdb.connect(":memory:")
    try:
        for table, paths in files.items():
            relation = connection.read_parquet(paths, hive_partitioning=True, union_by_name=True)
            relation.create_view(table)
    except duckdb.Error as exc:
        connection.close()
        raise FleetQueryError(f"cannot read the export in {root}: {exc}", bad_sql=False) from None
    return connection


def run_query(connection: Any, sql: str) -> QueryResult:
    """Run one SQL statement on an `open_export` connection.

    Raises:
        FleetQueryError: DuckDB rejected it (``bad_sql``: a parse, binder or
            catalog error, or any other error DuckDB raises for it).
    """
    duckdb = load_extra("duckdb", "fleet")
    try:
        cursor = connection.execute(sql)
    except duckdb.Error as exc:
        raise FleetQueryError(str(exc), bad_sql=True) from None
    if cursor is None:  # DuckDB's answer to a string that holds no statement
        raise FleetQueryError("the SQL holds no statement", bad_sql=True)
    try:
        description = cursor.description or ()
        rows = cursor.fetchall() if description else []
    except duckdb.Error as exc:
        raise FleetQueryError(str(exc), bad_sql=True) from None
    return QueryResult(
        columns=tuple(str(column[0]) for column in description),
        rows=tuple(tuple(row) for row in rows),
    )


def _table_files(directory: Path) -> list[str]:
    # Exactly the export's layout; anything else in the directory (a stray file, a
    # staging directory) is not the export's and is not read.
    return sorted(
        str(path)
        for path in directory.glob("date=*/run=*/*.parquet")
        if path.is_file() and not path.is_symlink()
    )
