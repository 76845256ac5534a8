"""``ghost export`` and ``ghost fleet summary|query``: the tables hold what the reports count."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow", reason="the fleet extra (pyarrow) is not installed")
pytest.importorskip("duckdb", reason="the fleet extra (duckdb) is not installed")

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from analysis import DecisionTraceReport, build_decision_trace_report
from analysis._cli import main
from analysis._export import LOCK_FILE, TMP_DIR, export_run, run_key
from analysis._export_schema import EXPORT_SCHEMA_VERSION, SCHEMA_VERSION_KEY, TABLES
from audit import LogFormatError
from tests.audit.mcap_tools import rewrite_mcap
from tests.e2e.test_cli import assert_one_error_line, ghost
from tests.fleet.fleet_runs import write_gate_fleet_run


@pytest.fixture(scope="module")
def exported(fleet: tuple[Path, dict[str, str]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet, exported once with the CLI (a real subprocess)."""
    directory, _ = fleet
    out = tmp_path_factory.mktemp("export")
    result = ghost("export", directory / "*.mcap", "--parquet", out, cwd=out)
    # The file that is not MCAP is named on stderr; the 49 others are exported.
    assert result.returncode == 1
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1, stderr
    assert "run-049.mcap" in stderr
    assert len(result.stdout.decode().splitlines()) == 49
    return out


def _reports(directory: Path, kinds: dict[str, str]) -> list[DecisionTraceReport]:
    return [
        build_decision_trace_report(directory / name)
        for name, kind in sorted(kinds.items())
        if kind != "unreadable"
    ]


@pytest.fixture(scope="module")
def summary(exported: Path) -> dict[str, list[dict[str, object]]]:
    """``ghost fleet summary --json`` of the export (a real subprocess)."""
    result = ghost("fleet", "summary", exported, "--json", cwd=exported)
    assert result.returncode == 0, result.stderr
    document: dict[str, list[dict[str, object]]] = json.loads(result.stdout)
    return document


def test_the_fleet_summary_counts_what_the_per_run_reports_count(
    fleet: tuple[Path, dict[str, str]], summary: dict[str, list[dict[str, object]]]
) -> None:
    directory, kinds = fleet
    reports = _reports(directory, kinds)
    verdicts: Counter[str] = Counter()
    approvals: Counter[str] = Counter()
    denied: Counter[tuple[str | None, str | None, str | None]] = Counter()
    days: Counter[tuple[str, str]] = Counter()
    for report in reports:
        verdicts.update(report.per_decision_kind_counts)
        approvals.update(report.per_approval_outcome_counts)
        for record in report.records:
            if record.decision_kind == "deny":
                denied[(record.agent, record.verb, record.resource)] += 1
            day = datetime.fromtimestamp(record.timestamp_ns // 10**9, tz=UTC).date()
            days[(day.isoformat(), record.decision_kind)] += 1

    by_day = {(row["day"], row["verdict"]): row["decisions"] for row in summary["verdicts by day"]}
    assert by_day == dict(days)
    assert sum(days.values()) == sum(verdicts.values())
    assert len({day for day, _ in days}) == 3  # the fleet spans 3 days
    assert {str(row["outcome"]): row["approvals"] for row in summary["approvals"]} == approvals
    assert {
        (row["agent"], row["verb"], row["resource"]): row["denied"] for row in summary["top denied"]
    } == dict(denied)
    statuses = {str(row["status"]): row["runs"] for row in summary["runs by status"]}
    assert statuses == {"intact": 45, "tampered": 3, "truncated": 1}
    total = sum(int(str(row["decisions"])) for row in summary["latency by policy"])
    assert total == sum(report.total_decisions for report in reports)


def test_latency_percentiles_are_nearest_rank_as_the_report_computes_them(
    fleet: tuple[Path, dict[str, str]], summary: dict[str, list[dict[str, object]]]
) -> None:
    directory, kinds = fleet
    from analysis import LatencyStats

    latencies = [
        record.latency_ns for report in _reports(directory, kinds) for record in report.records
    ]
    expected = LatencyStats.of(latencies)
    assert expected is not None

    (row,) = summary["latency by policy"]

    assert (row["min_ns"], row["p50_ns"], row["p90_ns"], row["p99_ns"], row["max_ns"]) == (
        expected.min_ns,
        expected.p50_ns,
        expected.p90_ns,
        expected.p99_ns,
        expected.max_ns,
    )


def test_pyarrow_alone_reads_the_tables(fleet: tuple[Path, dict[str, str]], exported: Path) -> None:
    directory, kinds = fleet
    reports = _reports(directory, kinds)

    decisions = ds.dataset(exported / "decisions", format="parquet", partitioning="hive")
    table = decisions.to_table()
    runs = ds.dataset(exported / "runs", format="parquet", partitioning="hive").to_table()

    assert table.num_rows == sum(report.total_decisions for report in reports)
    assert set(table.column("schema_version").to_pylist()) == {EXPORT_SCHEMA_VERSION}
    assert runs.num_rows == 49
    assert sorted(runs.column("source_sha256").to_pylist()) == sorted(
        report.source_mcap_sha256 for report in reports
    )
    one = next((exported / "decisions").rglob("*.parquet"))
    metadata = pq.read_schema(one).metadata
    assert metadata[SCHEMA_VERSION_KEY] == str(EXPORT_SCHEMA_VERSION).encode()
    # Every table's columns are the declared ones, plus the two partition columns.
    for name, columns in TABLES.items():
        schema = ds.dataset(exported / name, format="parquet", partitioning="hive").schema
        assert schema.names == [column.name for column in columns] + ["date", "run"]


def test_assessments_hold_no_more_than_the_log(
    fleet: tuple[Path, dict[str, str]], exported: Path
) -> None:
    table = ds.dataset(exported / "assessments", format="parquet", partitioning="hive").to_table()
    text = json.dumps(table.to_pylist(), default=str)

    # The scrubbed e-mail address the agent sent is in no column (the log holds only its
    # fingerprint), nor any argument value.
    assert "jane.doe@example.com" not in text
    assert "refund policy" not in text
    assert "email" in text  # the detector's name, as the log records it


def test_re_exporting_a_run_replaces_its_partition(tmp_path: Path) -> None:
    run = write_gate_fleet_run(tmp_path / "run.mcap", 0, every_action=True)
    out = tmp_path / "out"
    first = export_run(run, out)
    before = {path: path.read_bytes() for path in out.rglob("*.parquet")}

    again = export_run(run, out, batch_rows=2)

    after = sorted(out.rglob("*.parquet"))
    assert after == sorted(before)  # the same partitions, one file each, nothing added
    assert again.rows == first.rows
    for path in after:
        assert (
            pq.read_table(path).to_pylist()
            == pq.read_table(_as_bytes_file(before[path], tmp_path)).to_pylist()
        )
    assert [p.name for p in (out / TMP_DIR).iterdir()] == [LOCK_FILE]  # no staging left behind
    # Streamed: two rows per row group.
    decisions = next((out / "decisions").rglob("*.parquet"))
    assert pq.ParquetFile(decisions).metadata.num_row_groups == -(-first.rows["decisions"] // 2)


def _as_bytes_file(data: bytes, directory: Path) -> Path:
    path = directory / f"copy-{len(list(directory.glob('copy-*')))}.parquet"
    path.write_bytes(data)
    return path


def test_a_crafted_run_id_never_reaches_a_path(tmp_path: Path) -> None:
    honest = write_gate_fleet_run(tmp_path / "honest.mcap", 0)
    crafted = tmp_path / "crafted.mcap"

    def hostile_id(topic: str, data: bytes) -> bytes:
        if topic != "/run":
            return data
        record = json.loads(data)
        record["run_id"] = "../../../escaped/run"
        return json.dumps(record).encode()

    rewrite_mcap(honest, crafted, hostile_id)
    out = tmp_path / "deep" / "out"

    result = export_run(crafted, out)

    assert result.run_key == run_key("../../../escaped/run", result.verification.source_sha256)
    assert result.run_key.startswith("unknown-")
    assert not (tmp_path / "escaped").exists()
    assert not (tmp_path / "deep" / "escaped").exists()
    written = [path.resolve() for path in tmp_path.rglob("*") if path.is_file()]
    assert all(path.is_relative_to(out.resolve()) for path in written if path.suffix == ".parquet")
    runs = pq.read_table(next((out / "runs").rglob("*.parquet"))).to_pylist()
    assert runs[0]["run_id"] == "../../../escaped/run"  # kept as data, flagged as tampered
    assert runs[0]["status"] == "tampered"


def test_a_symbolic_link_inside_the_export_is_refused(tmp_path: Path) -> None:
    run = write_gate_fleet_run(tmp_path / "run.mcap", 0)
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, out / "decisions")

    result = ghost("export", run, "--parquet", out, cwd=tmp_path)

    assert result.returncode == 1
    assert "symbolic link" in result.stderr.decode()
    assert list(elsewhere.iterdir()) == []


def test_a_directory_named_like_a_run_or_a_partition_is_not_read(tmp_path: Path) -> None:
    trap = tmp_path / "date=2026-01-01" / "run=x.mcap"
    trap.mkdir(parents=True)
    with pytest.raises(LogFormatError):
        export_run(trap, tmp_path / "out")
    assert not list((tmp_path / "out").rglob("*.parquet"))


def test_bad_sql_is_a_usage_error_with_duckdb_s_message(exported: Path) -> None:
    result = ghost("fleet", "query", exported, "selec 1", cwd=exported)

    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr
    assert stderr.startswith("ghost: error: SQL: Parser Error: ")
    assert stderr.count("\n") == 1, stderr  # DuckDB's multi-line message, on one line
    assert result.stdout == b""


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT nope FROM decisions",
        "SELECT * FROM no_such_table",
        "",
        "SELECT 1; SELECT",
        " -- only a comment",
    ],
)
def test_any_sql_duckdb_rejects_exits_2(
    exported: Path, sql: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fleet", "query", str(exported), sql]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("ghost: error: SQL: ")
    assert captured.out == ""


def test_query_answers_sql_over_the_views(exported: Path) -> None:
    result = ghost(
        "fleet",
        "query",
        exported,
        "SELECT count(*) AS runs FROM runs WHERE status = 'tampered'",
        "--json",
        cwd=exported,
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"runs": 3}]


def test_an_empty_directory_is_no_export(tmp_path: Path) -> None:
    result = ghost("fleet", "summary", tmp_path, cwd=tmp_path)

    assert_one_error_line(result, "holds no exported run")
    assert result.returncode == 1


def test_a_missing_extra_is_named(tmp_path: Path) -> None:
    # A pyarrow that cannot be imported, first on the path: as if the extra were not installed.
    fake = tmp_path / "fake" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    run = write_gate_fleet_run(tmp_path / "run.mcap", 0)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(fake.parent), str(Path.cwd())))}

    result = subprocess.run(
        [sys.executable, "-m", "analysis", "export", str(run), "--parquet", str(tmp_path / "o")],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )

    assert result.returncode == 1
    assert "ghost-sdk[fleet]" in result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()


def _waits_for_flock(pid: int, lock: Path) -> bool:
    """Whether process ``pid`` is blocked waiting for an flock on ``lock`` (/proc/locks)."""
    inode = lock.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        # A waiter's line reads "1: -> FLOCK ADVISORY WRITE <pid> <maj:min:inode> 0 EOF".
        if "->" in fields and "FLOCK" in fields:
            rest = fields[fields.index("->") + 1 :]
            if rest[3] == str(pid) and rest[4].rsplit(":", 1)[-1] == str(inode):
                return True
    return False


def test_an_export_swaps_its_partitions_in_only_under_the_root_s_lock(tmp_path: Path) -> None:
    import fcntl
    import time

    run = write_gate_fleet_run(tmp_path / "run.mcap", 0)
    out = tmp_path / "out"
    (out / TMP_DIR).mkdir(parents=True)
    lock = out / TMP_DIR / LOCK_FILE
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        exporter = subprocess.Popen(
            [sys.executable, "-m", "analysis", "export", str(run), "--parquet", str(out)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120  # a bound on a slow machine, not a timing claim
        while not _waits_for_flock(exporter.pid, lock):
            assert exporter.poll() is None, exporter.communicate()
            assert time.monotonic() < deadline, "the export never reached the lock"
            time.sleep(0.05)
        # Built, waiting: nothing of it is in place while another export holds the lock.
        assert not (out / "decisions").exists()
        assert list((out / TMP_DIR).glob("*/decisions")) != []
    _, stderr = exporter.communicate(timeout=120)
    assert exporter.returncode == 0, stderr.decode()
    assert len(list((out / "decisions").rglob("*.parquet"))) == 1


def test_two_processes_exporting_one_run_at_once_leave_it_whole(tmp_path: Path) -> None:
    run = write_gate_fleet_run(tmp_path / "run.mcap", 0, every_action=True)
    out = tmp_path / "out"
    script = (
        "import sys; from analysis._export import export_run\n"
        "for _ in range(6): export_run(sys.argv[1], sys.argv[2])\n"
    )
    exporters = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(run), str(out)],
            cwd=Path.cwd(),
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for exporter in exporters:
        _, stderr = exporter.communicate(timeout=300)
        assert exporter.returncode == 0, stderr.decode()
    for table in TABLES:
        assert len(list((out / table).rglob("*.parquet"))) == 1, table
    assert [p.name for p in (out / TMP_DIR).iterdir()] == [LOCK_FILE]
    expected = export_run(run, tmp_path / "alone")
    for table in TABLES:
        got = ds.dataset(out / table, partitioning="hive").to_table().num_rows
        assert got == expected.rows[table], table
