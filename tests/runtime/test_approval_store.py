"""The `ApprovalStore` contract, run against every store, and the rules of `check_resolution`.

Each contract test runs on the in-memory store and on the SQLite store; a
test that only one of them passes is a broken promise of the protocol.
SQLite-only behaviour (files, locks, damage) is in ``test_approval_sqlite.py``,
races between threads and processes in ``test_approval_concurrency.py``.
"""

from __future__ import annotations

import dataclasses
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import (
    ApprovalError,
    ApprovalStore,
    MemoryApprovalStore,
    PendingApproval,
    Resolution,
    ResolutionRecord,
    RuntimeVerdict,
    SqliteApprovalStore,
    check_resolution,
)
from tests.strategies import pending_approvals, resolutions

StoreFactory = Callable[[], ApprovalStore]


def make_pending(decision_id: str = "d-1", **overrides: Any) -> PendingApproval:
    """A pending approval with plausible fields; ``overrides`` replace any of them."""
    fields: dict[str, Any] = {
        "decision_id": decision_id,
        "decision_sha256": "a" * 64,
        "run_id": "run-1",
        "agent": "mailer",
        "verb": "send",
        "resource": "mail:bob@example.com",
        "reason": "rule 'mail-needs-ok' holds it for approval",
        "matched_policy": "mail-needs-ok",
        "held_verdict": RuntimeVerdict.ALLOW,
        "executed_args_sha256": "b" * 64,
        "policy_sha256": "c" * 64,
        "approvers": ("alice", "bob"),
        "created_ns": 1_000,
        "expires_ns": 2_000,
    }
    fields.update(overrides)
    return PendingApproval(**fields)


@pytest.fixture(params=["memory", "sqlite"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Make stores of one kind; SQLite ones are fresh files. All are closed afterwards."""
    made: list[ApprovalStore] = []
    counter = iter(range(1_000_000))

    def factory() -> ApprovalStore:
        store: ApprovalStore
        if request.param == "memory":
            store = MemoryApprovalStore()
        else:
            store = SqliteApprovalStore(tmp_path / f"store-{next(counter)}.db")
        made.append(store)
        return store

    yield factory
    for store in made:
        store.close()


@pytest.fixture
def store(new_store: StoreFactory) -> ApprovalStore:
    return new_store()


# --- the protocol ----------------------------------------------------------------------------


def test_both_stores_implement_the_protocol(store: ApprovalStore) -> None:
    assert isinstance(store, ApprovalStore)


def test_an_added_approval_is_returned_unresolved(store: ApprovalStore) -> None:
    pending = make_pending()

    store.add(pending)

    assert store.get("d-1") == (pending, None)
    assert store.pending() == [pending]
    assert store.unrecorded() == []


def test_a_second_add_of_one_decision_is_refused_and_keeps_the_first(store: ApprovalStore) -> None:
    first = make_pending(agent="first")
    store.add(first)

    with pytest.raises(ApprovalError, match=r"d-1 is already awaiting approval"):
        store.add(make_pending(agent="second"))

    assert store.get("d-1") == (first, None)
    assert store.pending() == [first]


def test_a_resolved_decision_cannot_be_added_again(store: ApprovalStore) -> None:
    store.add(make_pending())
    store.resolve(Resolution("d-1", "approved", "alice", 1_500))

    with pytest.raises(ApprovalError, match="already awaiting approval"):
        store.add(make_pending())

    assert store.get("d-1")[1] == Resolution("d-1", "approved", "alice", 1_500)
    assert store.pending() == []


@pytest.mark.parametrize("decision_id", ["d-2", "", "D-1", "d-1 ", None, 5, ["d-1"], b"d-1"])
def test_get_of_an_unknown_id_raises(store: ApprovalStore, decision_id: Any) -> None:
    store.add(make_pending())

    with pytest.raises(ApprovalError, match="awaits approval"):
        store.get(decision_id)


@pytest.mark.parametrize("decision_id", [3, ("d-1",), "\ud800", "d-2"])
def test_every_lookup_of_an_id_no_decision_has_names_the_id_it_was_given(
    store: ApprovalStore, decision_id: Any
) -> None:
    _resolved(store)
    calls: list[Callable[[], object]] = [
        lambda: store.get(decision_id),
        lambda: store.record_of(decision_id),
        lambda: store.mark_recorded(decision_id, "f" * 64, 7),
        lambda: store.claim_recording(decision_id, "queue-a", now_ns=1, until_ns=2),
        lambda: store.claim_execution(decision_id),
    ]
    for call in calls:
        with pytest.raises(ApprovalError) as caught:
            call()
        assert str(caught.value) == f"no decision {decision_id!r} awaits approval"
    assert store.unrecorded() == [(make_pending(), Resolution("d-1", "approved", "alice", 1_500))]


def test_pending_lists_the_oldest_first_then_by_id(store: ApprovalStore) -> None:
    # Added in scrambled order; ties on created_ns are broken by decision id.
    late = make_pending("a-late", created_ns=30, expires_ns=40)
    tie_b = make_pending("b-tie", created_ns=20, expires_ns=40)
    tie_a = make_pending("a-tie", created_ns=20, expires_ns=40)
    early = make_pending("z-early", created_ns=10, expires_ns=40)
    for pending in (late, tie_b, early, tie_a):
        store.add(pending)

    assert store.pending() == [early, tie_a, tie_b, late]


def test_pending_leaves_out_resolved_ones_but_keeps_expired_ones(store: ApprovalStore) -> None:
    # A store has no clock: an approval past its expiry waits until someone resolves it.
    expired = make_pending("expired", created_ns=1, expires_ns=1)
    resolved = make_pending("resolved", created_ns=2)
    waiting = make_pending("waiting", created_ns=3)
    for pending in (expired, resolved, waiting):
        store.add(pending)
    store.resolve(Resolution("resolved", "rejected", "bob", 1_500))

    assert store.pending() == [expired, waiting]


def test_resolve_stores_and_returns_the_resolution(store: ApprovalStore) -> None:
    pending = make_pending()
    store.add(pending)
    resolution = Resolution("d-1", "approved", "alice", 1_999)

    assert store.resolve(resolution) == resolution

    assert store.get("d-1") == (pending, resolution)
    assert store.pending() == []
    assert store.unrecorded() == [(pending, resolution)]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            Resolution("d-1", "approved", "alice", 1_500),
            Resolution("d-1", "rejected", "bob", 1_501),
        ),
        (
            Resolution("d-1", "rejected", "bob", 1_500),
            Resolution("d-1", "approved", "alice", 1_400),
        ),
        (Resolution("d-1", "expired", None, 2_000), Resolution("d-1", "approved", "alice", 1_999)),
        (Resolution("d-1", "approved", "alice", 1_500), Resolution("d-1", "expired", None, 2_000)),
    ],
)
def test_a_second_resolution_is_refused_naming_the_first(
    store: ApprovalStore, first: Resolution, second: Resolution
) -> None:
    store.add(make_pending())
    store.resolve(first)

    with pytest.raises(ApprovalError, match=rf"already resolved \({first.outcome}"):
        store.resolve(second)

    assert store.get("d-1")[1] == first
    assert [resolution for _, resolution in store.unrecorded()] == [first]


def test_a_resolution_of_an_unknown_decision_is_refused_and_not_kept(store: ApprovalStore) -> None:
    store.add(make_pending())

    with pytest.raises(ApprovalError, match="'d-2' awaits approval"):
        store.resolve(Resolution("d-2", "approved", "alice", 1_500))

    assert store.unrecorded() == []
    assert store.get("d-1")[1] is None
    with pytest.raises(ApprovalError):
        store.get("d-2")


def test_unrecorded_lists_resolutions_in_the_order_they_were_stored(store: ApprovalStore) -> None:
    ids = ["a", "b", "c", "d"]
    for index, decision_id in enumerate(ids):
        store.add(make_pending(decision_id, created_ns=index))
    # Resolved in an order that is neither the order of adding nor of ids nor of times.
    order = [("c", 1_900), ("a", 1_950), ("d", 1_100)]
    for decision_id, resolved_ns in order:
        store.resolve(Resolution(decision_id, "rejected", "bob", resolved_ns))

    assert [(p.decision_id, r.resolved_ns) for p, r in store.unrecorded()] == order
    assert [p.decision_id for p, _ in store.unrecorded()] == [
        r.decision_id for _, r in store.unrecorded()
    ]


def test_mark_recorded_removes_exactly_that_resolution_from_unrecorded(
    store: ApprovalStore,
) -> None:
    for decision_id in ("a", "b", "c"):
        store.add(make_pending(decision_id))
        store.resolve(Resolution(decision_id, "approved", "alice", 1_500))

    store.mark_recorded("b", "f" * 64, 7)

    assert [p.decision_id for p, _ in store.unrecorded()] == ["a", "c"]
    store.mark_recorded("b", "e" * 64, 8)  # marking again is harmless: the first mark stays
    store.mark_recorded("a", "d" * 64, 9)
    store.mark_recorded("c", "c" * 64, 10)
    assert store.unrecorded() == []
    assert store.record_of("b") == ResolutionRecord("f" * 64, 7)
    assert store.record_of("a") == ResolutionRecord("d" * 64, 9)
    # Recording changes nothing of the approval or its resolution.
    assert store.get("b")[1] == Resolution("b", "approved", "alice", 1_500)


def test_mark_recorded_refuses_an_unresolved_or_unknown_decision(store: ApprovalStore) -> None:
    store.add(make_pending())

    with pytest.raises(ApprovalError, match="d-1 is not resolved"):
        store.mark_recorded("d-1", "f" * 64, 7)
    with pytest.raises(ApprovalError, match="'d-2' awaits approval"):
        store.mark_recorded("d-2", "f" * 64, 7)

    store.resolve(Resolution("d-1", "expired", None, 2_000))
    assert len(store.unrecorded()) == 1


def test_close_is_idempotent(store: ApprovalStore) -> None:
    store.add(make_pending())

    store.close()
    store.close()


def test_every_approvable_verdict_round_trips(store: ApprovalStore) -> None:
    for verdict in (RuntimeVerdict.ALLOW, RuntimeVerdict.NARROW, RuntimeVerdict.SCRUB):
        pending = make_pending(verdict.value, held_verdict=verdict)
        store.add(pending)
        (got, _) = store.get(verdict.value)
        assert got.held_verdict is verdict


@pytest.mark.parametrize("approvers", [None, (), ("alice",), ("bob", "alice", "bob")])
def test_approvers_none_and_empty_stay_distinct(
    store: ApprovalStore, approvers: tuple[str, ...] | None
) -> None:
    pending = make_pending(approvers=approvers)
    store.add(pending)

    got = store.get("d-1")[0].approvers

    assert got == pending.approvers
    assert type(got) is type(pending.approvers)


def test_text_and_times_come_back_exactly(store: ApprovalStore) -> None:
    pending = make_pending(
        "id\x00\n\u202e",
        run_id=None,
        agent="a\x00b",
        verb="\x1b[31mred",
        resource="é\u2028\ufeff",
        reason="",
        matched_policy=None,
        approvers=("\x00", "ü"),
        created_ns=-(2**64),
        expires_ns=2**100,
    )
    store.add(pending)
    resolution = Resolution(pending.decision_id, "approved", "\t", 2**64 + 1)
    store.resolve(resolution)

    assert store.get(pending.decision_id) == (pending, resolution)
    assert store.unrecorded() == [(pending, resolution)]


# --- property: whatever goes in comes out ------------------------------------------------------


def _fresh(kind: str, directory: str) -> ApprovalStore:
    if kind == "memory":
        return MemoryApprovalStore()
    return SqliteApprovalStore(Path(directory) / "store.db")


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
@settings(max_examples=40)
@given(data=st.data())
def test_any_approvals_and_resolutions_round_trip(store_kind: str, data: st.DataObject) -> None:
    approvals = data.draw(
        st.lists(pending_approvals(), max_size=6, unique_by=lambda p: p.decision_id)
    )
    with tempfile.TemporaryDirectory() as directory:
        store = _fresh(store_kind, directory)
        try:
            for pending in approvals:
                store.add(pending)
            resolved: list[tuple[PendingApproval, Resolution]] = []
            for pending in approvals:
                if data.draw(st.booleans()):
                    resolution = data.draw(resolutions(pending.decision_id))
                    store.resolve(resolution)
                    resolved.append((pending, resolution))

            assert store.unrecorded() == resolved
            done = {p.decision_id: r for p, r in resolved}
            for pending in approvals:
                assert store.get(pending.decision_id) == (pending, done.get(pending.decision_id))
            waiting = [p for p in approvals if p.decision_id not in done]
            assert store.pending() == sorted(waiting, key=lambda p: (p.created_ns, p.decision_id))
        finally:
            store.close()


@settings(max_examples=25)
@given(pending=pending_approvals())
def test_a_reopened_sqlite_store_returns_what_an_earlier_one_kept(pending: PendingApproval) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "store.db"
        with SqliteApprovalStore(path) as first:
            first.add(pending)
        with SqliteApprovalStore(path, create=False) as second:
            got = second.get(pending.decision_id)[0]
    assert got == pending
    assert [(f.name, type(getattr(got, f.name))) for f in dataclasses.fields(got)] == [
        (f.name, type(getattr(pending, f.name))) for f in dataclasses.fields(pending)
    ]


# --- the records -------------------------------------------------------------------------------


def test_a_pending_approval_holds_only_an_approvable_verdict() -> None:
    for verdict in (RuntimeVerdict.DENY, RuntimeVerdict.PENDING):
        with pytest.raises(ValueError, match=f"cannot hold the verdict '{verdict.value}'"):
            make_pending(held_verdict=verdict)
    assert make_pending(held_verdict="scrub").held_verdict is RuntimeVerdict.SCRUB
    with pytest.raises(ValueError, match="not a valid RuntimeVerdict"):
        make_pending(held_verdict="maybe")


def test_a_pending_approval_cannot_expire_before_it_was_created() -> None:
    assert make_pending(created_ns=5, expires_ns=5).expires_ns == 5
    with pytest.raises(ValueError, match="expire before it was created"):
        make_pending(created_ns=5, expires_ns=4)


def test_a_pending_approval_sorts_and_deduplicates_its_approvers() -> None:
    assert make_pending(approvers=["bob", "alice", "bob"]).approvers == ("alice", "bob")
    assert make_pending(approvers=[]).approvers == ()
    assert make_pending(approvers=None).approvers is None


def test_the_records_are_frozen_and_hashable() -> None:
    # A queue keeps these as they were shown for approval: nothing may change one later.
    records: list[Any] = [
        make_pending(),
        Resolution("d-1", "approved", "alice", 1_500),
        ResolutionRecord("f" * 64, 7),
    ]
    for record in records:
        for field in dataclasses.fields(record):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(record, field.name, getattr(record, field.name))
        assert hash(record) == hash(dataclasses.replace(record))
    assert len({make_pending(), make_pending()}) == 1


@pytest.mark.parametrize(
    ("outcome", "approver", "problem"),
    [
        ("maybe", "alice", "an outcome is one of approved, rejected, expired"),
        ("expired", "alice", "an expiry has no approver"),
        ("approved", None, "a human resolution has one"),
        ("rejected", None, "a human resolution has one"),
    ],
)
def test_a_resolution_keeps_outcome_and_approver_consistent(
    outcome: Any, approver: str | None, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        Resolution("d-1", outcome, approver, 0)


# --- check_resolution ------------------------------------------------------------------------


PENDING = make_pending(created_ns=1_000, expires_ns=2_000, approvers=("alice", "bob"))


@pytest.mark.parametrize("outcome", ["approved", "rejected"])
def test_an_allowed_approver_may_resolve_until_just_before_the_deadline(outcome: Any) -> None:
    check_resolution(PENDING, Resolution("d-1", outcome, "alice", 1_999))
    check_resolution(PENDING, Resolution("d-1", outcome, "bob", 1_000))
    check_resolution(PENDING, Resolution("d-1", outcome, "bob", 0))  # a clock behind is no reason


@pytest.mark.parametrize("outcome", ["approved", "rejected"])
@pytest.mark.parametrize("resolved_ns", [2_000, 2_001, 10**30])
def test_a_human_resolution_at_or_after_the_deadline_is_refused(
    outcome: Any, resolved_ns: int
) -> None:
    with pytest.raises(ApprovalError, match="d-1 has expired: it can no longer be resolved"):
        check_resolution(PENDING, Resolution("d-1", outcome, "alice", resolved_ns))


def test_an_expiry_is_allowed_from_the_deadline_on_and_refused_before() -> None:
    check_resolution(PENDING, Resolution("d-1", "expired", None, 2_000))
    check_resolution(PENDING, Resolution("d-1", "expired", None, 2_001))
    with pytest.raises(ApprovalError, match="d-1 has not expired yet"):
        check_resolution(PENDING, Resolution("d-1", "expired", None, 1_999))


@pytest.mark.parametrize("outcome", ["approved", "rejected"])
@pytest.mark.parametrize("approver", ["carol", "Alice", "alic", "alice,bob"])
def test_an_approver_not_on_the_list_is_refused(outcome: Any, approver: str) -> None:
    with pytest.raises(ApprovalError) as caught:
        check_resolution(PENDING, Resolution("d-1", outcome, approver, 1_500))
    assert str(caught.value) == f"{approver!r} may not resolve decision d-1 (allowed: alice, bob)"


@pytest.mark.parametrize("outcome", ["approved", "rejected"])
def test_with_an_empty_list_no_one_may_resolve(outcome: Any) -> None:
    pending = make_pending(approvers=())
    with pytest.raises(ApprovalError, match=r"\(allowed: no one\)"):
        check_resolution(pending, Resolution("d-1", outcome, "alice", 1_500))
    check_resolution(pending, Resolution("d-1", "expired", None, 2_000))


def test_without_a_list_anyone_with_a_proper_name_may_resolve() -> None:
    pending = make_pending(approvers=None)
    for name in ("alice", "carol", "Zoë", "a b", "ops@example.com"):
        check_resolution(pending, Resolution("d-1", "approved", name, 1_500))


@pytest.mark.parametrize(
    "approver",
    [
        "",
        " ",
        " alice",
        "alice ",
        "al\nice",
        "alice\x00",
        "\x1b[2Jalice",
        "ali\u202ece",
        "\ud800",
        "\t",
    ],
)
@pytest.mark.parametrize("approvers", [None, ("alice",)])
def test_an_odd_approver_name_is_refused_whatever_the_list(
    approver: str, approvers: tuple[str, ...] | None
) -> None:
    pending = make_pending(approvers=approvers)
    with pytest.raises(ApprovalError, match="an approver is a non-empty name without control"):
        check_resolution(pending, Resolution("d-1", "approved", approver, 1_500))


@pytest.mark.parametrize("approvers", [None, ("a" * 256,)])
def test_an_approver_name_of_up_to_256_characters_is_allowed_and_a_longer_one_is_not(
    approvers: tuple[str, ...] | None,
) -> None:
    pending = make_pending(approvers=approvers)
    check_resolution(pending, Resolution("d-1", "approved", "a" * 256, 1_500))
    with pytest.raises(ApprovalError) as caught:
        check_resolution(pending, Resolution("d-1", "rejected", "a" * 257, 1_500))
    assert str(caught.value) == "an approver's name is at most 256 characters, not 257"


class _Anyone(str):
    """A name that claims to equal every other: `in` on the approver list would accept it."""

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0


@pytest.mark.parametrize("approver", [5, b"alice", ["alice"], _Anyone("mallory")])
def test_an_approver_that_is_not_a_plain_str_is_refused(approver: Any) -> None:
    if isinstance(approver, _Anyone):
        assert approver in ("alice", "bob")  # what a membership test alone would accept
    resolution = Resolution("d-1", "approved", approver, 1_500)

    with pytest.raises(ApprovalError) as caught:
        check_resolution(PENDING, resolution)

    assert str(caught.value) == "an approver is a name (a str)"


def test_an_odd_name_on_the_list_does_not_make_it_acceptable() -> None:
    pending = make_pending(approvers=("al\nice",))
    with pytest.raises(ApprovalError, match="non-empty name"):
        check_resolution(pending, Resolution("d-1", "approved", "al\nice", 1_500))


def test_a_resolution_of_another_decision_is_refused() -> None:
    for outcome, approver, at in (("approved", "alice", 1_500), ("expired", None, 2_000)):
        with pytest.raises(ApprovalError, match="a resolution of d-2 cannot resolve d-1"):
            check_resolution(PENDING, Resolution("d-2", outcome, approver, at))  # type: ignore[arg-type]


# --- who logs a resolution, and how often an approval runs ------------------------------------


def _resolved(store: ApprovalStore, decision_id: str = "d-1") -> None:
    store.add(make_pending(decision_id))
    store.resolve(Resolution(decision_id, "approved", "alice", 1_500))


def test_one_claimant_holds_the_claim_until_it_lapses(store: ApprovalStore) -> None:
    _resolved(store)

    # The answers are bools, exactly (`is`): a caller may test them with `is True`.
    assert store.claim_recording("d-1", "queue-a", now_ns=100, until_ns=200) is True
    assert store.claim_recording("d-1", "queue-b", now_ns=150, until_ns=250) is False
    assert store.claim_recording("d-1", "queue-b", now_ns=199, until_ns=299) is False
    assert store.claim_recording("d-1", "queue-a", now_ns=199, until_ns=400) is True  # renewal
    assert store.claim_recording("d-1", "queue-b", now_ns=399, until_ns=500) is False
    # Lapsed (at its until_ns): queue-a died between its claim and its record.
    assert store.claim_recording("d-1", "queue-b", now_ns=400, until_ns=500) is True
    assert store.claim_recording("d-1", "queue-a", now_ns=450, until_ns=550) is False


def test_a_logged_resolution_cannot_be_claimed_by_anyone(store: ApprovalStore) -> None:
    _resolved(store)
    assert store.record_of("d-1") is None
    assert store.claim_recording("d-1", "queue-a", now_ns=100, until_ns=200)

    store.mark_recorded("d-1", "a" * 64, 42)

    assert store.record_of("d-1") == ResolutionRecord("a" * 64, 42)
    assert store.claim_recording("d-1", "queue-a", now_ns=150, until_ns=250) is False
    assert store.claim_recording("d-1", "queue-b", now_ns=10**30, until_ns=10**31) is False


def test_claims_and_records_refuse_an_unknown_or_unresolved_decision(store: ApprovalStore) -> None:
    store.add(make_pending())
    with pytest.raises(ApprovalError, match="d-1 is not resolved"):
        store.claim_recording("d-1", "queue-a", now_ns=1, until_ns=2)
    with pytest.raises(ApprovalError, match="d-1 is not resolved"):
        store.claim_execution("d-1")
    assert store.record_of("d-1") is None
    for call in (
        lambda: store.claim_recording("d-2", "queue-a", now_ns=1, until_ns=2),
        lambda: store.claim_execution("d-2"),
        lambda: store.record_of("d-2"),
    ):
        with pytest.raises(ApprovalError, match="'d-2' awaits approval"):
            call()


def test_an_approval_is_executed_once(store: ApprovalStore) -> None:
    _resolved(store, "a")
    _resolved(store, "b")

    assert store.claim_execution("a") is True
    assert store.claim_execution("a") is False
    assert store.claim_execution("b") is True
    assert store.claim_execution("b") is False
    assert store.get("a")[1] == Resolution("a", "approved", "alice", 1_500)


def test_threads_claiming_at_once_leave_exactly_one_holder(store: ApprovalStore) -> None:
    _resolved(store)
    won: list[str] = []
    barrier = threading.Barrier(8)

    def claim(index: int) -> None:
        barrier.wait()
        if store.claim_recording("d-1", f"queue-{index}", now_ns=100, until_ns=10**12):
            won.append(f"queue-{index}")
        if store.claim_execution("d-1"):
            won.append("executed")

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 2, won
    assert "executed" in won


# --- forgetting what is settled for good ---------------------------------------------------------


def _settled(store: ApprovalStore, decision_id: str, expires_ns: int, *, logged: bool) -> None:
    store.add(make_pending(decision_id, expires_ns=expires_ns))
    store.resolve(Resolution(decision_id, "expired", None, expires_ns))
    if logged:
        store.mark_recorded(decision_id, "e" * 64, 5)


def test_prune_forgets_exactly_what_is_resolved_logged_and_past_the_cut(
    store: ApprovalStore,
) -> None:
    huge = 2**70  # beyond SQLite's integers: compared exactly, not as text
    _settled(store, "old", 2_000, logged=True)
    _settled(store, "old-huge", huge, logged=True)
    _settled(store, "at-the-cut", 3_000, logged=True)
    _settled(store, "unlogged", 2_000, logged=False)
    store.add(make_pending("waiting", expires_ns=2_500))
    store.claim_execution("old")

    assert store.prune(3_000) == 1
    with pytest.raises(ApprovalError, match="awaits approval"):
        store.get("old")
    assert [p.decision_id for p in store.pending()] == ["waiting"]
    assert [p.decision_id for p, _ in store.unrecorded()] == ["unlogged"]
    assert store.record_of("at-the-cut") == ResolutionRecord("e" * 64, 5)
    assert store.prune(3_000) == 0

    assert store.prune(huge + 1) == 2  # at-the-cut and old-huge; never what waits or is unlogged
    assert [p.decision_id for p in store.pending()] == ["waiting"]
    assert [p.decision_id for p, _ in store.unrecorded()] == ["unlogged"]
    # A forgotten id is free: a new decision could not reuse it anyway (ids are UUIDs),
    # but the store holds nothing of the old one.
    store.add(make_pending("old"))
    assert store.get("old")[1] is None
    assert store.record_of("old") is None
    store.resolve(Resolution("old", "approved", "alice", 1_500))
    assert store.claim_execution("old") is True  # the forgotten decision's run is forgotten too
    assert store.claim_recording("old", "queue-b", now_ns=1, until_ns=2) is True
