"""Shadow mode: a second verdict beside the enforced one, recorded, never enforced (ADR 0031).

What is shadowed, chosen once when the gate is built (`make_shadow`):

1. ``Gate(policy, shadow=candidate)``: the candidate, any `PolicyBackend`,
   decided with exactly as a gate enforcing it would (its own shadow rules
   stay unenforced there too), with a scrubber built from its ``[scrub]``
   settings and the gate's fingerprint key. ``mode = "candidate"``.
2. Otherwise, when the enforced policy has shadow rules (``shadow = true``,
   ``@ghost_shadow``): that policy with them enforced (`ShadowRulesView`).
   ``mode = "rules"``.
3. Otherwise nothing: the assessment has no ``shadow`` key, byte for byte
   what it was before shadow mode existed.

A candidate supersedes the policy's shadow rules: one shadow per gate, so
that every assessment answers one question and the analyzer compares two
verdicts, not three.

Per check, after the enforced verdict and its clock reading (so
``latency_ns`` is still the time to the enforced verdict), `Shadow.evaluate`
derives the shadow verdict from the same snapshot with the same
`derive`, and returns the assessment's ``shadow`` object. It never raises:
anything that goes wrong becomes the verdict a gate enforcing the shadow
would have reached -- ``deny`` -- with ``error`` naming it the way a deny's
reason does (ghost's own message for an `EvaluationError`, else the type
alone). Nothing the shadow does reaches the enforced outcome: it runs on
its own stage timer, its own scrubber, and it is handed the verdict only
after the verdict is final.

Limited rules (ADR 0032) in the shadow count on counters of their own,
in the gate's counter store under a ``shadow:`` namespace: the shadow
reserves as a gate enforcing it would, then spends what its verdict would
have run (``allow``, ``narrow``, ``scrub``) and releases the rest at once
(a shadow ``pending`` is never answered, so it spends nothing). The
enforced counters are never touched: shadowing a budget cannot spend it.

What it records holds no argument value: policy id and hash, verdict, the
determining rule and the matched rules (ids and effects), the SHA-256 of the
arguments the shadow would have run (null for ``deny``), an error text
built by ghost, and the evaluation's duration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

from runtime._backend import PolicyBackend
from runtime._budget import Budgets
from runtime._canonical import value_sha256
from runtime._derivation import Outcome, derive, safe_reason
from runtime._recorded import RecordedText, type_name
from runtime._scrub import Scrubber
from runtime._shadow_rules import shadow_rules_view
from runtime._snapshot import ActionSnapshot
from runtime._verdict import RuntimeVerdict

__all__ = ["Shadow", "ShadowMode", "make_shadow"]

ShadowMode = Literal["candidate", "rules"]

_RUNS: Final = frozenset({RuntimeVerdict.ALLOW, RuntimeVerdict.NARROW, RuntimeVerdict.SCRUB})
_NOT_READ: Final = "not evaluated: the check failed before the action was read"
_NOT_HASHED: Final = "not evaluated: the arguments have no canonical form"


class Shadow:
    """The shadow of one gate: what to decide with, and how to record it.

    Args:
        backend: what the shadow verdict is derived from.
        mode: ``candidate`` or ``rules`` (module docstring).
        scrubber: the scrubber of the shadow's ``[scrub]`` settings.
        recorded: the gate's `RecordedText`, for error texts.
        now_ns: the gate's monotonic clock.
    """

    __slots__ = ("_backend", "_budgets", "_head", "_now_ns", "_recorded", "_scrubber", "mode")

    def __init__(
        self,
        backend: PolicyBackend,
        mode: ShadowMode,
        scrubber: Scrubber,
        recorded: RecordedText,
        now_ns: Callable[[], int],
        budgets: Budgets | None = None,
    ) -> None:
        self._backend = backend
        # Counters for the shadow's limited rules (module docstring), or None without any.
        self._budgets = budgets
        self.mode: ShadowMode = mode
        self._scrubber = scrubber
        self._recorded = recorded
        self._now_ns = now_ns
        # The part of every record that does not change, read once.
        self._head: dict[str, object] = {
            "mode": mode,
            "policy_id": backend.policy_id,
            "policy_sha256": backend.policy_sha256,
        }

    @property
    def backend(self) -> PolicyBackend:
        """What the shadow verdict is derived from."""
        return self._backend

    def evaluate(
        self, snapshot: ActionSnapshot | None, args_sha256: str | None, decision_id: str
    ) -> dict[str, object]:
        """The assessment's ``shadow`` object for one action (never raises).

        Args:
            snapshot: the enforced check's snapshot (None: it failed before).
            args_sha256: the snapshot's arguments' content address (None: none).
            decision_id: the enforced decision's id (the shadow's counter entries
                are held under it, in their own namespace).
        """
        start_ns = self._monotonic()
        verdict, rule, matched, executed, error = self._decide(snapshot, args_sha256, decision_id)
        end_ns = self._monotonic()
        return {
            **self._head,
            "verdict": verdict.value,
            "matched_policy": rule,
            "matched_rules": matched,
            "executed_args_sha256": executed,
            "error": error,
            "eval_ns": _duration(start_ns, end_ns),
        }

    def _decide(
        self, snapshot: ActionSnapshot | None, args_sha256: str | None, decision_id: str
    ) -> tuple[RuntimeVerdict, str | None, list[dict[str, str]], str | None, str | None]:
        if snapshot is None:
            return RuntimeVerdict.DENY, None, [], None, _NOT_READ
        if args_sha256 is None:
            return RuntimeVerdict.DENY, None, [], None, _NOT_HASHED
        budgets = self._budgets
        holder = f"shadow:{decision_id}"
        limits = None if budgets is None else budgets.bind(holder)
        outcome: Outcome | None = None
        try:
            try:
                outcome = derive(self._backend, self._scrubber, snapshot, self._now_ns, {}, limits)
            finally:
                if limits is not None and limits.reserved and budgets is not None:
                    runs = outcome is not None and outcome.verdict in _RUNS
                    budgets.settle(holder, consumed=runs)  # logs a failure, never raises
            executed: str | None = None
            if outcome.verdict is not RuntimeVerdict.DENY:
                same = outcome.args is snapshot.args
                executed = args_sha256 if same else value_sha256(outcome.args)
            matched = [{"id": r.id, "effect": r.effect.value} for r in outcome.matched]
        except Exception as exc:  # noqa: BLE001 - fail safe: the shadow never reaches the verdict
            return RuntimeVerdict.DENY, None, [], None, self._error(exc)
        return outcome.verdict, outcome.matched_policy, matched, executed, None

    def _error(self, exc: BaseException) -> str:
        try:
            return self._recorded(safe_reason(exc, type_name(exc)))
        except Exception:  # noqa: BLE001 - an exception whose message cannot be read
            return self._recorded(f"denied: evaluation failed with {type_name(exc)}")

    def _monotonic(self) -> int | None:
        try:
            value = self._now_ns()
        except Exception:  # noqa: BLE001 - a broken clock costs the duration, nothing else
            return None
        return value if type(value) is int else None


_INT64_MAX: Final = 2**63 - 1


def _duration(start_ns: int | None, end_ns: int | None) -> int:
    """``end - start`` within 0..int64, or 0 when a reading failed or went backwards."""
    if start_ns is None or end_ns is None:
        return 0
    return min(max(end_ns - start_ns, 0), _INT64_MAX)


def make_shadow(
    policy: PolicyBackend,
    candidate: PolicyBackend | None,
    *,
    scrubber: Scrubber,
    fingerprint_key: bytes,
    recorded: RecordedText,
    now_ns: Callable[[], int],
    budgets: Callable[[str], Budgets] | None = None,
) -> Shadow | None:
    """The gate's shadow, chosen once (module docstring), or None when there is none.

    Args:
        policy: the enforced policy.
        candidate: ``Gate(shadow=...)``, or None.
        scrubber: the enforced policy's scrubber (shared by its shadow rules).
        fingerprint_key: the gate's HMAC key, for a candidate's own scrubber.
        recorded: the gate's `RecordedText`.
        now_ns: the gate's monotonic clock.
        budgets: builds the counters of a shadow with limited rules, given the
            namespace to count under (None: the shadow's limited rules count
            in a namespace of no store, and a gate always passes one).

    Raises:
        TypeError: ``candidate`` is not a `PolicyBackend`, or a backend's
            ``with_shadow_rules`` returns something else.
    """
    if candidate is not None:
        if not isinstance(candidate, PolicyBackend):
            raise TypeError(f"shadow must be a PolicyBackend, not {type_name(candidate)}")
        settings = candidate.scrub
        own = Scrubber(
            detectors=settings.detectors,
            block=settings.block,
            fingerprint_key=fingerprint_key,
            max_depth=settings.max_depth,
            max_bytes=settings.max_bytes,
        )
        return Shadow(candidate, "candidate", own, recorded, now_ns, _counters(candidate, budgets))
    view = shadow_rules_view(policy)
    if view is None:
        return None
    return Shadow(view, "rules", scrubber, recorded, now_ns, _counters(view, budgets))


def _counters(backend: PolicyBackend, budgets: Callable[[str], Budgets] | None) -> Budgets | None:
    if budgets is None or not any(rule.limit is not None for rule in backend.rules):
        return None
    # The namespace keeps the shadow's counters apart from the enforced policy's,
    # even when both have the same id (a policy's own shadow rules).
    return budgets(f"shadow:{backend.policy_id}")
