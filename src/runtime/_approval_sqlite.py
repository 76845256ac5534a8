"""A durable `ApprovalStore` in one SQLite file, shared by processes (ADR 0017).

What the store promises:

1. **Durable and shared.** Every ``add`` and ``resolve`` is committed (WAL
   mode, ``synchronous=FULL``) before it returns: it survives the process,
   and any other process that opens the file sees it. Readers never wait for
   a writer.
2. **One resolution wins.** ``resolve`` is a compare-and-set across threads
   and processes: the decision id is UNIQUE in the resolutions table, so of
   concurrent inserts exactly one commits; every other raises `ApprovalError`
   naming the outcome that won.
3. **Bounded waits.** A lock another connection holds is retried by SQLite's
   busy handler for ``busy_timeout_s``; then `ApprovalStoreError`. Writes take
   the write lock at their first statement, so a waiting writer never needs
   to upgrade a read snapshot (which SQLite refuses without retrying).
4. **Only a ghost store is used.** A file is sorted (missing, empty, a
   ghost store of this or a newer schema, another application's database,
   not SQLite) before anything is written to it, and only a ghost store of
   this schema is used (``runtime._approval_sqlite_file``). Every refusal,
   and every failure later (a damaged row, a full disk), is an
   `ApprovalStoreError` with the path and a problem a user can act on.
5. **Only what an approval holds.** The columns are the fields of
   `PendingApproval` and `Resolution`, plus the resolution's order and the
   content address of its audit record: nothing of the arguments but their
   SHA-256. Every field round-trips exactly: integers are kept as decimal
   text (SQLite's integers stop at 64 bits, Python's do not), approvers as a
   JSON list (None, "anyone", stays distinct from the empty list, "no one").
   Text that is not valid Unicode (a lone surrogate) is refused with
   `ApprovalError`: the log cannot hold it either, and the queue stores only
   the escaped form the log keeps. (The layout and the row codec are in
   ``runtime._approval_rows``.)
6. **No clock.** The store keeps the wall-clock times it is given and never
   reads a clock; whether a resolution comes too late is `check_resolution`'s
   call, made by every writer with its own clock.

One connection per store object, guarded by a lock: the object is
thread-safe, and every process opens its own (a store carried across
``fork`` refuses to be used in the child).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
from collections.abc import Iterator
from typing import Final

from runtime._approval_rows import (
    INSERT_PENDING,
    INSERT_RESOLUTION,
    SCHEMA_VERSION,
    SELECT_LOGGED_DEADLINES,
    SELECT_ONE,
    SELECT_PENDING,
    SELECT_RESOLUTION_STATE,
    SELECT_UNRECORDED,
    DamagedRow,
    ResolutionState,
    decode_deadline,
    decode_row,
    decode_state,
    integer_value,
    lookup_key,
    optional_text,
    pending_row,
    text_value,
)
from runtime._approval_sqlite_file import StoreFile
from runtime._approval_store import PendingApproval, Resolution, ResolutionRecord
from runtime._errors import ApprovalError, ApprovalStoreError
from runtime._logging import get_event_log

__all__ = ["SCHEMA_VERSION", "SqliteApprovalStore"]

_DEFAULT_BUSY_TIMEOUT_S: Final = 5.0

_log = get_event_log("ghost.approvals")


class SqliteApprovalStore:
    """An `ApprovalStore` in a SQLite file: survives restarts, shared by processes.

    Args:
        path: the store's file. Created (mode 0600) when missing and ``create``
            is true. Keep it on a local file system: WAL mode needs shared
            memory between the processes that open it.
        create: make a new store when the file is missing or empty; when false
            (an operator's command line), only an existing store is opened.
        busy_timeout_s: how long a statement retries while another connection
            holds the lock, before `ApprovalStoreError`.

    Raises:
        ApprovalStoreError: the file is missing (``create=False``), cannot be
            opened or created, is not a SQLite database or is damaged, is
            another application's database, or is a store of a newer schema.
        ValueError: ``busy_timeout_s`` is negative or not finite.
    """

    __slots__ = ("_busy_timeout_s", "_conn", "_file", "_lock", "_path", "_pid")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        busy_timeout_s: float = _DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        if not (math.isfinite(busy_timeout_s) and busy_timeout_s >= 0):
            raise ValueError(f"busy_timeout_s must be a finite number >= 0, not {busy_timeout_s}")
        self._path = os.fsdecode(path)
        self._busy_timeout_s = float(busy_timeout_s)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._file = StoreFile(self._path, self._busy_timeout_s)
        conn, created = self._file.open(create=create)
        self._conn: sqlite3.Connection | None = conn
        if created:
            _log.info("ghost.approval_store_created", path=self._path)

    @property
    def path(self) -> str:
        """The store's file, as given."""
        return self._path

    # --- the ApprovalStore protocol ---------------------------------------------------------

    def add(self, pending: PendingApproval) -> None:
        """Keep a new pending approval.

        Raises:
            ApprovalError: one with this decision id is already kept, or a field
                cannot be stored (not a string or integer, invalid Unicode).
            ApprovalStoreError: the store cannot be written.
        """
        row = pending_row(pending)
        with self._lock:
            conn = self._connection()
            try:
                conn.execute(INSERT_PENDING, row)
            except sqlite3.IntegrityError:
                raise ApprovalError(
                    f"decision {pending.decision_id} is already awaiting approval"
                ) from None
            except sqlite3.Error as exc:
                raise self._failure(exc) from None

    def get(self, decision_id: str) -> tuple[PendingApproval, Resolution | None]:
        """Return the pending approval ``decision_id`` and its resolution (None while it waits).

        Raises:
            ApprovalError: no approval with this id is kept.
            ApprovalStoreError: the store cannot be read.
        """
        key = lookup_key(decision_id)
        with self._lock:
            row = self._query_one(SELECT_ONE, (key,))
        if row is None:
            raise ApprovalError(f"no decision {decision_id!r} awaits approval")
        return self._decode(row, resolved=True)

    def pending(self) -> list[PendingApproval]:
        """Return the approvals not resolved yet, oldest first (expired ones included).

        Raises:
            ApprovalStoreError: the store cannot be read.
        """
        with self._lock:
            rows = self._query(SELECT_PENDING, ())
        waiting = [self._decode(row, resolved=False)[0] for row in rows]
        return sorted(waiting, key=lambda p: (p.created_ns, p.decision_id))

    def resolve(self, resolution: Resolution) -> Resolution:
        """Store ``resolution`` if its decision is still unresolved; return it.

        The caller has checked it (`check_resolution`).

        Raises:
            ApprovalError: unknown decision id, or the decision is already resolved
                (the message names the outcome that won, and who resolved it).
            ApprovalStoreError: the store cannot be written.
        """
        decision_id = text_value(resolution.decision_id, "decision_id")
        row = (
            decision_id,
            text_value(resolution.outcome, "outcome"),
            optional_text(resolution.approver, "approver"),
            integer_value(resolution.resolved_ns, "resolved_ns"),
        )
        with self._lock:
            conn = self._connection()
            try:
                inserted = conn.execute(INSERT_RESOLUTION, (*row, decision_id)).rowcount
            except sqlite3.IntegrityError:
                inserted = 0  # another resolver's row is there: find out whose
            except sqlite3.Error as exc:
                raise self._failure(exc) from None
            if inserted == 1:
                return resolution
            found = self._query_one(SELECT_ONE, (decision_id,))
        if found is None:
            raise ApprovalError(f"no decision {decision_id!r} awaits approval")
        winner = self._decode(found, resolved=True)[1]
        if winner is None:  # only a trigger or a hand-made table refuses an insert so
            raise self._damaged(f"it refused the resolution of decision {decision_id}")
        by = "" if winner.approver is None else f" by {winner.approver!r}"
        raise ApprovalError(f"decision {decision_id} is already resolved ({winner.outcome}{by})")

    def unrecorded(self) -> list[tuple[PendingApproval, Resolution]]:
        """Return the resolutions no audit log holds yet, in the order they were stored.

        Raises:
            ApprovalStoreError: the store cannot be read.
        """
        with self._lock:
            rows = self._query(SELECT_UNRECORDED, ())
        found: list[tuple[PendingApproval, Resolution]] = []
        for row in rows:
            pending, resolution = self._decode(row, resolved=True)
            assert resolution is not None  # an inner join on resolutions
            found.append((pending, resolution))
        return found

    def claim_recording(
        self, decision_id: str, claimant: str, *, now_ns: int, until_ns: int
    ) -> bool:
        """Take the right to log the resolution of ``decision_id`` (see `ApprovalStore`).

        Raises:
            ApprovalError: the decision is unknown or not resolved, or an
                argument cannot be stored.
            ApprovalStoreError: the store cannot be written.
        """
        key = lookup_key(decision_id)
        who = text_value(claimant, "claimant")
        now = _wall(now_ns, "now_ns")
        until = integer_value(until_ns, "until_ns")
        with self._lock, self._writing(key) as (conn, state):
            if state.record is not None:
                return False
            held = state.recorder is not None and state.recorder != who
            if held and state.claimed_until_ns is not None and now < state.claimed_until_ns:
                return False
            self._write(
                conn,
                "UPDATE resolutions SET recorder = ?, claimed_until_ns = ? WHERE decision_id = ?",
                (who, until, key),
            )
            return True

    def mark_recorded(self, decision_id: str, approval_sha256: str, wait_ns: int) -> None:
        """Note that the resolution of ``decision_id`` is logged (the first mark stays).

        Raises:
            ApprovalError: the decision is unknown or not resolved, or an
                argument cannot be stored.
            ApprovalStoreError: the store cannot be written.
        """
        key = lookup_key(decision_id)
        address = text_value(approval_sha256, "approval_sha256")
        wait = integer_value(wait_ns, "wait_ns")
        with self._lock, self._writing(key) as (conn, state):
            if state.record is None:
                self._write(
                    conn,
                    "UPDATE resolutions SET approval_sha256 = ?, wait_ns = ? WHERE decision_id = ?",
                    (address, wait, key),
                )

    def record_of(self, decision_id: str) -> ResolutionRecord | None:
        """Return where the resolution of ``decision_id`` is logged, or None while it is not.

        Raises:
            ApprovalError: the decision is unknown.
            ApprovalStoreError: the store cannot be read.
        """
        key = lookup_key(decision_id)
        with self._lock:
            row = self._query_one(SELECT_RESOLUTION_STATE, (key,))
            if row is None:
                self._known(key, decision_id, resolved=False)
                return None
        return self._state(row).record

    def claim_execution(self, decision_id: str) -> bool:
        """Mark an approval as executed; True the first time, False ever after.

        Raises:
            ApprovalError: the decision is unknown or not resolved.
            ApprovalStoreError: the store cannot be written.
        """
        key = lookup_key(decision_id)
        with self._lock, self._writing(key) as (conn, state):
            if state.executed:
                return False
            self._write(conn, "UPDATE resolutions SET executed = 1 WHERE decision_id = ?", (key,))
            return True

    def prune(self, before_ns: int) -> int:
        """Forget every decision settled for good before ``before_ns`` (see `ApprovalStore`).

        Raises:
            ApprovalError: ``before_ns`` is not an integer.
            ApprovalStoreError: the store cannot be written, or holds a damaged row.
        """
        before = _wall(before_ns, "before_ns")
        with self._lock:
            conn = self._connection()
            self._write(conn, "BEGIN IMMEDIATE", ())
            try:
                try:
                    logged = [
                        decode_deadline(row) for row in self._query(SELECT_LOGGED_DEADLINES, ())
                    ]
                except DamagedRow:
                    raise self._damaged(
                        "it holds a row that is not an approval ghost wrote"
                    ) from None
                done = [(decision_id,) for decision_id, expires_ns in logged if expires_ns < before]
                try:
                    conn.executemany("DELETE FROM resolutions WHERE decision_id = ?", done)
                    conn.executemany("DELETE FROM approvals WHERE decision_id = ?", done)
                except sqlite3.Error as exc:
                    raise self._failure(exc) from None
                self._write(conn, "COMMIT", ())
            finally:
                _roll_back(conn)
        return len(done)

    def close(self) -> None:
        """Close the connection (idempotent); a closed store raises `ApprovalStoreError`."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def __enter__(self) -> SqliteApprovalStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- helpers ----------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ApprovalStoreError(self._path, "is closed")
        if os.getpid() != self._pid:
            # SQLite's locks do not survive fork: the child must open the file itself.
            raise ApprovalStoreError(
                self._path, "was opened in another process (before a fork): open it again here"
            )
        return self._conn

    @contextlib.contextmanager
    def _writing(self, key: str) -> Iterator[tuple[sqlite3.Connection, ResolutionState]]:
        """A write transaction on the resolution of ``key`` (under _lock), with its state.

        Commits when the block ends, rolls back when it raises.

        Raises:
            ApprovalError: the decision is unknown or not resolved.
            ApprovalStoreError: the store cannot be written.
        """
        conn = self._connection()
        self._write(conn, "BEGIN IMMEDIATE", ())
        try:
            row = self._query_one(SELECT_RESOLUTION_STATE, (key,))
            if row is None:
                self._known(key, key, resolved=True)
            assert row is not None  # _known raised
            yield conn, self._state(row)
            self._write(conn, "COMMIT", ())
        finally:
            _roll_back(conn)

    def _known(self, key: str, decision_id: str, *, resolved: bool) -> None:
        """Raise for a decision without a resolution row: unknown, or (``resolved``) unresolved."""
        if self._query_one("SELECT 1 FROM approvals WHERE decision_id = ?", (key,)) is None:
            raise ApprovalError(f"no decision {decision_id!r} awaits approval")
        if resolved:
            raise ApprovalError(f"decision {decision_id} is not resolved")

    def _write(self, conn: sqlite3.Connection, sql: str, parameters: tuple[str, ...]) -> None:
        try:
            conn.execute(sql, parameters)
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _state(self, row: tuple[object, ...]) -> ResolutionState:
        try:
            return decode_state(row)
        except DamagedRow:
            raise self._damaged("it holds a row that is not an approval ghost wrote") from None

    def _query(self, sql: str, parameters: tuple[str, ...]) -> list[tuple[object, ...]]:
        conn = self._connection()
        try:
            return conn.execute(sql, parameters).fetchall()
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _query_one(self, sql: str, parameters: tuple[str, ...]) -> tuple[object, ...] | None:
        conn = self._connection()
        try:
            row: tuple[object, ...] | None = conn.execute(sql, parameters).fetchone()
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        return row

    def _decode(
        self, row: tuple[object, ...], *, resolved: bool
    ) -> tuple[PendingApproval, Resolution | None]:
        try:
            return decode_row(row, resolved=resolved)
        except DamagedRow:
            raise self._damaged("it holds a row that is not an approval ghost wrote") from None

    def _damaged(self, problem: str) -> ApprovalStoreError:
        error = self._file.damaged(problem)
        assert isinstance(error, ApprovalStoreError)  # the approval kind's error
        return error

    def _failure(self, exc: sqlite3.Error) -> ApprovalStoreError:
        error = self._file.failure(exc)
        assert isinstance(error, ApprovalStoreError)
        return error


def _roll_back(conn: sqlite3.Connection) -> None:
    """End a transaction a failure left open; a failing ROLLBACK must not hide that failure."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):  # SQLite rolls back on close at worst
            conn.execute("ROLLBACK")


def _wall(value: object, field: str) -> int:
    """A wall-clock reading given to a claim: an int (a claim compares, never stores it)."""
    if not isinstance(value, int):
        raise ApprovalError(f"{field} is a {type(value).__name__}, not an integer")
    return int(value)
