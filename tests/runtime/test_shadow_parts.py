"""The parts of shadow mode a whole-gate test cannot see (ADR 0031, ADR 0032).

`test_shadow_mode.py` holds the properties through the gate. This file pins
the pieces: what a shadow records when the check failed before it (exact
texts), its clock guard and the duration's bounds, the error text of an
exception whose message cannot be read, the counters a limited shadow gets
(only when it has limited rules, under the ``shadow:`` namespace), and that
its reservations are settled at once: spent for a verdict that would have
run, released otherwise.
"""

from __future__ import annotations

from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Action,
    EvaluationError,
    Gate,
    MemoryCounterStore,
    Policy,
    PolicyBackend,
    RuntimeVerdict,
)
from runtime._budget import Budgets
from runtime._recorded import RecordedText
from runtime._scrub import Scrubber
from runtime._shadow_mode import Shadow, _duration, make_shadow
from runtime.testing import ManualClock
from tests.runtime.counting_store import CountingStore
from tests.runtime.test_shadow_mode import _Raising

KEY = b"k" * 32
ALLOW_ALL = {"policy_id": "live", "rules": [{"id": "all", "effect": "allow"}]}


def _policy(*rules: dict[str, Any], policy_id: str = "candidate") -> Policy:
    return Policy.from_dict({"policy_id": policy_id, "rules": list(rules)})


def _shadow(candidate: PolicyBackend, now_ns: Any = None, budgets: Any = None) -> Shadow:
    shadow = make_shadow(
        Policy.from_dict(ALLOW_ALL),
        candidate,
        scrubber=Scrubber(fingerprint_key=KEY),
        fingerprint_key=KEY,
        recorded=RecordedText(lambda text: text, max_chars=200),
        now_ns=now_ns or ManualClock(step_ns=7).monotonic_ns,
        budgets=budgets,
    )
    assert shadow is not None
    return shadow


# --- what is recorded when there is nothing to evaluate --------------------------------------


def test_a_check_that_failed_before_the_action_was_read_is_a_shadow_deny() -> None:
    recorded = _shadow(Policy.from_dict(ALLOW_ALL)).evaluate(None, None, "d-1")
    assert (recorded["verdict"], recorded["error"]) == (
        "deny",
        "not evaluated: the check failed before the action was read",
    )
    assert (recorded["matched_policy"], recorded["matched_rules"]) == (None, [])
    assert recorded["executed_args_sha256"] is None


def test_arguments_without_a_canonical_form_are_a_shadow_deny() -> None:
    gate = Gate(Policy.from_dict(ALLOW_ALL), sink=MemoryAuditSink(), shadow=_policy())
    snapshot = gate._snapshotter.take("bot", "read", "file:/a", {"n": 1})  # private: the parts
    assert gate._shadow is not None
    recorded = gate._shadow.evaluate(snapshot, None, "d-1")
    assert (recorded["verdict"], recorded["error"]) == (
        "deny",
        "not evaluated: the arguments have no canonical form",
    )
    assert (recorded["matched_policy"], recorded["matched_rules"]) == (None, [])
    assert recorded["executed_args_sha256"] is None


# --- the clock and the duration -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "spent"),
    [
        (None, 5, 0),
        (5, None, 0),
        (None, None, 0),
        (10, 5, 0),
        (5, 5, 0),
        (5, 12, 7),
        (0, 1000, 1000),
        (0, 2**63 - 1, 2**63 - 1),
        (0, 2**63, 2**63 - 1),
        (-(2**64), 2**64, 2**63 - 1),
    ],
)
def test_a_duration_is_end_minus_start_within_zero_and_int64(
    start: int | None, end: int | None, spent: int
) -> None:
    assert _duration(start, end) == spent


@pytest.mark.parametrize("reading", [1.5, True, "5", None])
def test_a_clock_that_reads_no_int_costs_the_duration_only(reading: object) -> None:
    recorded = _shadow(Policy.from_dict(ALLOW_ALL), now_ns=lambda: reading).evaluate(
        None, None, "d-1"
    )
    assert recorded["eval_ns"] == 0
    assert type(recorded["eval_ns"]) is int


def test_a_clock_that_raises_costs_the_duration_only() -> None:
    def broken() -> int:
        raise OSError("no clock")

    assert (
        _shadow(Policy.from_dict(ALLOW_ALL), now_ns=broken).evaluate(None, None, "d")["eval_ns"]
        == 0
    )


def test_a_working_clock_times_the_evaluation() -> None:
    ticks = iter(range(100, 10_000, 40))
    recorded = _shadow(Policy.from_dict(ALLOW_ALL), now_ns=lambda: next(ticks)).evaluate(
        None, None, "d"
    )
    assert recorded["eval_ns"] == 40


# --- an exception whose message cannot be read ---------------------------------------------------


class _Unreadable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


class _UnreadableGhostError(EvaluationError):
    """A ghost error type (its message is recorded) from a backend, whose message raises."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


@pytest.mark.parametrize(
    ("exc", "name"),
    [(_Unreadable(), "_Unreadable"), (_UnreadableGhostError(), "_UnreadableGhostError")],
)
def test_an_unprintable_exception_is_named_by_its_type(exc: Exception, name: str) -> None:
    candidate = _Raising(exc)
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_dict(ALLOW_ALL), sink=sink, shadow=candidate)
    assert gate.check(Action("bot", "read", "file:/a", {})).verdict is RuntimeVerdict.ALLOW
    shadow = sink.records("/assessments")[-1]["shadow"]
    assert shadow["verdict"] == "deny"
    assert shadow["error"] == f"denied: evaluation failed with {name}"


# --- a limited shadow's counters -----------------------------------------------------------------


class _Factory:
    def __init__(self) -> None:
        self.namespaces: list[str] = []

    def __call__(self, namespace: str) -> Budgets:
        self.namespaces.append(namespace)
        return Budgets(namespace, MemoryCounterStore(), ManualClock(), lambda data: "k")


LIMITED = {
    "id": "rate",
    "effect": "deny",
    "limit": {"key": "agent", "window_s": 60, "max_count": 1},
}


def test_only_a_shadow_with_limited_rules_gets_counters_under_its_namespace() -> None:
    factory = _Factory()
    _shadow(_policy({"id": "all", "effect": "allow"}), budgets=factory)
    assert factory.namespaces == []
    _shadow(_policy(LIMITED, {"id": "all", "effect": "allow"}), budgets=factory)
    assert factory.namespaces == ["shadow:candidate"]


def test_a_limited_shadow_without_a_store_factory_still_decides() -> None:
    shadow = _shadow(_policy(LIMITED, {"id": "all", "effect": "allow"}), budgets=None)
    assert shadow.evaluate(None, None, "d")["verdict"] == "deny"


@pytest.mark.parametrize(
    ("effect", "max_count", "shadow_verdicts", "consumed"),
    [
        ("deny", 5, ["allow", "allow"], [True, True]),  # under the limit: would have run
        ("approval", 0, ["pending", "pending"], [False, False]),  # never answered: released
    ],
)
def test_a_shadow_settles_what_it_reserved_at_once(
    effect: str, max_count: int, shadow_verdicts: list[str], consumed: list[bool]
) -> None:
    limit = {"key": "agent", "window_s": 60, "max_count": max_count}
    candidate = _policy(
        {"id": "rate", "effect": effect, "limit": limit}, {"id": "all", "effect": "allow"}
    )
    sink, store = MemoryAuditSink(), CountingStore()
    gate = Gate(
        Policy.from_dict(ALLOW_ALL),
        sink=sink,
        clock=ManualClock(),
        counters=store,
        shadow=candidate,
    )
    ids = [gate.check(Action("bot", "send", "mail:x", {})).decision_id for _ in range(2)]
    assert [a["shadow"]["verdict"] for a in sink.records("/assessments")] == shadow_verdicts
    assert store.holders == [f"shadow:{i}" for i in ids]  # never the enforced decision's id
    assert store.settled == [(f"shadow:{i}", c) for i, c in zip(ids, consumed, strict=True)]
    assert store.inner._holders == {}  # private: nothing is left held
