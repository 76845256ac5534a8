"""`SqliteCounterStore` when things go wrong: SQLite failures, damage, fork, close (ADR 0032).

A check that cannot count is denied by the gate (`CounterStoreError`); what
this file holds is the store's side of that: every failure inside a
transaction rolls it back (the next check works once the cause is gone), a
row ghost never writes is named as damage, a store carried across ``fork``
refuses to be used, closing is final and idempotent, and the timeout and
creation are checked and logged as documented.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from runtime import CounterStoreError, SqliteCounterStore
from tests.forked import problem_in_a_forked_child

W = 1_000


def _ask(store: SqliteCounterStore, holder: str, now: int, amount: int = 1) -> tuple[int, bool]:
    usage = store.reserve(
        "c", holder, now_ns=now, window_ns=W, amount=amount, maximum=10, force=False
    )
    return usage.used, usage.reserved


def _refuse(event: str) -> str:
    return f"CREATE TRIGGER refuse {event} BEGIN SELECT RAISE(ABORT, 'no'); END"


NOT_INTEGER = "is damaged: a counter's amount or total is not an integer"
BELOW = "is damaged: a counter's total is below the sum of its entries"


def _raw(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql)
    conn.close()


@pytest.mark.parametrize("trigger", ["BEFORE INSERT ON totals", "BEFORE INSERT ON entries"])
def test_a_sqlite_failure_in_a_reservation_rolls_it_back(tmp_path: Path, trigger: str) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as store:
        assert _ask(store, "a", 0) == (0, True)
        _raw(path, _refuse(trigger))
        with pytest.raises(CounterStoreError) as caught:
            _ask(store, "b", 1)
        assert str(caught.value) == f"counter store {path}: SQLite failed (IntegrityError: no)"
        _raw(path, "DROP TRIGGER refuse")
        assert _ask(store, "c", 2) == (1, True)  # b left nothing; the transaction was undone


def test_a_sqlite_failure_in_a_release_rolls_it_back_and_is_raised(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as store:
        assert _ask(store, "a", 0, amount=4) == (0, True)
        _raw(path, _refuse("BEFORE DELETE ON entries"))
        with pytest.raises(CounterStoreError):
            store.settle("a", consumed=False)
        assert _ask(store, "b", 1) == (4, True)  # still held: nothing was released
        _raw(path, "DROP TRIGGER refuse")
        store.settle("a", consumed=False)
        assert _ask(store, "c", 2) == (1, True)  # a's 4 given back, b's 1 counts


def test_a_failure_to_mark_spent_is_raised(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as store:
        assert _ask(store, "a", 0) == (0, True)
        _raw(path, _refuse("BEFORE UPDATE ON entries"))
        with pytest.raises(CounterStoreError):
            store.settle("a", consumed=True)


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("UPDATE totals SET total = 'many'", NOT_INTEGER),
        ("UPDATE entries SET amount = 1.5", NOT_INTEGER),
        ("UPDATE totals SET total = -5", BELOW),
    ],
)
def test_rows_ghost_never_writes_are_damage(tmp_path: Path, sql: str, problem: str) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as store:
        assert _ask(store, "a", 0) == (0, True)
        store.settle("a", consumed=True)
        _raw(path, sql)
        with pytest.raises(CounterStoreError, match=problem):
            _ask(store, "b", W)  # a expires here: its amount and the total are both read
        _raw(path, "DELETE FROM entries")
        _raw(path, "DELETE FROM totals")
        assert _ask(store, "c", W + 1) == (0, True)  # no transaction was left open


def test_a_replaced_reservation_is_counted_once(tmp_path: Path) -> None:
    with SqliteCounterStore(tmp_path / "c.db") as store:
        assert _ask(store, "a", 0, amount=3) == (0, True)
        assert _ask(store, "a", 1, amount=5) == (3, True)  # the same holder again: replaced
        assert _ask(store, "b", 2, amount=0) == (5, True)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_store_carried_across_fork_refuses_to_be_used_in_the_child(tmp_path: Path) -> None:
    with SqliteCounterStore(tmp_path / "c.db") as store:
        assert _ask(store, "a", 0) == (0, True)
        problem = problem_in_a_forked_child(lambda: _ask(store, "child", 1))
        assert problem == "was opened by another process (after fork, open the store again)"
        assert _ask(store, "b", 2) == (1, True)  # the child added nothing


def test_closing_is_final_idempotent_and_closes_the_connection(tmp_path: Path) -> None:
    store = SqliteCounterStore(tmp_path / "c.db")
    conn = store._conn  # private: whether the connection itself is closed
    assert conn is not None
    store.close()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")
    with pytest.raises(CounterStoreError, match="is closed"):
        store.settle("a", consumed=False)


def test_leaving_the_with_block_closes_the_store(tmp_path: Path) -> None:
    with SqliteCounterStore(tmp_path / "c.db") as store:
        pass
    with pytest.raises(CounterStoreError, match="is closed"):
        _ask(store, "a", 0)


@pytest.mark.parametrize("timeout", [0, 0.0, 2.5])
def test_any_finite_timeout_from_zero_is_taken(tmp_path: Path, timeout: float) -> None:
    with SqliteCounterStore(tmp_path / "c.db", busy_timeout_s=timeout) as store:
        assert _ask(store, "a", 0) == (0, True)


@pytest.mark.parametrize("timeout", [-0.001, -1, float("inf"), float("-inf"), float("nan")])
def test_a_negative_or_infinite_timeout_is_refused(tmp_path: Path, timeout: float) -> None:
    with pytest.raises(ValueError, match="busy_timeout_s must be a finite number >= 0"):
        SqliteCounterStore(tmp_path / "c.db", busy_timeout_s=timeout)
    assert not (tmp_path / "c.db").exists()


def test_creation_is_logged_once_and_the_path_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with capture_logs() as created, SqliteCounterStore(path) as store:
        assert store.path == str(path)
    with capture_logs() as reopened, SqliteCounterStore(str(path)) as again:
        assert again.path == str(path)
    assert [(e["event"], e["path"]) for e in created] == [
        ("ghost.counter_store_created", str(path))
    ]
    assert [e["event"] for e in reopened] == []


def test_a_release_that_would_take_a_total_below_zero_is_damage(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as store:
        assert _ask(store, "a", 0) == (0, True)
        _raw(path, "DELETE FROM totals")  # the entry's 1 is no longer in its total
        with pytest.raises(CounterStoreError, match=BELOW):
            store.settle("a", consumed=False)


def test_a_total_may_reach_the_largest_sqlite_integer_and_no_further(tmp_path: Path) -> None:
    with SqliteCounterStore(tmp_path / "c.db") as store:
        for holder, amount in (("a", 2**62), ("b", 2**62 - 1)):
            store.reserve("c", holder, now_ns=0, window_ns=W, amount=amount, maximum=0, force=True)
        top = store.reserve("c", "x", now_ns=0, window_ns=W, amount=0, maximum=2**63, force=False)
        assert (top.used, top.reserved) == (2**63 - 1, True)
        with pytest.raises(CounterStoreError, match="would pass 64 bits"):
            store.reserve("c", "y", now_ns=0, window_ns=W, amount=1, maximum=0, force=True)


def test_a_refused_check_with_nothing_expired_writes_nothing(tmp_path: Path) -> None:
    with SqliteCounterStore(tmp_path / "c.db") as store:
        assert _ask(store, "a", 0, amount=10) == (0, True)
        conn = store._conn  # private: whether the check wrote a row
        assert conn is not None
        before = conn.total_changes
        assert _ask(store, "b", 1) == (10, False)
        assert conn.total_changes == before


def test_the_file_is_a_ghost_counter_store_of_version_1(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    SqliteCounterStore(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA application_id").fetchone() == (0x47484354,)  # "GHCT"
        assert conn.execute("SELECT format, version FROM ghost_schema").fetchall() == [
            ("ghost-counters", 1)
        ]
    conn.close()


def test_a_store_waits_five_seconds_for_a_lock_by_default(tmp_path: Path) -> None:
    with SqliteCounterStore(tmp_path / "c.db") as store:
        assert store._conn is not None  # private: the timeout SQLite was given
        assert store._conn.execute("PRAGMA busy_timeout").fetchone() == (5000,)
    with SqliteCounterStore(tmp_path / "c.db", busy_timeout_s=0.25) as store:
        assert store._conn is not None
        assert store._conn.execute("PRAGMA busy_timeout").fetchone() == (250,)


def test_a_damaged_total_in_a_release_rolls_it_back(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as store:
        assert _ask(store, "a", 0, amount=3) == (0, True)
        _raw(path, "UPDATE totals SET total = 'x'")
        with pytest.raises(CounterStoreError, match=NOT_INTEGER):
            store.settle("a", consumed=False)
        _raw(path, "UPDATE totals SET total = 3")
        store.settle("a", consumed=False)  # the failed release left no transaction open
        assert _ask(store, "b", 1, amount=10) == (0, True)
