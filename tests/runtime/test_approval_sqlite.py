"""`SqliteApprovalStore` beyond the protocol: its file, what it refuses to open, locks, damage."""

from __future__ import annotations

import dataclasses
import logging
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime import (
    ApprovalError,
    ApprovalStoreError,
    PendingApproval,
    Resolution,
    SqliteApprovalStore,
)
from runtime._approval_rows import APPLICATION_ID, SCHEMA, SCHEMA_VERSION
from tests.forked import problem_in_a_forked_child
from tests.runtime.test_approval_store import make_pending


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "approvals.db"


@pytest.fixture
def store(path: Path) -> Iterator[SqliteApprovalStore]:
    with SqliteApprovalStore(path) as opened:
        yield opened


def raw(path: Path) -> sqlite3.Connection:
    """A plain SQLite connection to the file, as another program (or an attacker) has."""
    return sqlite3.connect(path, isolation_level=None)


# --- the file ----------------------------------------------------------------------------------


def test_a_new_store_and_its_wal_files_are_private(store: SqliteApprovalStore, path: Path) -> None:
    store.add(make_pending())  # a write: the WAL and its index exist now

    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        assert stat.S_IMODE(name.stat().st_mode) == 0o600, name


def test_an_existing_files_mode_is_left_alone(path: Path) -> None:
    path.touch()
    path.chmod(0o640)

    SqliteApprovalStore(path).close()

    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_the_file_is_in_wal_mode_and_says_it_is_ghosts(
    store: SqliteApprovalStore, path: Path
) -> None:
    connection = raw(path)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert connection.execute("PRAGMA application_id").fetchone() == (0x47484150,)
        assert connection.execute("SELECT format, version FROM ghost_schema").fetchall() == [
            ("ghost-approvals", SCHEMA_VERSION)
        ]
    finally:
        connection.close()


def test_the_store_keeps_the_fields_of_an_approval_and_nothing_more(
    store: SqliteApprovalStore, path: Path
) -> None:
    # Nothing raw of the arguments: the columns are the records' fields, plus the order
    # of resolutions and the address of their audit record.
    connection = raw(path)
    try:
        approvals = [row[1] for row in connection.execute("PRAGMA table_info(approvals)")]
        resolutions = [row[1] for row in connection.execute("PRAGMA table_info(resolutions)")]
    finally:
        connection.close()
    assert approvals == [field.name for field in dataclasses.fields(PendingApproval)]
    assert set(resolutions) == {f.name for f in dataclasses.fields(Resolution)} | {
        "seq",
        "recorder",
        "claimed_until_ns",
        "approval_sha256",
        "wait_ns",
        "executed",
    }


def test_mark_recorded_keeps_the_records_address(store: SqliteApprovalStore, path: Path) -> None:
    store.add(make_pending())
    store.resolve(Resolution("d-1", "approved", "alice", 1_500))

    store.mark_recorded("d-1", "f" * 64, 7)

    connection = raw(path)
    try:
        rows = connection.execute(
            "SELECT decision_id, approval_sha256, wait_ns FROM resolutions"
        ).fetchall()
    finally:
        connection.close()
    assert rows == [("d-1", "f" * 64, "7")]


def test_a_second_store_on_the_file_sees_every_change_at_once(
    store: SqliteApprovalStore, path: Path
) -> None:
    with SqliteApprovalStore(path, create=False) as other:
        store.add(make_pending("a", created_ns=2))
        assert other.pending() == [make_pending("a", created_ns=2)]
        other.add(make_pending("b", created_ns=1))
        assert [p.decision_id for p in store.pending()] == ["b", "a"]
        other.resolve(Resolution("a", "approved", "alice", 1_500))
        assert store.get("a")[1] == Resolution("a", "approved", "alice", 1_500)
        with pytest.raises(ApprovalError, match=r"already resolved \(approved by 'alice'\)"):
            store.resolve(Resolution("a", "rejected", "bob", 1_501))
        store.mark_recorded("a", "f" * 64, 7)
        assert other.unrecorded() == []


def test_a_restart_finds_pending_resolved_and_unrecorded_as_they_were(path: Path) -> None:
    with SqliteApprovalStore(path) as before:
        for decision_id in ("a", "b", "c"):
            before.add(make_pending(decision_id))
        before.resolve(Resolution("c", "rejected", "bob", 1_500))
        before.resolve(Resolution("a", "approved", "alice", 1_600))
        before.mark_recorded("c", "f" * 64, 7)

    with SqliteApprovalStore(path) as after:
        assert [p.decision_id for p in after.pending()] == ["b"]
        assert [(p.decision_id, r.outcome) for p, r in after.unrecorded()] == [("a", "approved")]
        assert after.get("c")[1] == Resolution("c", "rejected", "bob", 1_500)


def test_creating_a_store_is_logged_and_opening_one_is_not(
    path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ghost.approvals"):
        SqliteApprovalStore(path).close()
        SqliteApprovalStore(path).close()
        SqliteApprovalStore(path, create=False).close()

    assert [record.getMessage() for record in caplog.records] == ["ghost.approval_store_created"]
    assert caplog.records[0].path == str(path)  # type: ignore[attr-defined]


def test_a_store_made_by_another_creator_while_this_one_waited_is_used_as_is(
    path: Path,
) -> None:
    # Another process holds the write lock on the empty file and makes the store; this
    # one found the file empty, waits for the lock, and must not make it a second time.
    path.touch()
    other = raw(path)
    other.execute("BEGIN IMMEDIATE")
    opened: list[object] = []

    def open_store() -> None:
        try:
            with SqliteApprovalStore(path, busy_timeout_s=60) as store:
                opened.append(store.pending())
        except ApprovalError as exc:
            opened.append(exc)

    thread = threading.Thread(target=open_store)
    thread.start()
    threading.Event().wait(0.3)  # let it find the file empty and wait for the lock
    other.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for statement in SCHEMA:
        other.execute(statement)
    other.execute("INSERT INTO ghost_schema VALUES ('ghost-approvals', 1)")
    other.execute(
        "INSERT INTO approvals VALUES ('d-0', 'a', NULL, 'x', 'v', 'r', 'why', NULL,"
        " 'allow', 'b', 'c', NULL, '1', '2')"
    )
    other.execute("COMMIT")
    other.close()
    thread.join(timeout=60)

    assert len(opened) == 1
    assert not isinstance(opened[0], BaseException), opened[0]
    assert [p.decision_id for p in opened[0]] == ["d-0"]  # type: ignore[attr-defined]


def test_a_store_born_between_two_statements_of_the_inspection_is_not_called_foreign(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The race a fresh-clone CI run hit: another process commits the new store after this
    # one read the application id (still 0) and before it listed the schema objects.
    # Read in one snapshot, the inspection sees the file either empty or made, never half.
    path.touch()
    other = raw(path)
    other.execute("PRAGMA busy_timeout = 0")
    other.execute("BEGIN IMMEDIATE")
    other.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for statement in SCHEMA:
        other.execute(statement)
    other.execute("INSERT INTO ghost_schema VALUES ('ghost-approvals', 1)")
    commits: list[str] = []

    def commit_the_other(statement: str) -> None:
        if statement.startswith("PRAGMA user_version") and not commits:
            try:
                other.execute("COMMIT")
                commits.append("committed")
            except sqlite3.OperationalError:  # our snapshot holds the file: it must wait
                other.execute("ROLLBACK")
                commits.append("waited")

    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(commit_the_other)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    with SqliteApprovalStore(path) as store:
        assert store.pending() == []
    other.close()
    assert commits == ["waited"]
    check = raw(path)
    assert check.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
    assert check.execute("SELECT format, version FROM ghost_schema").fetchall() == [
        ("ghost-approvals", SCHEMA_VERSION)
    ]
    check.close()


def _store_in_rollback_mode(path: Path) -> sqlite3.Connection:
    """A store another ghost made but has not switched to WAL yet, held by ``raw``."""
    conn = raw(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for statement in SCHEMA:
        conn.execute(statement)
    conn.execute("INSERT INTO ghost_schema VALUES ('ghost-approvals', 1)")
    return conn


def test_the_switch_to_wal_waits_for_a_lock_sqlite_would_not_wait_for(path: Path) -> None:
    # Several processes opening a just-made store: SQLite answers the switch to WAL with
    # "busy" at once, without its busy handler. The store waits, as busy_timeout_s says.
    other = _store_in_rollback_mode(path)
    other.execute("BEGIN IMMEDIATE")
    opened: list[object] = []

    def open_store() -> None:
        try:
            with SqliteApprovalStore(path, busy_timeout_s=60) as store:
                opened.append(store.pending())
        except ApprovalError as exc:
            opened.append(exc)

    thread = threading.Thread(target=open_store)
    thread.start()
    threading.Event().wait(0.3)
    other.execute("ROLLBACK")
    other.close()
    thread.join(timeout=60)

    assert opened == [[]]
    check = raw(path)
    assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    check.close()


def test_the_switch_to_wal_gives_up_after_the_busy_timeout(path: Path) -> None:
    other = _store_in_rollback_mode(path)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(ApprovalStoreError, match=r"stayed locked .* more than 0\.2 s"):
            SqliteApprovalStore(path, busy_timeout_s=0.2)
    finally:
        other.execute("ROLLBACK")
        other.close()
    check = raw(path)
    assert check.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    check.close()


# --- what it refuses to open -----------------------------------------------------------------


def test_a_missing_file_is_refused_without_create(path: Path) -> None:
    with pytest.raises(ApprovalStoreError, match="does not exist") as caught:
        SqliteApprovalStore(path, create=False)

    assert caught.value.path == str(path)
    assert caught.value.problem == "does not exist"
    assert str(caught.value) == f"approval store {path}: does not exist"
    assert not path.exists()


@pytest.mark.parametrize("create", [True, False])
def test_a_directory_is_refused(tmp_path: Path, *, create: bool) -> None:
    with pytest.raises(ApprovalStoreError, match="is a directory"):
        SqliteApprovalStore(tmp_path, create=create)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX-only")
@pytest.mark.parametrize("create", [True, False])
def test_a_named_pipe_is_refused_without_opening_it(tmp_path: Path, *, create: bool) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    with pytest.raises(ApprovalStoreError, match="is not a regular file"):
        SqliteApprovalStore(fifo, create=create)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.parametrize("create", [True, False])
def test_a_device_is_refused(*, create: bool) -> None:
    if not Path(os.devnull).exists() or os.devnull != "/dev/null":
        pytest.skip("needs /dev/null")
    with pytest.raises(ApprovalStoreError, match="is not a regular file"):
        SqliteApprovalStore(os.devnull, create=create)
    assert not Path("/dev/null-journal").exists()
    assert not Path("/dev/null-wal").exists()


def test_a_link_to_a_store_opens_the_store(path: Path, tmp_path: Path) -> None:
    with SqliteApprovalStore(path) as store:
        store.add(make_pending())
    link = tmp_path / "link.db"
    link.symlink_to(path)

    with SqliteApprovalStore(link, create=False) as linked:
        assert linked.get("d-1")[0] == make_pending()


@pytest.mark.parametrize("create", [True, False])
def test_a_path_with_a_nul_is_a_store_error(tmp_path: Path, *, create: bool) -> None:
    with pytest.raises(ApprovalStoreError, match="is not a valid file name"):
        SqliteApprovalStore(f"{tmp_path}/a\x00b.db", create=create)


def test_a_file_in_a_missing_directory_cannot_be_created(tmp_path: Path) -> None:
    with pytest.raises(ApprovalStoreError, match="cannot be created: No such file"):
        SqliteApprovalStore(tmp_path / "nowhere" / "store.db")


def test_an_empty_file_is_refused_without_create_and_made_a_store_with(path: Path) -> None:
    path.touch()
    with pytest.raises(ApprovalStoreError, match="is empty, not a ghost approval store"):
        SqliteApprovalStore(path, create=False)
    assert path.stat().st_size == 0

    with SqliteApprovalStore(path) as made:
        made.add(make_pending())
    with SqliteApprovalStore(path, create=False) as reopened:
        assert reopened.get("d-1")[0] == make_pending()


@pytest.mark.parametrize(
    "content",
    [
        b"not a database at all\n" * 200,
        b"SQLite format 3\x00" + b"\xff" * 4000,  # the magic, then garbage
        b"\x00" * 8192,
    ],
)
@pytest.mark.parametrize("create", [True, False])
def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(
    path: Path, content: bytes, *, create: bool
) -> None:
    path.write_bytes(content)

    with pytest.raises(ApprovalStoreError, match="is not a SQLite database, or is damaged"):
        SqliteApprovalStore(path, create=create)

    assert path.read_bytes() == content
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def _write_foreign(path: Path, *, application_id: int = 0) -> None:
    connection = raw(path)
    try:
        connection.execute(f"PRAGMA application_id = {application_id}")
        connection.execute("CREATE TABLE notes (text TEXT)")
        connection.execute("INSERT INTO notes VALUES ('keep me')")
    finally:
        connection.close()


@pytest.mark.parametrize("application_id", [0, 1, 0x47484151])
def test_another_applications_database_is_refused_and_left_exactly_as_it_was(
    path: Path, application_id: int
) -> None:
    _write_foreign(path, application_id=application_id)
    before = path.read_bytes()

    with pytest.raises(ApprovalStoreError, match="is another application's SQLite database"):
        SqliteApprovalStore(path)

    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_database_with_ghosts_id_but_no_schema_table_is_foreign(path: Path) -> None:
    _write_foreign(path, application_id=0x47484150)

    with pytest.raises(ApprovalStoreError, match="another application's"):
        SqliteApprovalStore(path)


@pytest.mark.parametrize(
    "statement",
    [
        "PRAGMA application_id = 7",
        "PRAGMA user_version = 3",
        "CREATE VIEW answer AS SELECT 42",
        "CREATE TABLE IF NOT EXISTS t (x)",
    ],
)
def test_a_database_with_no_tables_but_a_mark_of_its_own_is_not_taken_over(
    path: Path, statement: str
) -> None:
    connection = raw(path)
    connection.execute(statement)
    connection.close()
    before = path.read_bytes()

    with pytest.raises(ApprovalStoreError, match="another application's"):
        SqliteApprovalStore(path)

    assert path.read_bytes() == before


def _tamper(path: Path, *statements: str) -> None:
    SqliteApprovalStore(path).close()
    connection = raw(path)
    try:
        for statement in statements:
            connection.execute(statement)
    finally:
        connection.close()


@pytest.mark.parametrize(
    ("statement", "version"),
    [("UPDATE ghost_schema SET version = 2", 2), ("UPDATE ghost_schema SET version = 99", 99)],
)
def test_a_store_of_a_newer_schema_is_refused_naming_both_versions(
    path: Path, statement: str, version: int
) -> None:
    assert version > SCHEMA_VERSION
    _tamper(path, statement)

    with pytest.raises(ApprovalStoreError) as caught:
        SqliteApprovalStore(path)

    assert caught.value.problem == (
        f"was written by a newer ghost (schema version {version}; this one reads"
        f" {SCHEMA_VERSION}): upgrade ghost-sdk to use it"
    )


@pytest.mark.parametrize(
    ("statements", "problem"),
    [
        (
            ["UPDATE ghost_schema SET version = 0"],
            "its schema version 0 was never written by ghost",
        ),
        (["UPDATE ghost_schema SET version = -1"], "schema version -1 was never"),
        (["UPDATE ghost_schema SET version = 'one'"], "schema table does not name"),
        (["UPDATE ghost_schema SET version = 1.5"], "schema table does not name"),
        (["UPDATE ghost_schema SET format = 'ghost-counters'"], "schema table does not name"),
        (["DELETE FROM ghost_schema"], "schema table does not name"),
        (["INSERT INTO ghost_schema VALUES ('ghost-approvals', 1)"], "schema table does not name"),
        (["DROP TABLE resolutions"], "its tables are missing"),
        (["DROP TABLE approvals"], "its tables are missing"),
    ],
)
def test_a_damaged_schema_is_refused(path: Path, statements: list[str], problem: str) -> None:
    _tamper(path, *statements)

    with pytest.raises(ApprovalStoreError, match="is damaged: ") as caught:
        SqliteApprovalStore(path)

    assert problem in caught.value.problem


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE approvals SET held_verdict = 'deny'",
        "UPDATE approvals SET held_verdict = 'maybe'",
        "UPDATE approvals SET created_ns = '12x'",
        "UPDATE approvals SET created_ns = ' 12'",
        "UPDATE approvals SET created_ns = '012'",
        "UPDATE approvals SET created_ns = '+12'",
        "UPDATE approvals SET created_ns = '1_2'",
        "UPDATE approvals SET created_ns = ''",
        "UPDATE approvals SET created_ns = X'3132'",
        "UPDATE approvals SET expires_ns = '1'",  # before created_ns
        "UPDATE approvals SET agent = X'00'",
        "UPDATE approvals SET run_id = X'37'",
        "UPDATE approvals SET approvers = '{\"alice\": 1}'",
        "UPDATE approvals SET approvers = '[1]'",
        "UPDATE approvals SET approvers = 'alice'",
        "UPDATE approvals SET approvers = '" + "[" * 100_000 + "'",
        "UPDATE approvals SET approvers = X'5b5d'",
    ],
)
def test_a_damaged_approval_row_is_a_store_error_not_a_crash(path: Path, statement: str) -> None:
    with SqliteApprovalStore(path) as store:
        store.add(make_pending())
    _tamper(path, statement)

    with SqliteApprovalStore(path) as store:
        for read in (lambda: store.get("d-1"), store.pending):
            with pytest.raises(ApprovalStoreError, match="it holds a row that is not an approval"):
                read()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE resolutions SET outcome = 'maybe'",
        "UPDATE resolutions SET approver = NULL",
        "UPDATE resolutions SET resolved_ns = 'soon'",
        "UPDATE resolutions SET approver = X'35'",
    ],
)
def test_a_damaged_resolution_row_is_a_store_error(path: Path, statement: str) -> None:
    with SqliteApprovalStore(path) as store:
        store.add(make_pending())
        store.resolve(Resolution("d-1", "approved", "alice", 1_500))
    _tamper(path, statement)

    with SqliteApprovalStore(path) as store:
        with pytest.raises(ApprovalStoreError, match="holds a row that is not an approval"):
            store.get("d-1")
        with pytest.raises(ApprovalStoreError, match="holds a row that is not an approval"):
            store.unrecorded()
        with pytest.raises(ApprovalStoreError, match="holds a row that is not an approval"):
            store.resolve(Resolution("d-1", "rejected", "bob", 1_600))
        assert store.pending() == []  # the damaged resolution still counts as one


def test_a_resolution_the_file_refuses_to_keep_is_a_store_error(path: Path) -> None:
    with SqliteApprovalStore(path) as store:
        store.add(make_pending())
    _tamper(
        path,
        "CREATE TRIGGER refuse BEFORE INSERT ON resolutions BEGIN SELECT RAISE(ABORT, 'no'); END",
    )

    with SqliteApprovalStore(path) as store:
        with pytest.raises(ApprovalStoreError) as caught:
            store.resolve(Resolution("d-1", "approved", "alice", 1_500))
        assert caught.value.problem == "is damaged: it refused the resolution of decision d-1"
        assert store.get("d-1")[1] is None


def test_a_table_gone_after_opening_is_a_store_error(
    store: SqliteApprovalStore, path: Path
) -> None:
    connection = raw(path)
    connection.execute("DROP TABLE resolutions")
    connection.close()

    with pytest.raises(
        ApprovalStoreError, match=r"SQLite failed \(OperationalError: no such table"
    ):
        store.pending()
    with pytest.raises(ApprovalStoreError, match="no such table"):
        store.resolve(Resolution("d-1", "approved", "alice", 1_500))
    with pytest.raises(ApprovalStoreError, match="no such table"):
        store.mark_recorded("d-1", "f" * 64, 7)
    connection = raw(path)
    connection.execute("DROP TABLE approvals")
    connection.close()
    with pytest.raises(ApprovalStoreError, match="no such table"):
        store.add(make_pending())


# --- what it refuses to keep ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("agent", "\ud800", "agent is not valid Unicode"),
        ("reason", "ok \udfff", "reason is not valid Unicode"),
        ("run_id", "\ud83d", "run_id is not valid Unicode"),
        ("approvers", ("\udc00",), "approvers is not valid Unicode"),
        *(
            (name, 5, f"{name} is a int, not a string")
            for name in (
                "decision_id",
                "decision_sha256",
                "run_id",
                "agent",
                "verb",
                "resource",
                "reason",
                "matched_policy",
                "executed_args_sha256",
                "policy_sha256",
            )
        ),
        ("matched_policy", b"rule", "matched_policy is a bytes, not a string"),
        ("approvers", (1,), "approvers is a int, not a string"),
        ("created_ns", 1.5, "created_ns is a float, not an integer"),
        ("expires_ns", "9", "expires_ns is a str, not an integer"),
    ],
)
def test_a_field_the_store_cannot_keep_exactly_is_refused(
    store: SqliteApprovalStore, field: str, value: Any, problem: str
) -> None:
    pending = make_pending()
    object.__setattr__(pending, field, value)  # past the record's own checks, as a bug might

    with pytest.raises(ApprovalError, match=problem) as caught:
        store.add(pending)

    assert not isinstance(caught.value, ApprovalStoreError)
    assert store.pending() == []


def test_an_integer_too_long_to_write_is_refused(store: SqliteApprovalStore) -> None:
    with pytest.raises(ApprovalError, match="expires_ns is too large to keep"):
        store.add(make_pending(expires_ns=10**5000))


def test_str_and_int_subclasses_come_back_as_plain_values(store: SqliteApprovalStore) -> None:
    class Sly(str):
        def __str__(self) -> str:
            return "something else"

        def encode(self, *args: Any, **kwargs: Any) -> bytes:
            raise AssertionError("the store must not call the value's own methods")

    class Count(int):
        def __str__(self) -> str:
            return "7"

    store.add(make_pending(Sly("d-1"), agent=Sly("mailer"), created_ns=Count(10)))

    got = store.get("d-1")[0]
    assert type(got.decision_id) is str
    assert type(got.agent) is str
    assert got.agent == "mailer"
    assert type(got.created_ns) is int
    assert got.created_ns == 10
    assert store.get(Sly("d-1"))[0] == got


@pytest.mark.parametrize(
    ("field", "value"),
    [("decision_id", 3), ("outcome", 3), ("approver", "\ud800"), ("resolved_ns", "1")],
)
def test_a_resolution_that_cannot_be_kept_is_refused(
    store: SqliteApprovalStore, field: str, value: object
) -> None:
    store.add(make_pending())
    resolution = Resolution("d-1", "approved", "alice", 1_500)
    object.__setattr__(resolution, field, value)

    with pytest.raises(ApprovalError, match=f"^{field} is ") as caught:
        store.resolve(resolution)

    assert not isinstance(caught.value, ApprovalStoreError)
    assert store.get("d-1")[1] is None


def test_mark_recorded_refuses_an_address_that_is_not_text(store: SqliteApprovalStore) -> None:
    store.add(make_pending())
    store.resolve(Resolution("d-1", "approved", "alice", 1_500))

    with pytest.raises(ApprovalError, match="approval_sha256 is a bytes, not a string"):
        store.mark_recorded("d-1", b"f" * 64, 7)  # type: ignore[arg-type]

    assert len(store.unrecorded()) == 1


@pytest.mark.parametrize("decision_id", ["\ud800", None, 3, ("d-1",)])
def test_an_id_that_cannot_be_one_is_simply_not_found(
    store: SqliteApprovalStore, decision_id: Any
) -> None:
    store.add(make_pending())

    for call in (
        lambda: store.get(decision_id),
        lambda: store.mark_recorded(decision_id, "f" * 64, 7),
    ):
        with pytest.raises(ApprovalError, match="awaits approval") as caught:
            call()
        assert not isinstance(caught.value, ApprovalStoreError)


# --- locks -----------------------------------------------------------------------------------


def test_a_lock_held_past_the_busy_timeout_is_a_clear_error_and_reads_go_on(path: Path) -> None:
    with SqliteApprovalStore(path, busy_timeout_s=0.05) as store:
        store.add(make_pending("a"))
        holder = raw(path)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("DELETE FROM ghost_schema WHERE 0")
        try:
            for write in (
                lambda: store.add(make_pending("b")),
                lambda: store.resolve(Resolution("a", "approved", "alice", 1_500)),
            ):
                with pytest.raises(ApprovalStoreError) as caught:
                    write()
                assert caught.value.problem == (
                    "stayed locked by another connection for more than 0.05 s; try again"
                )
            # WAL: readers do not wait for the writer.
            assert [p.decision_id for p in store.pending()] == ["a"]
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        store.add(make_pending("b"))
        assert store.resolve(Resolution("a", "approved", "alice", 1_500)).outcome == "approved"


def test_a_write_waits_for_a_lock_released_within_the_busy_timeout(path: Path) -> None:
    with SqliteApprovalStore(path, busy_timeout_s=60) as store:
        holder = raw(path)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("DELETE FROM ghost_schema WHERE 0")
        started = threading.Event()
        outcome: list[object] = []

        def write() -> None:
            started.set()
            try:
                store.add(make_pending())
            except ApprovalError as exc:
                outcome.append(exc)
            else:
                outcome.append("added")

        thread = threading.Thread(target=write)
        thread.start()
        started.wait()
        threading.Event().wait(0.2)  # let the writer run into the lock
        holder.execute("ROLLBACK")
        holder.close()
        thread.join(timeout=60)

        assert outcome == ["added"]
        assert store.get("d-1")[1] is None


def test_opening_a_store_being_written_waits_for_the_writer(path: Path) -> None:
    SqliteApprovalStore(path).close()
    holder = raw(path)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with SqliteApprovalStore(path, busy_timeout_s=0.05) as store:
            assert store.pending() == []  # WAL: opening and reading need no write lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_new_file_locked_by_another_creator_times_out_clearly(path: Path) -> None:
    holder = raw(path)
    holder.execute("BEGIN EXCLUSIVE")  # a rollback-journal database: blocks even readers
    try:
        with pytest.raises(ApprovalStoreError, match="stayed locked by another connection"):
            SqliteApprovalStore(path, busy_timeout_s=0.05)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    SqliteApprovalStore(path).close()


@pytest.mark.parametrize("timeout", [-0.1, float("nan"), float("inf"), -float("inf")])
def test_a_busy_timeout_must_be_finite_and_not_negative(path: Path, timeout: float) -> None:
    with pytest.raises(ValueError, match="busy_timeout_s must be a finite number >= 0"):
        SqliteApprovalStore(path, busy_timeout_s=timeout)
    assert not path.exists()


def test_a_zero_busy_timeout_is_allowed(path: Path) -> None:
    with SqliteApprovalStore(path, busy_timeout_s=0) as store:
        store.add(make_pending())


# --- lifetime ----------------------------------------------------------------------------------


def test_a_closed_store_refuses_every_call(path: Path) -> None:
    store = SqliteApprovalStore(path)
    store.add(make_pending())
    store.close()

    calls = [
        lambda: store.add(make_pending("b")),
        lambda: store.get("d-1"),
        store.pending,
        lambda: store.resolve(Resolution("d-1", "approved", "alice", 1_500)),
        store.unrecorded,
        lambda: store.mark_recorded("d-1", "f" * 64, 7),
    ]
    for call in calls:
        with pytest.raises(ApprovalStoreError, match="is closed"):
            call()
    store.close()


def test_leaving_the_with_block_closes_the_store(path: Path) -> None:
    with SqliteApprovalStore(path) as store:
        assert store.path == str(path)
    with pytest.raises(ApprovalStoreError, match="is closed"):
        store.pending()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_store_carried_across_fork_refuses_to_be_used_in_the_child(
    store: SqliteApprovalStore,
) -> None:
    store.add(make_pending())
    assert problem_in_a_forked_child(store.pending) == (
        "was opened in another process (before a fork): open it again here"
    )
    assert [p.decision_id for p in store.pending()] == ["d-1"]


# --- SQLite's failures, one by one -----------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "problem"),
    [
        (5, "stayed locked by another connection for more than 5 s; try again"),
        (5 | (1 << 8), "stayed locked"),  # SQLITE_BUSY_RECOVERY: the primary code decides
        (6, "stayed locked"),
        (26, "is not a SQLite database, or is damaged"),
        (11, "is not a SQLite database, or is damaged"),
        (14, "cannot be opened (check that it and its directory are readable and writable)"),
        (8, "is read-only (its directory must be writable too, for the WAL files)"),
        (13, "cannot be written: the disk is full"),
        (10, "SQLite failed (OperationalError: disk I/O error)"),
        (None, "SQLite failed (OperationalError: disk I/O error)"),
    ],
)
def test_each_sqlite_failure_is_told_in_words(
    store: SqliteApprovalStore, code: int | None, problem: str
) -> None:
    error = sqlite3.OperationalError("disk I/O error")
    if code is not None:
        error.sqlite_errorcode = code  # type: ignore[misc]

    made = store._failure(error)

    assert isinstance(made, ApprovalStoreError)
    assert made.path == store.path
    assert made.problem.startswith(problem)


def test_prune_refuses_a_deadline_ghost_never_wrote_and_forgets_nothing(path: Path) -> None:
    with SqliteApprovalStore(path) as store:
        for decision_id in ("a", "b"):
            store.add(make_pending(decision_id))
            store.resolve(Resolution(decision_id, "expired", None, 2_000))
            store.mark_recorded(decision_id, "e" * 64, 5)
    other = raw(path)
    other.execute("UPDATE approvals SET expires_ns = '2e3' WHERE decision_id = 'b'")
    other.close()
    with SqliteApprovalStore(path) as store:
        with pytest.raises(ApprovalStoreError, match="damaged"):
            store.prune(10**6)
        assert store.record_of("a") is not None  # the transaction rolled back
        with pytest.raises(ApprovalError, match="not an integer"):
            store.prune("10")  # type: ignore[arg-type]


def test_stores_on_one_file_claiming_at_once_leave_exactly_one_holder(path: Path) -> None:
    # One store object per thread, as processes have: only the file's write lock (BEGIN
    # IMMEDIATE, taken before the state is read) makes the compare-and-set atomic.
    with SqliteApprovalStore(path) as store:
        store.add(make_pending())
        store.resolve(Resolution("d-1", "approved", "alice", 1_500))
    barrier = threading.Barrier(6)
    outcomes: list[object] = []

    def claim(index: int) -> None:
        with SqliteApprovalStore(path, busy_timeout_s=30) as mine:
            barrier.wait()
            try:
                outcomes.append(
                    mine.claim_recording("d-1", f"queue-{index}", now_ns=1, until_ns=10**12)
                )
                outcomes.append(("executed", mine.claim_execution("d-1")))
            except ApprovalError as exc:
                outcomes.append(exc)

    threads = [threading.Thread(target=claim, args=(index,)) for index in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not [o for o in outcomes if isinstance(o, BaseException)], outcomes
    assert outcomes.count(True) == 1
    assert outcomes.count(("executed", True)) == 1
