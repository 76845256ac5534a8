"""Opening a SQLite approval store's file (`runtime._approval_sqlite_file`) beyond the basics.

``test_approval_sqlite.py`` sorts the kinds of file a store meets. Here: the
pace of the retried switch to WAL (on a clock of the test's own), what a
file system that cannot do WAL gets, that every connection commits with
``synchronous=FULL``, that opening never makes a file and never leaves a
connection or a descriptor open when it refuses, look-alikes of a ghost
store, and the operating system's own reasons, named.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from runtime import ApprovalStoreError, SqliteApprovalStore
from runtime import _approval_sqlite_file as store_file
from runtime._approval_rows import APPLICATION_ID, SCHEMA
from runtime._approval_sqlite_file import StoreFile
from tests.runtime.test_approval_store import make_pending


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "approvals.db"


def raw(path: Path) -> sqlite3.Connection:
    """A plain SQLite connection to the file, as another program (or an attacker) has."""
    return sqlite3.connect(path, isolation_level=None)


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
    """Every connection opened from now on, in the order opened."""
    opened: list[sqlite3.Connection] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        opened.append(conn)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    return opened


def _is_closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


# --- the retried switch to WAL ---------------------------------------------------------------


class _StoppedClock:
    """`time` for the module under test: a monotonic clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.pauses: list[float] = []
        self._reads = 0

    def monotonic(self) -> float:
        self._reads += 1
        assert self._reads < 10_000, "the retries never end"
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, f"a pause of {seconds} s: the retries would spin"
        assert len(self.pauses) < 1_000, "the retries never end"
        self.pauses.append(seconds)
        self.now += seconds


def _store_in_rollback_mode(path: Path) -> sqlite3.Connection:
    """A store another ghost made but has not switched to WAL yet, held by ``raw``."""
    conn = raw(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for statement in SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO ghost_schema VALUES ('ghost-approvals', 1)")
    return conn


def test_the_switch_to_wal_pauses_from_1_ms_doubling_to_50_ms_until_the_busy_timeout(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _StoppedClock()
    monkeypatch.setattr(store_file, "time", clock)
    other = _store_in_rollback_mode(path)
    other.execute("BEGIN IMMEDIATE")  # SQLite answers the switch "busy" while this is held
    try:
        with pytest.raises(ApprovalStoreError) as caught:
            SqliteApprovalStore(path, busy_timeout_s=0.2)
    finally:
        other.execute("ROLLBACK")
        other.close()

    assert caught.value.problem == (
        "stayed locked by another connection for more than 0.2 s; try again"
    )
    # 1, 2, 4, 8, 16, 32 ms, then 50 ms each, and the last one only what is left of 0.2 s.
    assert clock.pauses[:-1] == [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.05, 0.05]
    assert clock.pauses[-1] == pytest.approx(0.2 - 0.163)
    assert clock.now == 1_000.2  # it gives up exactly at the deadline, not a pause later


def test_a_file_system_that_cannot_do_wal_is_refused(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class NoWal(sqlite3.Connection):
        """What SQLite answers where WAL is impossible: the journal mode it keeps."""

        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if sql == "PRAGMA journal_mode = WAL":
                return super().execute("SELECT 'delete'")
            return super().execute(sql, *args)

    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: real_connect(*a, **k, factory=NoWal))

    with pytest.raises(ApprovalStoreError) as caught:
        SqliteApprovalStore(path)

    assert caught.value.problem == (
        "cannot use write-ahead logging (its journal mode stays 'delete');"
        " keep the store on a local file system"
    )


# --- durability --------------------------------------------------------------------------------


def test_every_connection_commits_with_synchronous_full(
    path: Path, connections: list[sqlite3.Connection]
) -> None:
    # Per connection, not per file: a store opened later must set it again.
    with SqliteApprovalStore(path) as made, SqliteApprovalStore(path, create=False) as opened:
        made.add(make_pending())
        assert opened.get("d-1")[1] is None
        assert len(connections) == 2
        for conn in connections:
            assert conn.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL


# --- opening makes nothing, and leaves nothing open ------------------------------------------


def test_a_store_that_vanishes_between_the_check_and_the_open_is_not_made_again(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    SqliteApprovalStore(path).close()
    check = StoreFile._check_exists

    def check_then_vanish(self: StoreFile) -> None:
        check(self)
        os.remove(self.path)  # another process removed it just now

    monkeypatch.setattr(StoreFile, "_check_exists", check_then_vanish)

    with pytest.raises(ApprovalStoreError) as caught:
        SqliteApprovalStore(path, create=False)

    assert caught.value.problem.startswith("cannot be opened (check that it")
    assert not path.exists()


def test_a_refused_file_leaves_no_connection_open(
    path: Path, connections: list[sqlite3.Connection]
) -> None:
    foreign = raw(path)
    foreign.execute("CREATE TABLE notes (text TEXT)")
    foreign.close()
    connections.clear()

    with pytest.raises(ApprovalStoreError, match="another application's"):
        SqliteApprovalStore(path)

    assert len(connections) == 1
    assert _is_closed(connections[0])


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_creating_and_closing_a_store_leaves_no_descriptor_open(path: Path) -> None:
    before = sorted(os.listdir("/proc/self/fd"))

    SqliteApprovalStore(path).close()

    assert path.exists()
    assert sorted(os.listdir("/proc/self/fd")) == before


# --- look-alikes --------------------------------------------------------------------------------


@pytest.mark.parametrize("application_id", [0, 1])
def test_ghosts_tables_without_ghosts_application_id_are_another_applications(
    path: Path, application_id: int
) -> None:
    conn = raw(path)
    conn.execute(f"PRAGMA application_id = {application_id}")
    for statement in SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO ghost_schema VALUES ('ghost-approvals', 1)")
    conn.close()
    before = path.read_bytes()

    with pytest.raises(ApprovalStoreError, match="is another application's SQLite database"):
        SqliteApprovalStore(path)

    assert path.read_bytes() == before


def test_a_view_named_ghost_schema_is_not_ghosts_schema_table(path: Path) -> None:
    conn = raw(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE VIEW ghost_schema AS SELECT 'ghost-approvals' AS format, 1 AS version")
    for statement in SCHEMA[1:]:
        conn.execute(statement)
    conn.close()
    before = path.read_bytes()

    with pytest.raises(ApprovalStoreError, match="is another application's SQLite database"):
        SqliteApprovalStore(path)

    assert path.read_bytes() == before


# --- the operating system's reasons ----------------------------------------------------------


@pytest.mark.parametrize(
    ("create", "problem"),
    [(True, "cannot be created: Not a directory"), (False, "cannot be opened: Not a directory")],
)
def test_a_path_through_a_regular_file_names_the_systems_reason(
    tmp_path: Path, *, create: bool, problem: str
) -> None:
    (tmp_path / "file").write_text("not a directory\n")

    with pytest.raises(ApprovalStoreError) as caught:
        SqliteApprovalStore(tmp_path / "file" / "store.db", create=create)

    assert caught.value.problem == problem


@pytest.mark.parametrize("create", [True, False])
def test_a_link_that_points_at_itself_is_refused_naming_the_loop(
    tmp_path: Path, *, create: bool
) -> None:
    loop = tmp_path / "loop.db"
    loop.symlink_to(loop)

    with pytest.raises(ApprovalStoreError) as caught:
        SqliteApprovalStore(loop, create=create)

    assert caught.value.problem == "cannot be opened: Too many levels of symbolic links"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.db"]
