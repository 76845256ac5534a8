"""Budgets and rates: the gate's side of limited rules (ADR 0032).

A rule with a ``limit`` (`runtime._limit.LimitSpec`) matches only when the
action would take its counter past the limit: "allow under budget, deny (or
ask) over it" is a limited ``deny`` (or ``approval``) rule beside an ``allow``
rule. For one check, after the backend's matching (`LimitCheck.__call__`):

1. No limited rule among the matched rules: nothing to count, no I/O.
2. A matched rule without a limit is ``deny``: the action is denied whatever
   the budgets say; nothing is counted.
3. Every limited rule's key and amount is read first; one that cannot be
   read (`LimitError`) denies before anything is reserved.
4. Limited ``deny`` rules are asked first, then ``approval`` ones, each in
   file order, each by one atomic `CounterStore.reserve` (check and reserve,
   on the wall clock: counters outlive processes, and monotonic readings mean
   nothing across them). An exceeded ``deny`` rule ends the asking: the action
   is denied, the rest are not reserved. An ``approval`` rule reserves even
   when exceeded (``force``): the action may yet run, if a human approves.
5. The exceeded rules stay among the matched rules; the others drop out. What
   each counter held is kept for the assessment's ``limits`` (`LimitState`).

After the decision is recorded, the gate settles what was reserved
(`LimitCheck.finish`): spent for ``allow``, ``narrow`` and ``scrub``; released
for ``deny`` and for a check that failed; for ``pending`` held until the
approval is settled (approved: spent; rejected or expired: released).

The recorded key is an HMAC of the key's values under the gate's fingerprint
key (as findings are): equal keys correlate within a run; a key part such as
``args.to`` never reaches the log. The store gets the SHA-256 of the policy
id, the rule id, the key's paths and values — never their text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from runtime._canonical import jcs_bytes, sha256_hex
from runtime._clock import Clock
from runtime._counter_store import CounterStore
from runtime._limit import LimitSpec, decimal_text
from runtime._logging import get_event_log
from runtime._recorded import type_name
from runtime._rule import Rule
from runtime._snapshot import ActionSnapshot
from runtime._verdict import Effect, RuntimeVerdict

__all__ = ["Budgets", "LimitCheck", "LimitState"]

_log = get_event_log("ghost.counters")
_RUNS: Final = frozenset({RuntimeVerdict.ALLOW, RuntimeVerdict.NARROW, RuntimeVerdict.SCRUB})


class _ClockError(Exception):
    """The gate's wall clock gave something other than a non-negative int."""


@dataclass(frozen=True, slots=True)
class LimitState:
    """What one limited rule's counter held when a check asked it (the assessment's ``limits``).

    Attributes:
        rule: the limited rule's id.
        key_fingerprint: HMAC-SHA256 hex of the key's values (the gate's fingerprint key).
        window_s: the rule's window.
        measure: ``"count"`` or ``"sum"``.
        used: the counter's total in the window before this action (count, or micro-units).
        amount: what this action adds (1, or micro-units).
        maximum: the limit (count, or micro-units).
        exceeded: ``used + amount > maximum``: the rule matched.
        reserved: whether the action's entry was added (settled after the verdict).
    """

    rule: str
    key_fingerprint: str
    window_s: int
    measure: str
    used: int
    amount: int
    maximum: int
    exceeded: bool
    reserved: bool

    def record(self) -> dict[str, object]:
        """The entry of the assessment's ``limits`` list; sums as exact decimal text."""
        text = str if self.measure == "count" else decimal_text
        return {
            "rule": self.rule,
            "key": self.key_fingerprint,
            "window_s": self.window_s,
            "measure": self.measure,
            "used": text(self.used),
            "amount": text(self.amount),
            "max": text(self.maximum),
            "exceeded": self.exceeded,
            "reserved": self.reserved,
        }


class Budgets:
    """The counters of one gate's limited rules. Built once, by the gate.

    Args:
        policy_id: the policy's id (part of every counter's id).
        store: where the counts are kept.
        clock: the gate's clock (its wall clock stamps the entries).
        fingerprint: the gate's fingerprint function (HMAC-SHA256 hex of bytes).
    """

    __slots__ = ("_clock", "_fingerprint", "_policy_id", "store")

    def __init__(
        self, policy_id: str, store: CounterStore, clock: Clock, fingerprint: Callable[[bytes], str]
    ) -> None:
        self._policy_id = policy_id
        self.store = store
        self._clock = clock
        self._fingerprint = fingerprint

    def bind(self, decision_id: str) -> LimitCheck:
        """The limit check of one decision (its entries are held under ``decision_id``)."""
        return LimitCheck(self, decision_id)

    def settle(self, holder: str, *, consumed: bool) -> None:
        """Settle a holder's entries; a store failure is logged, never raised.

        A held entry that cannot be settled keeps counting until it leaves its
        window: the failure over-counts, it never lets anything run.
        """
        try:
            self.store.settle(holder, consumed=consumed)
        except Exception as exc:  # noqa: BLE001 - the verdict stands; the entry ages out
            _log.error("ghost.counter_settle_failed", decision_id=holder, error=type_name(exc))

    def _now_ns(self) -> int:
        now = self._clock.time_ns()
        if type(now) is not int or now < 0:
            raise _ClockError
        return now

    def _counter(self, rule: Rule, spec: LimitSpec, key: tuple[str | int | bool, ...]) -> str:
        return sha256_hex(jcs_bytes([self._policy_id, rule.id, list(spec.key), list(key)]))


class LimitCheck:
    """The limited rules of one check: filters the matched rules, then settles (module doc)."""

    __slots__ = ("_budgets", "decision_id", "reserved", "states")

    def __init__(self, budgets: Budgets, decision_id: str) -> None:
        self._budgets = budgets
        self.decision_id = decision_id
        self.states: list[LimitState] = []
        self.reserved = False

    def __call__(self, matched: tuple[Rule, ...], action: ActionSnapshot) -> tuple[Rule, ...]:
        """The matched rules with every limited rule that is not exceeded left out.

        Raises:
            LimitError: a limited rule's key or amount cannot be read.
            CounterStoreError: the store cannot be used.
        """
        limited = [rule for rule in matched if rule.limit is not None]
        if not limited:
            return matched
        unlimited = tuple(rule for rule in matched if rule.limit is None)
        if any(rule.effect is Effect.DENY for rule in unlimited):
            return unlimited  # denied anyway: spend nothing, count nothing
        budgets = self._budgets
        asks: list[tuple[Rule, LimitSpec, tuple[str | int | bool, ...], int]] = []
        for rule in sorted(limited, key=lambda r: r.effect is not Effect.DENY):  # stable
            spec = rule.limit
            assert spec is not None
            key = spec.key_of(rule.id, action.agent, action.verb, action.resource, action.args)
            asks.append((rule, spec, key, spec.amount_of(rule.id, action.args)))
        now = budgets._now_ns()
        exceeded: set[str] = set()
        for rule, spec, key, amount in asks:
            usage = budgets.store.reserve(
                budgets._counter(rule, spec, key),
                self.decision_id,
                now_ns=now,
                window_ns=spec.window_ns,
                amount=amount,
                maximum=spec.maximum,
                force=rule.effect is Effect.APPROVAL,
            )
            self.reserved = self.reserved or usage.reserved
            over = usage.used + amount > spec.maximum
            self.states.append(
                LimitState(
                    rule=rule.id,
                    key_fingerprint=budgets._fingerprint(jcs_bytes(list(key))),
                    window_s=spec.window_s,
                    measure=spec.measure,
                    used=usage.used,
                    amount=amount,
                    maximum=spec.maximum,
                    exceeded=over,
                    reserved=usage.reserved,
                )
            )
            if over:
                exceeded.add(rule.id)
                if rule.effect is Effect.DENY:
                    break  # denied: ask no further counter
        return tuple(r for r in matched if r.limit is None or r.id in exceeded)

    def records(self) -> list[dict[str, object]]:
        """The assessment's ``limits``, in the order the counters were asked."""
        return [state.record() for state in self.states]

    def finish(self, verdict: RuntimeVerdict | None) -> None:
        """Settle what this check reserved: spent if the verdict runs, held if pending.

        Args:
            verdict: the recorded verdict, or None when no decision was recorded.
        """
        if not self.reserved or verdict is RuntimeVerdict.PENDING:
            return
        self._budgets.settle(self.decision_id, consumed=verdict in _RUNS)


def limit_records(check: LimitCheck | None) -> Mapping[str, object]:
    """The assessment's extra fields for a check: ``{"limits": [...]}``, or nothing."""
    if check is None or not check.states:
        return {}
    return {"limits": check.records()}
