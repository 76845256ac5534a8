"""Counter stores (ADR 0032): the sliding window, held/spent/released, races, restarts.

Both stores are held to the same promises: check and reserve in one step, an
entry counts for exactly ``window_ns`` after its stamp, a released entry
counts nothing, and no interleaving of threads (or, for SQLite, processes)
admits more than the maximum in one window.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import (
    CounterStore,
    CounterStoreError,
    MemoryCounterStore,
    SqliteApprovalStore,
    SqliteCounterStore,
)

WORKER = Path(__file__).with_name("counter_worker.py")
W = 1_000  # a window of 1,000 ns keeps the arithmetic readable
PATIENCE_S = 120.0  # a bound on waiting for workers, never asserted as a duration


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CounterStore]:
    if request.param == "memory":
        yield MemoryCounterStore()
        return
    with SqliteCounterStore(tmp_path / "counters.db") as opened:
        yield opened


def _ask(
    store: CounterStore, holder: str, now: int, *, amount: int = 1, maximum: int = 2
) -> tuple[int, bool]:
    usage = store.reserve(
        "c", holder, now_ns=now, window_ns=W, amount=amount, maximum=maximum, force=False
    )
    return usage.used, usage.reserved


def test_both_stores_are_counter_stores(tmp_path: Path) -> None:
    assert isinstance(MemoryCounterStore(), CounterStore)
    with SqliteCounterStore(tmp_path / "c.db") as sqlite_store:
        assert isinstance(sqlite_store, CounterStore)


def test_an_entry_counts_until_exactly_its_window_end(store: CounterStore) -> None:
    assert _ask(store, "a", 0) == (0, True)
    assert _ask(store, "b", 500) == (1, True)
    assert _ask(store, "c", W - 1) == (2, False)  # a's window is (0 - W, 0]... still counts
    assert _ask(store, "d", W) == (1, True)  # at exactly 0 + W, a no longer counts
    assert _ask(store, "e", 500 + W - 1) == (2, False)
    assert _ask(store, "f", 500 + W) == (1, True)


def test_a_released_entry_counts_nothing_and_a_spent_one_keeps_counting(
    store: CounterStore,
) -> None:
    assert _ask(store, "a", 0) == (0, True)
    assert _ask(store, "b", 1) == (1, True)
    store.settle("a", consumed=False)
    store.settle("b", consumed=True)
    assert _ask(store, "c", 2) == (1, True)
    assert _ask(store, "d", 3) == (2, False)
    store.settle("unknown", consumed=False)  # a no-op
    store.settle("b", consumed=False)  # settling is final: b stays spent
    store.settle("d", consumed=False)  # never reserved (it did not fit): a no-op
    assert _ask(store, "e", 4) == (2, False)


def test_a_release_after_the_window_subtracts_nothing(store: CounterStore) -> None:
    assert _ask(store, "a", 0) == (0, True)
    assert _ask(store, "b", W) == (0, True)  # a left the window
    store.settle("a", consumed=False)
    assert _ask(store, "c", W + 1) == (1, True)  # b still counts: the total is right


def test_sums_admit_exactly_what_fits(store: CounterStore) -> None:
    assert _ask(store, "a", 0, amount=300, maximum=500) == (0, True)
    assert _ask(store, "b", 1, amount=201, maximum=500) == (300, False)
    assert _ask(store, "c", 2, amount=200, maximum=500) == (300, True)  # exactly 500
    assert _ask(store, "d", 3, amount=0, maximum=500) == (500, True)  # zero fits, at the max
    assert _ask(store, "e", 4, amount=1, maximum=500) == (500, False)


def test_force_adds_an_entry_over_the_maximum(store: CounterStore) -> None:
    usage = store.reserve("c", "a", now_ns=0, window_ns=W, amount=5, maximum=2, force=True)
    assert (usage.used, usage.reserved) == (0, True)
    assert _ask(store, "b", 1) == (5, False)


def test_a_clock_stepped_back_over_counts_never_under(store: CounterStore) -> None:
    assert _ask(store, "a", 10 * W) == (0, True)
    assert _ask(store, "b", 0) == (1, True)  # the future entry still counts
    assert _ask(store, "c", 1) == (2, False)


def test_counters_are_independent(store: CounterStore) -> None:
    assert _ask(store, "a", 0, maximum=1) == (0, True)
    usage = store.reserve("other", "a", now_ns=0, window_ns=W, amount=1, maximum=1, force=False)
    assert (usage.used, usage.reserved) == (0, True)


def test_memory_forgets_counters_whose_window_passed() -> None:
    store = MemoryCounterStore()
    for index in range(3000):
        store.reserve(
            f"k{index}", f"h{index}", now_ns=index * W, window_ns=W, amount=1, maximum=1,
            force=False,
        )  # fmt: skip
        store.settle(f"h{index}", consumed=True)
    assert len(store._counters) < 1100  # swept every 1,024 reservations


# --- threads and processes -------------------------------------------------------------------

THREADS = 8
PER_THREAD = 40
MAXIMUM = 57


@pytest.mark.parametrize("kind", ["memory", "sqlite-shared", "sqlite-per-thread"])
def test_threads_racing_never_overspend(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    if kind == "memory":
        stores: list[CounterStore] = [MemoryCounterStore()] * THREADS
    elif kind == "sqlite-shared":
        stores = [SqliteCounterStore(path, busy_timeout_s=PATIENCE_S)] * THREADS
    else:
        stores = [SqliteCounterStore(path, busy_timeout_s=PATIENCE_S) for _ in range(THREADS)]
    start = threading.Barrier(THREADS)
    admitted: list[int] = [0] * THREADS

    def run(index: int) -> None:
        start.wait()
        for n in range(PER_THREAD):
            usage = stores[index].reserve(
                "c", f"{index}-{n}", now_ns=0, window_ns=W, amount=1, maximum=MAXIMUM,
                force=False,
            )  # fmt: skip
            admitted[index] += usage.reserved

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(PATIENCE_S)
    assert sum(admitted) == MAXIMUM
    for opened in set(map(id, stores)):
        store = next(s for s in stores if id(s) == opened)
        if isinstance(store, SqliteCounterStore):
            store.close()


def test_two_processes_on_one_sqlite_store_allow_exactly_the_maximum(tmp_path: Path) -> None:
    path = tmp_path / "counters.db"
    checks, maximum = 60, 75  # 120 checks, 75 allowed: each process must see the other's
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(path), str(checks), str(maximum)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line == "ready\n", (line, worker.stderr.read() if worker.stderr else "")
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=PATIENCE_S)
        assert worker.returncode == 0, stderr
        results.append(json.loads(stdout))
    assert sum(result["allowed"] for result in results) == maximum
    for result in results:  # every deny is the limit's, none a store failure
        assert set(result["denied_reasons"]) <= {"denied by rule 'send-rate' (over its limit)"}


# --- the SQLite file -------------------------------------------------------------------------


def test_sqlite_counts_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as first:
        assert _ask(first, "a", 0) == (0, True)
        first.settle("a", consumed=True)
        assert _ask(first, "b", 1) == (1, True)  # held, never settled: the process "died"
    with SqliteCounterStore(path) as second:
        assert _ask(second, "c", 2) == (2, False)
        assert _ask(second, "d", W) == (1, True)  # a left at exactly W; b still counts
        assert _ask(second, "e", W + 1) == (1, True)  # b left; d counts; nothing leaked


def test_sqlite_refuses_other_databases_and_other_ghost_stores(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(CounterStoreError, match="another application's SQLite database"):
        SqliteCounterStore(other)
    approvals = tmp_path / "approvals.db"
    SqliteApprovalStore(approvals).close()
    with pytest.raises(CounterStoreError, match="not a ghost counter store"):
        SqliteCounterStore(approvals)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(CounterStoreError, match="not a SQLite database"):
        SqliteCounterStore(junk)
    assert other.exists()


def test_sqlite_is_made_private_and_refuses_use_when_closed(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    store = SqliteCounterStore(path)
    assert path.stat().st_mode & 0o777 == 0o600
    store.close()
    with pytest.raises(CounterStoreError, match="is closed"):
        _ask(store, "a", 0)
    with pytest.raises(ValueError, match="busy_timeout_s"):
        SqliteCounterStore(path, busy_timeout_s=float("nan"))


def test_sqlite_a_total_past_64_bits_fails_closed(tmp_path: Path) -> None:
    with SqliteCounterStore(tmp_path / "c.db") as store:
        big = 2**62
        store.reserve("c", "a", now_ns=0, window_ns=W, amount=big, maximum=0, force=True)
        with pytest.raises(CounterStoreError, match="would pass 64 bits"):
            store.reserve("c", "b", now_ns=0, window_ns=W, amount=big, maximum=0, force=True)
        assert _ask(store, "x", 1, maximum=2**63) == (big, True)  # b reserved nothing


def _steps_of_one_check(store: SqliteCounterStore, now: int) -> int:
    """SQLite virtual-machine steps (in tens) that one check and reserve takes."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    conn = store._conn  # private: the work one check does is the property under test
    assert conn is not None
    conn.set_progress_handler(count, 10)
    try:
        store.reserve("c", f"probe-{now}", now_ns=now, window_ns=10**12, amount=0,
                      maximum=1, force=False)  # fmt: skip
    finally:
        conn.set_progress_handler(None, 0)
    return steps[0]


def test_sqlite_a_check_does_not_grow_with_the_entries_in_its_window(tmp_path: Path) -> None:
    # A sum limit admits any number of zero amounts: summing the window on every
    # check would make a run quadratic. The work is counted in SQLite's own steps.
    with SqliteCounterStore(tmp_path / "c.db") as store:
        few = _steps_of_one_check(store, 1)
        for now in range(2, 3_000):
            store.reserve("c", f"h{now}", now_ns=now, window_ns=10**12, amount=0, maximum=1,
                          force=False)  # fmt: skip
        many = _steps_of_one_check(store, 3_000)
        assert few > 0
        assert many <= 2 * few, (few, many)  # a scan of 3,000 entries: ~200x the steps
        assert _ask(store, "last", 3_001, amount=1, maximum=1) == (0, True)


def test_sqlite_totals_follow_releases_and_the_window(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteCounterStore(path) as store:
        assert _ask(store, "a", 0, amount=5, maximum=10) == (0, True)
        assert _ask(store, "b", 1, amount=5, maximum=10) == (5, True)
        store.settle("a", consumed=False)
        assert _ask(store, "c", 2, amount=5, maximum=10) == (5, True)  # a gave its 5 back
        store.settle("b", consumed=True)
        assert _ask(store, "d", W + 1, amount=10, maximum=10) == (5, False)  # b left, c counts
        assert _ask(store, "e", W + 2, amount=10, maximum=10) == (0, True)  # c left too
        store.settle("e", consumed=False)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT counter, total FROM totals").fetchall() == []
        assert conn.execute("SELECT COUNT(*) FROM entries").fetchone() == (0,)
