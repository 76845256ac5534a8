"""Races on an approval store: threads, and real processes sharing one SQLite file.

Of concurrent resolutions of one decision exactly one is stored; every other
resolver gets an `ApprovalError` naming the outcome that won. A resolution
another process stores is seen by a process polling ``get``, as the waiting
agent polls while an operator approves from a terminal.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import (
    ApprovalError,
    ApprovalStore,
    MemoryApprovalStore,
    Resolution,
    SqliteApprovalStore,
)
from tests.runtime.test_approval_store import make_pending

WORKER = Path(__file__).with_name("approval_worker.py")
THREADS = 8
PROCESSES = 5
# Generous: two busy cores start several interpreters at once. Never asserted as a duration.
PATIENCE_S = 120.0


@pytest.fixture(params=["memory", "sqlite-shared", "sqlite-per-thread"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[ApprovalStore]]:
    """One store per racing thread: the same object, or (SQLite) one connection each."""
    if request.param == "memory":
        shared: ApprovalStore = MemoryApprovalStore()
        yield [shared] * THREADS
        return
    path = tmp_path / "store.db"
    if request.param == "sqlite-shared":
        with SqliteApprovalStore(path, busy_timeout_s=PATIENCE_S) as one:
            yield [one] * THREADS
        return
    opened = [SqliteApprovalStore(path, busy_timeout_s=PATIENCE_S) for _ in range(THREADS)]
    yield opened
    for store in opened:
        store.close()


def _resolution(index: int) -> Resolution:
    outcome = "approved" if index % 2 else "rejected"
    return Resolution("d-1", outcome, f"approver-{index}", 1_000 + index)


def test_threads_racing_to_resolve_one_decision_exactly_one_wins(
    stores: list[ApprovalStore],
) -> None:
    stores[0].add(make_pending(approvers=None))
    barrier = threading.Barrier(THREADS)
    won: list[Resolution] = []
    lost: list[ApprovalError] = []
    others: list[BaseException] = []

    def race(index: int) -> None:
        barrier.wait()
        try:
            won.append(stores[index].resolve(_resolution(index)))
        except ApprovalError as exc:
            lost.append(exc)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            others.append(exc)

    threads = [threading.Thread(target=race, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=PATIENCE_S)

    assert others == []
    assert len(won) == 1
    assert len(lost) == THREADS - 1
    (winner,) = won
    assert stores[0].get("d-1")[1] == winner
    assert [r for _, r in stores[-1].unrecorded()] == [winner]
    for error in lost:
        assert f"d-1 is already resolved ({winner.outcome}" in str(error)


def test_threads_adding_and_resolving_many_decisions_lose_nothing(
    stores: list[ApprovalStore],
) -> None:
    per_thread = 10
    barrier = threading.Barrier(THREADS)
    failures: list[BaseException] = []

    def work(index: int) -> None:
        store = stores[index]
        barrier.wait()
        try:
            for n in range(per_thread):
                decision_id = f"t{index}-{n}"
                store.add(make_pending(decision_id, created_ns=n))
                if n % 2 == 0:
                    store.resolve(Resolution(decision_id, "approved", "alice", 1_500))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(index,)) for index in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=PATIENCE_S)

    assert failures == []
    assert len(stores[0].pending()) == THREADS * per_thread // 2
    resolved = {p.decision_id for p, _ in stores[0].unrecorded()}
    assert resolved == {f"t{i}-{n}" for i in range(THREADS) for n in range(0, per_thread, 2)}


# --- real processes --------------------------------------------------------------------------


def _start(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _when_ready(workers: list[subprocess.Popen[str]]) -> None:
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line == "ready\n", (line, worker.stderr.read() if worker.stderr else "")


def _go_and_collect(workers: list[subprocess.Popen[str]]) -> list[dict[str, object]]:
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = []
    for worker in workers:
        stdout, stderr = worker.communicate(timeout=PATIENCE_S)
        assert worker.returncode == 0, stderr
        assert "Traceback" not in stderr, stderr
        results.append(json.loads(stdout))
    return results


def test_processes_racing_to_resolve_on_one_file_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with SqliteApprovalStore(path) as store:
        store.add(make_pending(approvers=None))
    outcomes = ["approved" if index % 2 else "rejected" for index in range(PROCESSES)]
    workers = [
        _start("resolve", path, "d-1", outcome, f"operator-{index}")
        for index, outcome in enumerate(outcomes)
    ]
    _when_ready(workers)

    results = _go_and_collect(workers)

    winners = [index for index, result in enumerate(results) if result["won"]]
    assert len(winners) == 1, results
    (index,) = winners
    with SqliteApprovalStore(path, create=False) as store:
        stored = store.get("d-1")[1]
        assert [r for _, r in store.unrecorded()] == [stored]
    assert stored is not None
    assert (stored.outcome, stored.approver) == (outcomes[index], f"operator-{index}")
    for result in results:
        if not result["won"]:
            assert result["error"] == "ApprovalError"
            assert result["message"] == (
                f"decision d-1 is already resolved ({stored.outcome} by 'operator-{index}')"
            )


def test_processes_creating_one_new_store_at_once_all_succeed(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    workers = [_start("open", path) for _ in range(PROCESSES)]
    _when_ready(workers)

    results = _go_and_collect(workers)

    assert results == [{"won": True}] * PROCESSES
    with SqliteApprovalStore(path, create=False) as store:
        store.add(make_pending())
        assert store.get("d-1")[1] is None


def test_a_resolution_from_another_process_is_seen_by_a_poller(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    with SqliteApprovalStore(path) as store:
        store.add(make_pending(approvers=("alice",)))
        (worker,) = workers = [_start("resolve", path, "d-1", "approved", "alice")]
        _when_ready(workers)
        assert store.get("d-1")[1] is None  # ready, but not resolved yet

        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
        seen = None
        deadline = time.monotonic() + PATIENCE_S
        while seen is None and time.monotonic() < deadline:
            seen = store.get("d-1")[1]
            if seen is None:
                time.sleep(0.01)
        stdout, stderr = worker.communicate(timeout=PATIENCE_S)

        assert json.loads(stdout) == {"won": True}, stderr
        assert seen is not None
        assert (seen.outcome, seen.approver) == ("approved", "alice")
        assert store.pending() == []
