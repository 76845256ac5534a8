"""Deriving a verdict from a policy and an action: the order of SPEC §3 (ADR 0002).

1. Collect every rule that matches (agent, verb, resource, ``when``); a rule
   with a ``limit`` matches only when the action would exceed it (the
   ``limits`` step the gate hands in, `runtime._budget`, ADR 0032).
2. Any ``deny`` rule → ``deny``.
3. No rule matched → the policy default (``deny`` unless it says ``allow``).
4. Apply the narrowing of every matching ``narrow`` rule, in file order.
5. Scrub the (narrowed) arguments; a finding of a blocking detector → ``deny``.
6. Any ``approval`` rule → ``pending``, holding the verdict of step 7 for
   when a human approves (`Outcome.held`).
7. Arguments that differ, type-strictly, from the snapshot after narrowing →
   ``narrow`` (two narrowings that cancel out are not a narrowing); else
   changed by the scrubber → ``scrub``; else ``allow``.

It works on the action's snapshot (`ActionSnapshot`: plain data the gate
copied first) and on nothing else. This module is pure: no clock reads other
than the stage timer it is handed, no I/O (the ``limits`` step, when the gate
hands one in, is where budgets are read and reserved). Anything that goes wrong raises,
and the gate turns it into ``deny``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime._backend import PolicyBackend
from runtime._conditions import ConditionTypeError, strict_equal
from runtime._errors import EvaluationError
from runtime._narrowing import NarrowingEscape
from runtime._rule import Rule
from runtime._scrub import Finding, Scrubber, ScrubLimitExceeded
from runtime._snapshot import ActionSnapshot
from runtime._verdict import Effect, RuntimeVerdict

__all__ = ["LimitStep", "Outcome", "derive", "safe_reason"]

LimitStep = Callable[[tuple[Rule, ...], ActionSnapshot], tuple[Rule, ...]]
"""Filters the matched rules by their limits (`runtime._budget.LimitCheck`)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The full picture behind one verdict (becomes the assessment record)."""

    verdict: RuntimeVerdict
    reason: str
    matched_policy: str | None
    args: Mapping[str, Any]
    matched: tuple[Rule, ...]
    findings: tuple[Finding, ...]
    narrowings: tuple[tuple[str, str, str], ...]  # (rule, kind, path)
    stage_ns: Mapping[str, int]
    # For ``pending``: the verdict the action runs under once approved (else None).
    held: RuntimeVerdict | None = None


# Exceptions whose messages ghost builds itself from policy data, limits and type
# names, never from argument values, so they may appear in a reason (the gate still
# scrubs and escapes it). Any other exception is reported by type alone: its
# message could carry a secret.
_SAFE_MESSAGES = (EvaluationError, NarrowingEscape, ScrubLimitExceeded, ConditionTypeError)


def safe_reason(exc: BaseException, name: str) -> str:
    """The sentence a deny-by-error records: the message if ghost wrote it, else the type.

    Args:
        exc: what was raised.
        name: its type's name, as the caller read it safely.
    """
    if isinstance(exc, _SAFE_MESSAGES):
        return f"denied: {exc} ({name})"
    return f"denied: evaluation failed with {name}"


def derive(
    policy: PolicyBackend,
    scrubber: Scrubber,
    action: ActionSnapshot,
    now_ns: Callable[[], int],
    stage_ns: dict[str, int],
    limits: LimitStep | None = None,
) -> Outcome:
    """Derive the verdict for one action (see the module docstring for the order).

    Args:
        policy, scrubber: what to decide with: any `PolicyBackend` (TOML or Cedar)
            supplies the matched rules; everything after matching is the same for all.
        action: the action's snapshot.
        now_ns: the monotonic clock, for the stage timer.
        stage_ns: receives ``policy``, ``narrow`` and ``scrub`` durations as each
            stage ends, so the caller keeps them even when a later stage raises.
        limits: the limit step of a policy with limited rules (its time counts
            as ``policy``); None: no rule is limited, or nothing may be counted.

    Raises:
        Exception: anything that goes wrong; the caller denies.
    """
    agent, verb, resource, args = action.agent, action.verb, action.resource, action.args
    t0 = now_ns()
    matched = policy.matching_rules(agent, verb, resource, args)
    if limits is not None:
        matched = limits(matched, action)
    t1 = now_ns()
    stage_ns["policy"] = t1 - t0

    def outcome(
        verdict: RuntimeVerdict,
        reason: str,
        rule: str | None,
        final: Mapping[str, Any],
        findings: tuple[Finding, ...] = (),
        narrowings: tuple[tuple[str, str, str], ...] = (),
    ) -> Outcome:
        return Outcome(verdict, reason, rule, final, matched, findings, narrowings, stage_ns)

    by_effect: dict[Effect, list[Rule]] = {effect: [] for effect in Effect}
    for rule in matched:
        by_effect[rule.effect].append(rule)
    if by_effect[Effect.DENY]:
        first = by_effect[Effect.DENY][0]
        over = " (over its limit)" if first.limit is not None else ""
        return outcome(RuntimeVerdict.DENY, f"denied by rule {first.id!r}{over}", first.id, {})
    if not matched and policy.default is Effect.DENY:
        return outcome(RuntimeVerdict.DENY, "no rule matched; the policy default is deny", None, {})

    current: dict[str, Any] = args
    narrowings: list[tuple[str, str, str]] = []
    first_narrowing: str | None = None
    for rule in by_effect[Effect.NARROW]:
        assert rule.narrow is not None
        changes: list[tuple[str, str]] = []
        current = rule.narrow.apply(rule.id, current, changes)
        if changes and first_narrowing is None:
            first_narrowing = rule.id
        narrowings.extend((rule.id, kind, path) for kind, path in changes)
    t2 = now_ns()
    stage_ns["narrow"] = t2 - t1

    exempt = tuple(path for rule in matched for path in rule.scrub_exempt)
    scrubbed = scrubber.scrub(current, exempt=exempt)
    stage_ns["scrub"] = now_ns() - t2
    final = scrubbed.value
    assert isinstance(final, Mapping)
    found = scrubbed.findings
    done = tuple(narrowings)
    if scrubbed.blocked:
        names = ", ".join(scrubbed.blocked)
        reason = f"denied: the arguments hold a secret the policy blocks ({names})"
        return outcome(RuntimeVerdict.DENY, reason, None, {}, found, done)
    permitting = next((r.id for r in matched if r.effect in (Effect.ALLOW, Effect.NARROW)), None)
    rule_id: str | None
    if first_narrowing is not None and not strict_equal(current, args, numbers_by_value=False):
        kinds = ", ".join(sorted({kind for _, kind, _ in narrowings}))
        verdict, rule_id = RuntimeVerdict.NARROW, first_narrowing
        reason = f"narrowed by rule {first_narrowing!r} ({kinds})"
    elif found:
        detectors = ", ".join(sorted({f.detector for f in found}))
        verdict, rule_id = RuntimeVerdict.SCRUB, permitting
        reason = f"allowed with secrets removed ({detectors})"
    elif permitting is None:
        # Narrowings that cancelled out are still part of the picture the assessment keeps.
        verdict, rule_id = RuntimeVerdict.ALLOW, None
        reason = "no rule matched; the policy default is allow"
    else:
        verdict, rule_id = RuntimeVerdict.ALLOW, permitting
        reason = f"allowed by rule {permitting!r}"
    if by_effect[Effect.APPROVAL]:
        # Held: what it would have been is what it runs under once a human approves.
        first = by_effect[Effect.APPROVAL][0]
        over = " (over its limit)" if first.limit is not None else ""
        held = f"held for approval by rule {first.id!r}{over}"
        return Outcome(
            RuntimeVerdict.PENDING, held, first.id, final, matched, found, done, stage_ns, verdict
        )
    return outcome(verdict, reason, rule_id, final, found, done)
