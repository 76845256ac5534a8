"""`export_run`: one run as Parquet tables, streamed, its partition replaced whole (ADR 0030).

The run is read once (`audit.iter_run`): every record goes, as it passes, to
the verifier (`analysis._verify.verify_items`, for the ``runs`` row's
verdict) and to the table of its topic, where it is buffered and written as
a Parquet row group every `BATCH_ROWS` rows. So memory is bounded by the
batch size and the verifier's bounded state, whatever the run's size.

Where it goes (`analysis._export_schema`)::

    OUT_DIR/<table>/date=<run start, UTC>/run=<run key>/part-0.parquet

The **run key** is the run's ``run_id`` only when it is a lowercase,
hyphenated UUID (the verifier's own test); any other value -- the file is
the attacker's, and its ``run_id`` might be ``../../etc`` -- gives
``unknown-<the file's SHA-256, 32 hex digits>``. The date comes from an
integer. So no byte of the file reaches a path, and every path the export
writes is checked to stay under OUT_DIR, through no symbolic link.

**Replacing, not appending**: the four tables are written to a fresh
directory under ``OUT_DIR/_tmp`` (which no table's glob reaches); only when
all are complete is each renamed into place, after the run's previous
partitions (under any date) are renamed away and deleted. A reader sees a
table's partition either whole before or whole after; an export that fails
leaves the previous one as it was. Exports into one OUT_DIR at the same
moment (two ``ghost export`` processes, or threads) each build in a staging
directory of their own and take turns, under an exclusive lock on
``OUT_DIR/_tmp/lock`` (``flock``), only for the renames: two exports of the
same run end with one of them whole in place, never a mix or an error.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from analysis._export_rows import as_int, as_text, record_row
from analysis._export_schema import EXPORT_SCHEMA_VERSION, TABLES, Column, arrow_schema
from analysis._fleet_deps import load_extra
from analysis._run_facts import is_uuid
from analysis._trace_model import ANALYSIS_VERSION
from analysis._verify_model import RunStatus, RunVerification

if TYPE_CHECKING:
    from audit import RunItem

__all__ = [
    "BATCH_ROWS",
    "TMP_DIR",
    "DuplicateRunError",
    "ExportError",
    "ExportResult",
    "export_run",
    "run_key",
]

BATCH_ROWS: Final = 8192
"""Rows buffered per table before they are written as one Parquet row group."""

TMP_DIR: Final = "_tmp"
"""The directory under OUT_DIR where partitions are built before they are renamed in."""
LOCK_FILE: Final = "lock"
"""The file under TMP_DIR that exports lock while they rename their partitions in."""

_LISTED_PROBLEMS: Final = 20
_PART: Final = "part-0.parquet"
_SAFE_PART: Final = re.compile(
    r"(date=\d{4}-\d{2}-\d{2})|(run=[0-9a-f-]{36})|(run=unknown-[0-9a-f]{32})"
)
_TOPIC_TABLES: Final[Mapping[str, str]] = {
    "/decisions": "decisions",
    "/assessments": "assessments",
    "/approvals": "approvals",
}
_SCHEMAS: Final[Mapping[str, str]] = {
    "/run": "ghost.run/1",
    "/decisions": "ghost.decision/1",
    "/assessments": "ghost.assessment/1",
    "/approvals": "ghost.approval/1",
}


class ExportError(Exception):
    """The export's output cannot be written where it must go; the message says why.

    Attributes:
        path: the path that cannot be used.
        problem: why, as a phrase.
    """

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


class DuplicateRunError(ExportError):
    """Two files of one export claim the same run; the later one is not written.

    Attributes:
        run_key: the run key both files have.
    """

    def __init__(self, path: Path, run_key: str) -> None:
        self.run_key = run_key
        super().__init__(path, f"holds run {run_key}, which another file of this export holds")


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What `export_run` wrote for one run.

    Attributes:
        path: the MCAP file read.
        run_key: the ``run=`` partition value (`run_key`).
        date: the ``date=`` partition value (the run's start, UTC).
        rows: rows written per table (``runs`` is always 1).
        verification: `verify_run`'s verdict on the file, from the same reading.
    """

    path: Path
    run_key: str
    date: str
    rows: Mapping[str, int]
    verification: RunVerification

    @property
    def status(self) -> RunStatus:
        """The run's verification status (intact, truncated, tampered)."""
        return self.verification.status


def run_key(run_id: object, source_sha256: str) -> str:
    """The ``run=`` partition value of a run: its id if it is a UUID, else from its file's hash.

    Args:
        run_id: the ``run_id`` the file's ``/run`` record states (anything).
        source_sha256: SHA-256 hex of the file.
    """
    if is_uuid(run_id):
        return run_id
    return f"unknown-{source_sha256[:32]}"


def export_run(
    path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    batch_rows: int = BATCH_ROWS,
    taken: Collection[str] = (),
) -> ExportResult:
    """Export one captured run as Parquet tables under ``out_dir``, replacing its earlier export.

    Args:
        path: the run's MCAP file (any state: a tampered or truncated run is
            exported too, its ``runs`` row says so).
        out_dir: the export root (created if missing).
        batch_rows: rows per Parquet row group (the memory bound per table).
        taken: run keys the caller has just exported from other files: a run
            with one of them is not written (two files claim one run).

    Returns:
        What was written, and the run's verification.

    Raises:
        audit.LogFormatError: the file is missing, not MCAP, or not a ghost
            audit log (nothing is written).
        ExportError: ``out_dir`` (or a directory in it) cannot be written, or
            is a symbolic link where the export must write a directory.
        DuplicateRunError: the run's key is in ``taken`` (nothing is written).
        analysis._fleet_deps.MissingExtraError: pyarrow is not installed.
        ValueError: ``batch_rows`` is not positive.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be at least 1, not {batch_rows}")
    from analysis._analyze import run_items
    from analysis._verify import verify_items

    pa = load_extra("pyarrow", "fleet")
    pq = load_extra("pyarrow.parquet", "fleet")
    root = Path(out_dir)
    staging = _staging(root)
    try:
        tables = {
            name: _TableWriter(pa, pq, staging / name, columns, batch_rows)
            for name, columns in TABLES.items()
        }
        rows = _RowSink(tables)
        verification = verify_items(rows.feed(run_items(Path(path))))
        date = _date(rows.run_stamp if rows.run_stamp is not None else rows.first_stamp)
        key = run_key(rows.run.get("run_id"), verification.source_sha256)
        if key in taken:
            raise DuplicateRunError(Path(path), key)
        tables["runs"].add(_runs_row(rows, verification, path))
        counts = {name: writer.close() for name, writer in tables.items()}
        with _exclusive(root):
            for name in TABLES:
                _replace(root, name, date, key, staging / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ExportResult(
        path=Path(path), run_key=key, date=date, rows=counts, verification=verification
    )


class _TableWriter:
    """One table's Parquet file, written a row group at a time."""

    __slots__ = ("_batch_rows", "_buffer", "_pa", "_schema", "_writer", "count")

    def __init__(
        self, pa: Any, pq: Any, directory: Path, columns: tuple[Column, ...], batch_rows: int
    ) -> None:
        directory.mkdir(parents=True)
        self._pa = pa
        self._schema = arrow_schema(pa, columns)
        self._writer = pq.ParquetWriter(str(directory / _PART), self._schema, compression="zstd")
        self._batch_rows = batch_rows
        self._buffer: list[dict[str, object]] = []
        self.count = 0

    def add(self, row: dict[str, object]) -> None:
        self._buffer.append(row)
        if len(self._buffer) >= self._batch_rows:
            self._flush()

    @property
    def rows(self) -> int:
        """Rows taken so far, written or buffered."""
        return self.count + len(self._buffer)

    def close(self) -> int:
        """Write what is buffered and close the file (it has its schema even with no rows)."""
        self._flush()
        self._writer.close()
        return self.count

    def _flush(self) -> None:
        if not self._buffer:
            return
        batch = self._pa.RecordBatch.from_pylist(self._buffer, schema=self._schema)
        self._writer.write_batch(batch)
        self.count += len(self._buffer)
        self._buffer = []


class _RowSink:
    """Routes each record of the stream to its table, and keeps what the ``runs`` row needs."""

    __slots__ = ("first_stamp", "last_stamp", "run", "run_stamp", "tables")

    def __init__(self, tables: Mapping[str, _TableWriter]) -> None:
        self.tables = tables
        self.run: Mapping[str, Any] = {}
        self.run_stamp: int | None = None
        self.first_stamp: int | None = None
        self.last_stamp: int | None = None

    def feed(self, items: Iterable[RunItem]) -> Iterator[RunItem]:
        from audit import LoggedRecord

        first = True
        for item in items:
            if isinstance(item, LoggedRecord):
                self._take(item, first=first)
                first = False
            yield item

    def _take(self, item: Any, *, first: bool) -> None:
        record = item.record
        if record is None or record.get("schema") != _SCHEMAS.get(item.topic):
            return
        stamp = as_int(record.get("stamp_ns"))
        if stamp is not None:
            self.first_stamp = stamp if self.first_stamp is None else min(self.first_stamp, stamp)
            self.last_stamp = stamp if self.last_stamp is None else max(self.last_stamp, stamp)
        if item.topic == "/run":
            if first:  # a /run record anywhere else is tampering, not the run's identity
                self.run = record
                self.run_stamp = stamp
            return
        table = _TOPIC_TABLES.get(item.topic)
        if table is None:
            return
        run_id = self.run.get("run_id")
        row = record_row(
            item.topic,
            record,
            TABLES[table],
            run_id=as_text(run_id),
            record_sha256=item.sha256,
        )
        if row is not None:
            self.tables[table].add(row)


def _runs_row(
    rows: _RowSink, verification: RunVerification, path: str | os.PathLike[str]
) -> dict[str, object]:
    run = rows.run
    signing = run.get("signing")
    return {
        "schema_version": EXPORT_SCHEMA_VERSION,
        "run_id": as_text(run.get("run_id")),
        "host": as_text(run.get("host")),
        "pid": as_int(run.get("pid")),
        "sdk_version": as_text(run.get("sdk_version")),
        "policy_id": as_text(run.get("policy_id")),
        "policy_sha256": as_text(run.get("policy_sha256")),
        "policy_source_sha256": as_text(run.get("policy_source_sha256")),
        "durability": as_text(run.get("durability")),
        "signed": isinstance(signing, Mapping),
        "sealed": verification.sealed,
        "truncated": verification.truncated,
        "status": verification.status.value,
        "problem_count": verification.problem_count,
        "problems": [str(problem) for problem in verification.problems[:_LISTED_PROBLEMS]],
        "record_count": verification.record_count,
        "verified_prefix": verification.verified_prefix,
        "decision_count": rows.tables["decisions"].rows,
        "assessment_count": rows.tables["assessments"].rows,
        "approval_count": rows.tables["approvals"].rows,
        "first_stamp_ns": rows.first_stamp,
        "last_stamp_ns": rows.last_stamp,
        "first_stamp": rows.first_stamp,
        "last_stamp": rows.last_stamp,
        "source_sha256": verification.source_sha256,
        "source_path": as_text(os.fspath(path)),
        "analysis_version": ANALYSIS_VERSION,
    }


def _date(stamp_ns: int | None) -> str:
    """The UTC date of a stamp; 1970-01-01 for a run with no usable stamp."""
    if stamp_ns is None or stamp_ns < 0:
        stamp_ns = 0
    return datetime.fromtimestamp(stamp_ns // 1_000_000_000, tz=UTC).date().isoformat()


def _staging(root: Path) -> Path:
    try:
        # The root may be a link the operator made; inside it, the export follows none.
        root.mkdir(parents=True, exist_ok=True)
        if not root.is_dir():
            raise ExportError(root, "is not a directory")
        tmp = root / TMP_DIR
        _real_directory(tmp, create=True)
        staging = tmp / uuid.uuid4().hex
        staging.mkdir()
    except OSError as exc:
        raise ExportError(root, exc.strerror or type(exc).__name__) from None
    return staging


@contextmanager
def _exclusive(root: Path) -> Iterator[None]:
    """Hold the export root's lock: one export at a time swaps its partitions in.

    ``flock`` is released by the kernel when its holder dies, so a killed
    export never leaves the root locked.
    """
    lock = root / TMP_DIR / LOCK_FILE
    try:
        descriptor = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ExportError(lock, exc.strerror or type(exc).__name__) from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing the last descriptor releases the lock


def _replace(root: Path, table: str, date: str, key: str, built: Path) -> None:
    """Rename ``built`` into the table's partition for the run, after removing its old ones."""
    for part in (f"date={date}", f"run={key}"):
        if _SAFE_PART.fullmatch(part) is None:  # never: both are built from checked values
            raise ExportError(root, f"refusing the partition name {part!r}")
    try:
        table_dir = _real_directory(root / table, create=True)
        for old_date in sorted(table_dir.glob("date=*")):
            if old_date.is_symlink():  # not the export's: never reach through it
                continue
            old = old_date / f"run={key}"
            if old.exists() or old.is_symlink():
                trash = built.parent / f"old-{uuid.uuid4().hex}"
                os.rename(old, trash)  # renames a symbolic link itself, never its target
                if trash.is_symlink() or not trash.is_dir():
                    trash.unlink()
                else:
                    shutil.rmtree(trash)
        date_dir = _real_directory(table_dir / f"date={date}", create=True)
        os.rename(built, date_dir / f"run={key}")
    except OSError as exc:
        where = Path(exc.filename) if exc.filename else root / table
        raise ExportError(where, exc.strerror or type(exc).__name__) from None


def _real_directory(path: Path, *, create: bool) -> Path:
    """``path`` as a directory that is not a symbolic link, created if asked and missing."""
    if path.is_symlink():
        raise ExportError(path, "is a symbolic link; the export writes only real directories")
    if create and not path.exists():
        path.mkdir(parents=True, exist_ok=True)
    if not path.is_dir():
        raise ExportError(path, "is not a directory")
    return path
