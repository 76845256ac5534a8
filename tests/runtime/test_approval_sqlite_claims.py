"""`SqliteApprovalStore`'s claims, records, execution marks and pruning beyond the protocol.

The protocol tests (``test_approval_store.py``) run these calls on healthy
stores. Here: what the file may hold instead (a claim, a record or an
execution mark no ghost writes is a store error, and a refused write changes
nothing), what the store refuses to be given, a losing resolver's exact
message, locks held by another connection, and a prune the file refuses.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime import ApprovalError, ApprovalStoreError, Resolution, SqliteApprovalStore
from runtime._approval_rows import DamagedRow, ResolutionState, decode_deadline, decode_state
from tests.runtime.test_approval_store import make_pending

StoreCall = Callable[[SqliteApprovalStore], object]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "approvals.db"


@pytest.fixture
def store(path: Path) -> Iterator[SqliteApprovalStore]:
    with SqliteApprovalStore(path) as opened:
        opened.add(make_pending())
        opened.resolve(Resolution("d-1", "approved", "alice", 1_500))
        yield opened


def raw(path: Path) -> sqlite3.Connection:
    """A plain SQLite connection to the file, as another program (or an attacker) has."""
    return sqlite3.connect(path, isolation_level=None)


def _resolution_row(path: Path) -> tuple[object, ...]:
    connection = raw(path)
    try:
        row: tuple[object, ...] = connection.execute(
            "SELECT recorder, claimed_until_ns, approval_sha256, wait_ns, executed"
            " FROM resolutions WHERE decision_id = 'd-1'"
        ).fetchone()
    finally:
        connection.close()
    return row


# The four calls that read a resolution's claim, record and execution mark.
STATE_CALLS: list[tuple[str, StoreCall]] = [
    ("claim_recording", lambda s: s.claim_recording("d-1", "queue-a", now_ns=1, until_ns=2)),
    ("mark_recorded", lambda s: s.mark_recorded("d-1", "f" * 64, 7)),
    ("record_of", lambda s: s.record_of("d-1")),
    ("claim_execution", lambda s: s.claim_execution("d-1")),
]


# --- a state ghost never writes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        # A record is an address and a wait, both or neither.
        "UPDATE resolutions SET approval_sha256 = 'f'",
        "UPDATE resolutions SET wait_ns = '7'",
        "UPDATE resolutions SET approval_sha256 = X'66', wait_ns = '7'",
        "UPDATE resolutions SET approval_sha256 = 'f', wait_ns = '7.0'",
        # A claim is a claimant and a lease, both or neither.
        "UPDATE resolutions SET recorder = 'queue-b'",
        "UPDATE resolutions SET claimed_until_ns = '9'",
        "UPDATE resolutions SET recorder = X'71', claimed_until_ns = '9'",
        "UPDATE resolutions SET recorder = 'queue-b', claimed_until_ns = 'later'",
        # An execution mark is 0 or 1.
        "UPDATE resolutions SET executed = 2",
        "UPDATE resolutions SET executed = -1",
        "UPDATE resolutions SET executed = 1.5",
        "UPDATE resolutions SET executed = 'yes'",
        "UPDATE resolutions SET executed = X'01'",
    ],
)
@pytest.mark.parametrize(("name", "call"), STATE_CALLS, ids=[name for name, _ in STATE_CALLS])
def test_a_damaged_claim_record_or_execution_mark_is_a_store_error_and_stays_as_it_was(
    store: SqliteApprovalStore, path: Path, statement: str, name: str, call: StoreCall
) -> None:
    connection = raw(path)
    connection.execute(statement)
    connection.close()
    damaged = _resolution_row(path)

    with pytest.raises(ApprovalStoreError) as caught:
        call(store)

    assert caught.value.problem == "is damaged: it holds a row that is not an approval ghost wrote"
    assert _resolution_row(path) == damaged, name  # a refused write is rolled back
    assert store.get("d-1")[1] == Resolution("d-1", "approved", "alice", 1_500)


def test_a_resolution_state_is_frozen() -> None:
    state = decode_state(("queue-a", "9", "f" * 64, "7", 1))

    assert state.recorder == "queue-a"
    assert state.claimed_until_ns == 9
    assert state.executed is True
    for field in dataclasses.fields(ResolutionState):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(state, field.name, None)


# --- what the store refuses to be given ------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        (
            lambda s: s.claim_recording("d-1", 5, now_ns=1, until_ns=2),
            "claimant is a int, not a string: it cannot be kept",
        ),
        (
            lambda s: s.claim_recording("d-1", "queue-a", now_ns="1", until_ns=2),
            "now_ns is a str, not an integer",
        ),
        (
            lambda s: s.claim_recording("d-1", "queue-a", now_ns=1, until_ns=2.0),
            "until_ns is a float, not an integer: it cannot be kept",
        ),
        (
            lambda s: s.mark_recorded("d-1", "f" * 64, "7"),
            "wait_ns is a str, not an integer: it cannot be kept",
        ),
        (lambda s: s.prune(10.0), "before_ns is a float, not an integer"),
    ],
)
def test_an_argument_the_store_cannot_use_is_refused_by_name_and_changes_nothing(
    store: SqliteApprovalStore, path: Path, call: StoreCall, problem: str
) -> None:
    before = _resolution_row(path)

    with pytest.raises(ApprovalError) as caught:
        call(store)

    assert not isinstance(caught.value, ApprovalStoreError)
    assert str(caught.value) == problem
    assert _resolution_row(path) == before


def test_a_losing_resolver_is_told_exactly_what_won(path: Path) -> None:
    with SqliteApprovalStore(path) as store:
        store.add(make_pending("a"))
        store.add(make_pending("b"))
        store.resolve(Resolution("a", "expired", None, 2_000))
        store.resolve(Resolution("b", "rejected", "bob", 1_500))

        with pytest.raises(ApprovalError) as expired:
            store.resolve(Resolution("a", "approved", "alice", 1_999))
        with pytest.raises(ApprovalError) as rejected:
            store.resolve(Resolution("b", "approved", "alice", 1_600))

    assert str(expired.value) == "decision a is already resolved (expired)"
    assert str(rejected.value) == "decision b is already resolved (rejected by 'bob')"


# --- locks -------------------------------------------------------------------------------------


LOCKED_WRITES: list[tuple[str, StoreCall]] = [
    *STATE_CALLS[:2],
    STATE_CALLS[3],
    ("prune", lambda s: s.prune(10**9)),
]


@pytest.mark.parametrize(("name", "call"), LOCKED_WRITES, ids=[name for name, _ in LOCKED_WRITES])
def test_a_claim_or_prune_under_another_connections_lock_is_a_clear_error(
    path: Path, name: str, call: StoreCall
) -> None:
    with SqliteApprovalStore(path, busy_timeout_s=0.05) as store:
        store.add(make_pending(expires_ns=2_000))
        store.resolve(Resolution("d-1", "expired", None, 2_000))
        before = _resolution_row(path)
        holder = raw(path)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("DELETE FROM ghost_schema WHERE 0")
        try:
            with pytest.raises(ApprovalStoreError) as caught:
                call(store)
            assert caught.value.problem == (
                "stayed locked by another connection for more than 0.05 s; try again"
            )
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert _resolution_row(path) == before, name
        call(store)  # the lock is gone: the same call goes through


# --- pruning -----------------------------------------------------------------------------------


def _logged(store: SqliteApprovalStore, decision_id: str) -> None:
    store.add(make_pending(decision_id, expires_ns=2_000))
    store.resolve(Resolution(decision_id, "expired", None, 2_000))
    store.mark_recorded(decision_id, "e" * 64, 5)


def test_a_prune_the_file_refuses_half_way_forgets_nothing(path: Path) -> None:
    with SqliteApprovalStore(path) as store:
        _logged(store, "a")
    connection = raw(path)
    # The resolutions go first, then the approvals: refusing the second must undo the first.
    connection.execute(
        "CREATE TRIGGER keep BEFORE DELETE ON approvals BEGIN SELECT RAISE(ABORT, 'kept'); END"
    )
    connection.close()

    with SqliteApprovalStore(path) as store:
        with pytest.raises(ApprovalStoreError) as caught:
            store.prune(10**6)
        assert caught.value.problem == "SQLite failed (IntegrityError: kept)"
        assert store.record_of("a") is not None
        assert store.get("a")[1] == Resolution("a", "expired", None, 2_000)


def test_a_failed_prune_leaves_no_transaction_open(path: Path) -> None:
    with SqliteApprovalStore(path) as store:
        _logged(store, "a")
        _logged(store, "b")
        connection = raw(path)
        connection.execute("UPDATE approvals SET expires_ns = '2e3' WHERE decision_id = 'b'")
        connection.close()
        with pytest.raises(ApprovalStoreError) as caught:
            store.prune(10**6)
        assert caught.value.problem == (
            "is damaged: it holds a row that is not an approval ghost wrote"
        )

        store.add(make_pending("c"))  # committed at once, as every add is
        with SqliteApprovalStore(path, create=False, busy_timeout_s=0.05) as other:
            assert [p.decision_id for p in other.pending()] == ["c"]
            other.add(make_pending("d"))  # the write lock is free


@pytest.mark.parametrize(
    "row",
    [
        ("queue-a", "9" * 5_000, None, None, 0),  # the claim's lease
        ("queue-a", "9", "f" * 64, "9" * 5_000, 0),  # the logged record's wait
    ],
    ids=["lease", "wait"],
)
def test_a_state_with_a_decimal_past_pythons_digit_limit_is_damaged(row: tuple[object]) -> None:
    # int() refuses more than 4,300 digits with ValueError; a store never writes one.
    with pytest.raises(DamagedRow):
        decode_state(row)


def test_a_deadline_past_pythons_digit_limit_is_damaged() -> None:
    assert decode_deadline(("d-1", "9" * 4_000)) == ("d-1", int("9" * 4_000))
    with pytest.raises(DamagedRow):
        decode_deadline(("d-1", "9" * 5_000))
