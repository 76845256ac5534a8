"""``ghost policy explain``: the verdict on one action, and every rule that matched or nearly did.

`explain_action` decides as the gate would (`Evaluator`, so the same
derivation) and asks the policy for a diagnosis of each rule
(`diagnose_rules`, the backends' side API). Nothing is recorded. What it
returns is safe to print: the effective arguments are scrubbed again by every
detector with no exemption (a ``scrub_exempt`` field is sent to the tool
unscrubbed, not shown), and the texts it holds come from the policy, the
derivation's own sentences and type names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime._backend import PolicyBackend
from runtime._diagnosis import RuleDiagnosis
from runtime._evaluate import Evaluator, scrub_for_display
from runtime._scrub import Finding, Scrubber
from runtime._verdict import RuntimeVerdict

__all__ = ["Explanation", "explain_action"]


@dataclass(frozen=True, slots=True)
class Explanation:
    """The verdict on one action and why.

    Attributes:
        verdict: what the gate would decide.
        held: for ``pending``, the verdict it would run under once approved.
        reason: the decision's sentence.
        matched_policy: the rule that decided, or None.
        matched_rules: the ids of every matching rule, in file order.
        diagnoses: every rule that matched or nearly matched
            (`RuleDiagnosis.near_miss`), or whose condition raised, in file order.
        args: the arguments that would run, scrubbed by every detector
            (``{}`` for ``deny``).
        findings: what the policy's scrubber found (detector and path).
        narrowings: (rule, kind, path) of each narrowing applied.
        error: the type of the error that denied the action, or None.
        diagnosis_error: why the rules could not be diagnosed (the resource is
            ambiguous, a value Cedar cannot hold), or None.
    """

    verdict: RuntimeVerdict
    held: RuntimeVerdict | None
    reason: str
    matched_policy: str | None
    matched_rules: tuple[str, ...]
    diagnoses: tuple[RuleDiagnosis, ...]
    args: Mapping[str, Any]
    findings: tuple[Finding, ...]
    narrowings: tuple[tuple[str, str, str], ...]
    error: str | None
    diagnosis_error: str | None


def explain_action(
    policy: PolicyBackend, agent: str, verb: str, resource: str, args: Mapping[str, Any]
) -> Explanation:
    """Explain what ``policy`` decides on an action (see the module docstring).

    Args:
        policy: a `Policy` or `CedarPolicy` (any backend with ``diagnose_rules``
            gets rule diagnoses; others only the verdict).
        agent, verb, resource, args: the action.
    """
    key = os.urandom(32)
    evaluation = Evaluator(policy, fingerprint_key=key).evaluate(agent, verb, resource, args)
    outcome = evaluation.outcome
    display = Scrubber(fingerprint_key=key, max_depth=policy.scrub.max_depth,
                       max_bytes=policy.scrub.max_bytes)  # fmt: skip
    diagnoses: tuple[RuleDiagnosis, ...] = ()
    problem = None
    diagnose = getattr(policy, "diagnose_rules", None)
    if callable(diagnose):
        try:
            every = diagnose(agent, verb, resource, args)
            diagnoses = tuple(d for d in every if d.matched or d.near_miss or d.error is not None)
        except Exception as exc:  # noqa: BLE001 - the verdict stands; say why rules are not shown
            problem = f"{type(exc).__name__}: {exc}" if _own(exc) else type(exc).__name__
    return Explanation(
        verdict=outcome.verdict,
        held=outcome.held,
        reason=outcome.reason,
        matched_policy=outcome.matched_policy,
        matched_rules=tuple(rule.id for rule in outcome.matched),
        diagnoses=diagnoses,
        args=scrub_for_display(outcome.args, display) if outcome.args else {},
        findings=outcome.findings,
        narrowings=outcome.narrowings,
        error=evaluation.error,
        diagnosis_error=problem,
    )


def _own(exc: BaseException) -> bool:
    from runtime._errors import EvaluationError

    return isinstance(exc, EvaluationError)
