"""Deciding on an action without a gate: the derivation, for explain and replay (ADR 0033).

`Evaluator.evaluate` does what `Gate.check` does between taking the snapshot
and recording the decision — snapshot (`Snapshotter.take`), `derive`, the
hashes of the arguments that came in and of those that would run — and fails
closed the same way: anything raised becomes ``deny`` with `safe_reason`'s
sentence and the error's type. It writes nothing, starts no span and holds
nothing for approval, so ``ghost policy explain`` can ask "what would the
gate say" and ``ghost policy replay`` can ask it again for a recorded action.

It is the one seam for what a derivation needs beside the policy: a
limited rule's counter state (ADR 0032) is handed to `evaluate` as
``exceeded`` -- replay gives the state the assessment recorded, explain gives
none, and then every limited rule counts as under its limit (it matches only
over it) -- never re-derived here by a second implementation of the verdict
order. A limited rule that matters and has no state raises
`LimitStateUnknown`, the one exception `evaluate` lets through.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime._backend import PolicyBackend
from runtime._canonical import value_sha256
from runtime._derivation import Outcome, derive, safe_reason
from runtime._recorded import type_name
from runtime._rule import Rule
from runtime._scrub import Scrubber
from runtime._snapshot import ActionSnapshot, Snapshotter
from runtime._verdict import Effect, RuntimeVerdict

__all__ = ["Evaluation", "Evaluator", "LimitStateUnknown"]


class LimitStateUnknown(Exception):
    """A limited rule matched, and the counter state given to `Evaluator.evaluate` lacks it.

    Attributes:
        rule: the limited rule's id.
    """

    def __init__(self, rule: str) -> None:
        super().__init__(f"the counter state of limited rule {rule!r} is not known")
        self.rule = rule


def _limit_step(
    exceeded: Mapping[str, bool] | None,
) -> Callable[[tuple[Rule, ...], ActionSnapshot], tuple[Rule, ...]]:
    """The derivation's limit step over a given counter state (`Budgets`' rule, read-only)."""

    def step(matched: tuple[Rule, ...], action: ActionSnapshot) -> tuple[Rule, ...]:
        del action  # the state is given, not counted
        if all(rule.limit is None for rule in matched):
            return matched
        unlimited = tuple(rule for rule in matched if rule.limit is None)
        if any(rule.effect is Effect.DENY for rule in unlimited):
            return unlimited  # denied anyway: the gate asks no counter either
        kept: list[Rule] = []
        for rule in matched:
            if rule.limit is None:
                kept.append(rule)
                continue
            if exceeded is None:
                continue  # no state: under its limit, so it does not match
            if rule.id not in exceeded:
                raise LimitStateUnknown(rule.id)
            if exceeded[rule.id]:
                kept.append(rule)
        return tuple(kept)

    return step


_DEFAULT_MAX_NAME_CHARS: Final = 4096


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What the gate would decide on one action (nothing recorded).

    Attributes:
        outcome: the derivation's full picture (verdict, reason, rule, the
            arguments that would run, matched rules, findings, narrowings);
            for an action that failed, a ``deny`` with no rules.
        error: the type name of what was raised, or None.
        args_sha256: the address of the snapshot of the arguments (None when
            there is no snapshot).
        executed_args_sha256: the address of the arguments that would run
            (None for ``deny``).
    """

    outcome: Outcome
    error: str | None
    args_sha256: str | None
    executed_args_sha256: str | None


class Evaluator:
    """Derives verdicts from one policy the way a `Gate` built on it would.

    Args:
        policy: any `PolicyBackend`.
        max_name_chars: as `Gate`'s.
        fingerprint_key: the findings' HMAC key (default: random; fingerprints
            then correlate within this evaluator only).
    """

    __slots__ = ("_limits", "_policy", "_scrubber", "_snapshotter")

    def __init__(
        self,
        policy: PolicyBackend,
        *,
        max_name_chars: int = _DEFAULT_MAX_NAME_CHARS,
        fingerprint_key: bytes | None = None,
    ) -> None:
        settings = policy.scrub
        self._policy = policy
        limited = any(rule.limit is not None for rule in policy.rules)
        self._limits = _limit_step(None) if limited else None
        self._scrubber = Scrubber(
            detectors=settings.detectors,
            block=settings.block,
            fingerprint_key=fingerprint_key if fingerprint_key is not None else os.urandom(32),
            max_depth=settings.max_depth,
            max_bytes=settings.max_bytes,
        )
        self._snapshotter = Snapshotter(
            max_name_chars=max_name_chars,
            max_depth=settings.max_depth,
            max_bytes=settings.max_bytes,
        )

    @property
    def policy(self) -> PolicyBackend:
        """The policy it decides with."""
        return self._policy

    def evaluate(
        self,
        agent: object,
        verb: object,
        resource: object,
        args: object,
        *,
        exceeded: Mapping[str, bool] | None = None,
    ) -> Evaluation:
        """Decide on one action as `Gate.check` would (never raises for the action's content).

        Args:
            agent, verb, resource, args: the action.
            exceeded: whether each limited rule (by id) was over its limit; None:
                no counter state, every limited rule is under its limit.

        Raises:
            LimitStateUnknown: a limited rule matters and ``exceeded`` lacks it.
        """
        stage_ns = {"policy": 0, "narrow": 0, "scrub": 0}
        args_sha256: str | None = None
        try:
            snapshot = self._snapshotter.take(agent, verb, resource, args)
            args_sha256 = value_sha256(snapshot.args)
            outcome = derive(
                self._policy,
                self._scrubber,
                snapshot,
                time.monotonic_ns,
                stage_ns,
                self._limits if exceeded is None else _limit_step(exceeded),
            )
        except LimitStateUnknown:
            raise
        except Exception as exc:  # noqa: BLE001 - fail closed, as the gate does
            name = type_name(exc)
            denied = Outcome(
                RuntimeVerdict.DENY, safe_reason(exc, name), None, {}, (), (), (), stage_ns
            )
            return Evaluation(denied, name, args_sha256, None)
        executed = None
        if outcome.verdict is not RuntimeVerdict.DENY:
            try:
                executed = value_sha256(outcome.args)
            except Exception as exc:  # noqa: BLE001 - what cannot be addressed denies
                name = type_name(exc)
                denied = Outcome(
                    RuntimeVerdict.DENY, safe_reason(exc, name), None, {}, (), (), (), stage_ns
                )
                return Evaluation(denied, name, args_sha256, None)
        return Evaluation(outcome, None, args_sha256, executed)


def scrub_for_display(value: Mapping[str, Any], scrubber: Scrubber) -> Any:
    """``value`` scrubbed by ``scrubber`` without exemptions, for printing (never raises)."""
    try:
        return scrubber.scrub(value).value
    except Exception:  # noqa: BLE001 - what cannot be scrubbed is not shown
        return {"$ghost": "not shown: the arguments could not be scrubbed"}
