"""`SqliteCounterStore`: budgets and rates in one SQLite file, shared by processes (ADR 0032).

The promises of `runtime._counter_store` (one-step check and reserve, the
half-open sliding window, held until settled), kept across threads and
processes and across restarts:

1. **Atomic.** `reserve` is one ``BEGIN IMMEDIATE`` transaction: the write
   lock is taken before the counter is read, so of two processes asking for
   the last unit exactly one gets it; the other waits for the lock (SQLite's
   busy handler, for ``busy_timeout_s``) and then sees it spent.
2. **Durable.** WAL mode, ``synchronous = FULL``: a committed reservation
   survives the process, and another process that opens the file sees it.
3. **Only a ghost counter store is used.** The file is sorted before anything
   is written to it, as the approval store's is (`runtime._approval_sqlite_file`
   with this store's `StoreKind`); every failure is a `CounterStoreError`.
4. **Exact.** Amounts are SQLite integers (micro-units, at most 10**18 each);
   a window's total that would pass 64 bits fails the reservation, and the
   check denies.
5. **Linear.** Each counter's total is kept in ``totals`` beside its entries,
   updated in the same transaction as they are, so a check reads one row
   and deletes what left the window (each entry is deleted once): O(log n)
   amortised however many entries a window holds, where summing the window
   on every check would make a run quadratic in its actions (a sum limit
   admits any number of zero amounts).

One connection per store object, guarded by a lock; a store carried across
``fork`` refuses to be used in the child (it must open its own).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
from typing import Final

from runtime._approval_sqlite_file import StoreFile, StoreKind
from runtime._counter_store import Usage
from runtime._errors import CounterStoreError, GhostError
from runtime._logging import get_event_log

__all__ = ["COUNTER_STORE", "SqliteCounterStore"]

_DEFAULT_BUSY_TIMEOUT_S: Final = 5.0
_log = get_event_log("ghost.counters")

_SCHEMA: Final = (
    "CREATE TABLE ghost_schema (format TEXT NOT NULL, version INTEGER NOT NULL)",
    # state: 'held' (reserved at check time) or 'spent' (the action ran); both count.
    (
        "CREATE TABLE entries ("
        " counter TEXT NOT NULL, holder TEXT NOT NULL, stamp_ns INTEGER NOT NULL,"
        " amount INTEGER NOT NULL, state TEXT NOT NULL CHECK (state IN ('held', 'spent')),"
        " PRIMARY KEY (holder, counter)) WITHOUT ROWID"
    ),
    "CREATE INDEX entries_by_counter ON entries (counter, stamp_ns)",
    # The sum of each counter's entries; no row while that sum is 0.
    "CREATE TABLE totals (counter TEXT PRIMARY KEY, total INTEGER NOT NULL) WITHOUT ROWID",
)
_MAX_TOTAL: Final = 2**63 - 1  # SQLite's largest integer


def _error(path: str, problem: str) -> GhostError:
    return CounterStoreError(path, problem)


COUNTER_STORE: Final = StoreKind(
    noun="counter store",
    application_id=0x47484354,  # "GHCT"
    format="ghost-counters",
    version=1,
    schema=_SCHEMA,
    tables=frozenset({"entries", "totals"}),
    error=_error,
)


class SqliteCounterStore:
    """A `CounterStore` in a SQLite file: survives restarts, shared by the processes of a host.

    Args:
        path: the store's file, created (mode 0600) when missing. Keep it on a
            local file system: WAL mode needs memory shared between processes.
        busy_timeout_s: how long a check waits for another connection's lock
            before `CounterStoreError` (and so a deny).

    Raises:
        CounterStoreError: the file cannot be opened or created, is not SQLite
            or is damaged, is another application's database, or a newer store.
        ValueError: ``busy_timeout_s`` is negative or not finite.
    """

    __slots__ = ("_conn", "_file", "_lock", "_path", "_pid")

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_s: float = _DEFAULT_BUSY_TIMEOUT_S
    ) -> None:
        if not (math.isfinite(busy_timeout_s) and busy_timeout_s >= 0):
            raise ValueError(f"busy_timeout_s must be a finite number >= 0, not {busy_timeout_s}")
        self._path = os.fsdecode(path)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._file = StoreFile(self._path, float(busy_timeout_s), COUNTER_STORE)
        conn, created = self._file.open(create=True)
        self._conn: sqlite3.Connection | None = conn
        if created:
            _log.info("ghost.counter_store_created", path=self._path)

    @property
    def path(self) -> str:
        """The store's file, as given."""
        return self._path

    def reserve(
        self,
        counter: str,
        holder: str,
        *,
        now_ns: int,
        window_ns: int,
        amount: int,
        maximum: int,
        force: bool,
    ) -> Usage:
        """See `CounterStore.reserve`: one ``BEGIN IMMEDIATE`` transaction.

        Raises:
            CounterStoreError: the store cannot be read or written, or holds a
                row ghost never writes.
        """
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE")
                before = self._total(conn, counter)
                gone, expired = self._expire(conn, counter, now_ns - window_ns)
                used = before - gone
                reserved = force or used + amount <= maximum
                total = used
                if reserved:
                    # The holder's entry this one replaces (none: 0), no longer counted.
                    (replaced,) = conn.execute(
                        "SELECT COALESCE(MAX(amount), 0) FROM entries"
                        " WHERE holder = ? AND counter = ?",
                        (holder, counter),
                    ).fetchone()
                    total += amount - self._integer(replaced)
                    conn.execute(
                        "INSERT OR REPLACE INTO entries"
                        " (counter, holder, stamp_ns, amount, state) VALUES (?, ?, ?, ?, 'held')",
                        (counter, holder, now_ns, amount),
                    )
                if reserved or expired:
                    self._set_total(conn, counter, total)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _roll_back(conn)
                raise self._file.failure(exc) from None
            except BaseException:
                _roll_back(conn)
                raise
        return Usage(used, reserved=reserved)

    def settle(self, holder: str, *, consumed: bool) -> None:
        """See `CounterStore.settle`: committed before it returns.

        Raises:
            CounterStoreError: the store cannot be written.
        """
        with self._lock:
            conn = self._connection()
            try:
                if consumed:
                    conn.execute(
                        "UPDATE entries SET state = 'spent' WHERE holder = ? AND state = 'held'",
                        (holder,),
                    )
                    return
                conn.execute("BEGIN IMMEDIATE")
                released = conn.execute(
                    "SELECT counter, amount FROM entries WHERE holder = ? AND state = 'held'",
                    (holder,),
                ).fetchall()
                conn.execute("DELETE FROM entries WHERE holder = ? AND state = 'held'", (holder,))
                for counter, amount in released:
                    total = self._total(conn, counter) - self._integer(amount)
                    self._set_total(conn, counter, total)
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _roll_back(conn)
                raise self._file.failure(exc) from None
            except BaseException:
                _roll_back(conn)
                raise

    def _expire(self, conn: sqlite3.Connection, counter: str, cutoff_ns: int) -> tuple[int, int]:
        """Delete the counter's entries stamped at or before ``cutoff_ns``: their sum and count."""
        # Two statements, not DELETE ... RETURNING: that needs SQLite 3.35, newer
        # than some Pythons 3.11 ship with. Each entry is summed and deleted once.
        where = "FROM entries WHERE counter = ? AND stamp_ns <= ?"
        gone, count = conn.execute(
            f"SELECT COALESCE(SUM(amount), 0), COUNT(*) {where}", (counter, cutoff_ns)
        ).fetchone()
        conn.execute(f"DELETE {where}", (counter, cutoff_ns))
        return self._integer(gone), count

    def _total(self, conn: sqlite3.Connection, counter: str) -> int:
        (total,) = conn.execute(
            "SELECT COALESCE(MAX(total), 0) FROM totals WHERE counter = ?", (counter,)
        ).fetchone()
        return self._integer(total)

    def _set_total(self, conn: sqlite3.Connection, counter: str, total: int) -> None:
        if total < 0:
            raise self._file.damaged("a counter's total is below the sum of its entries")
        if total > _MAX_TOTAL:
            raise CounterStoreError(self._path, "a counter's total would pass 64 bits")
        if total == 0:
            # Nothing left to count (at most zero amounts): no row, so the table
            # follows the live counters; a missing row reads as 0.
            conn.execute("DELETE FROM totals WHERE counter = ?", (counter,))
            return
        conn.execute(
            "INSERT OR REPLACE INTO totals (counter, total) VALUES (?, ?)", (counter, total)
        )

    def _integer(self, value: object) -> int:
        if type(value) is not int:
            raise self._file.damaged("a counter's amount or total is not an integer")
        return value

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None

    def __enter__(self) -> SqliteCounterStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise CounterStoreError(self._path, "is closed")
        if os.getpid() != self._pid:
            raise CounterStoreError(
                self._path, "was opened by another process (after fork, open the store again)"
            )
        return self._conn


def _roll_back(conn: sqlite3.Connection) -> None:
    """End a transaction a failure left open; a failing ROLLBACK must not hide that failure.

    Outside a transaction (the failure was ``BEGIN`` itself) SQLite refuses the
    ROLLBACK, and that refusal is suppressed with the rest.
    """
    with contextlib.suppress(sqlite3.Error):
        conn.execute("ROLLBACK")
