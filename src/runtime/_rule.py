"""One policy rule: its terms, frozen, and its matching, compiled once (SPEC §4).

A rule matches an action when a glob of each of its ``agents``, ``verbs`` and
``resources`` matches (`runtime._glob`) and every ``when`` condition holds
(`runtime._conditions`). The resource it is handed must be canonical
(`runtime._resource.canonical_resource`, computed once per check); the
conditions are evaluated only for a rule whose globs matched, so an error in
one (a missing path) denies only an action the rule applies to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime._conditions import Condition
from runtime._diagnosis import PartCheck, RuleDiagnosis
from runtime._errors import EvaluationError
from runtime._frozen import thaw
from runtime._glob import GlobSet
from runtime._limit import LimitSpec
from runtime._narrowing import Narrowing
from runtime._verdict import Effect

__all__ = ["ApprovalSpec", "Rule"]


@dataclass(frozen=True, slots=True)
class ApprovalSpec:
    """An ``approval`` rule's terms: how long a human has, and who may approve (None: anyone)."""

    timeout_s: float
    approvers: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class Rule:
    """One policy rule, with its globs compiled.

    Attributes:
        id: unique within the policy; recorded as ``matched_policy``.
        effect: what a match means.
        agents, verbs, resources: the glob patterns (defaults: everything).
        when: the conditions, all of which must hold.
        narrow: the narrowings of a ``narrow`` rule.
        approval: the terms of an ``approval`` rule.
        scrub_exempt: dotted argument paths its matching actions send unscrubbed.
        description: free text.
        limit: a budget or rate (ADR 0032): the rule then matches only when the
            action would exceed it (`runtime._budget`).
        shadow: evaluated but not enforced (``shadow = true``, ADR 0031): the
            policy never counts it among an action's matched rules; the gate
            records what the policy would have decided with it enforced.

    Raises (on construction):
        GlobError: a glob is malformed.
    """

    id: str
    effect: Effect
    agents: tuple[str, ...] = ("*",)
    verbs: tuple[str, ...] = ("*",)
    resources: tuple[str, ...] = ("**",)
    when: tuple[Condition, ...] = ()
    narrow: Narrowing | None = None
    approval: ApprovalSpec | None = None
    scrub_exempt: tuple[str, ...] = ()
    description: str = ""
    limit: LimitSpec | None = None
    shadow: bool = False
    _agents: GlobSet = field(init=False, repr=False, compare=False)
    _verbs: GlobSet = field(init=False, repr=False, compare=False)
    _resources: GlobSet = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_agents", GlobSet(self.agents, resources=False, field="agent"))
        object.__setattr__(self, "_verbs", GlobSet(self.verbs, resources=False, field="verb"))
        object.__setattr__(
            self, "_resources", GlobSet(self.resources, resources=True, field="resource")
        )

    @property
    def verb_literals(self) -> frozenset[str] | None:
        """The verbs as a set when none is a pattern (what the policy's verb index uses)."""
        return self._verbs.literals

    def matches(self, agent: str, verb: str, resource: str, args: Mapping[str, Any]) -> bool:
        """Whether this rule applies to the action.

        Args:
            agent, verb: the action's names.
            resource: the action's resource in canonical form (`canonical_resource`).
            args: the action's arguments (the snapshot's plain data).

        Raises:
            UnsupportedValue: ``agent``, ``verb`` or ``resource`` is not a ``str``.
            ConditionError: a ``when`` path is missing or runs through a non-dict.
            ConditionTypeError: a ``when`` value has the wrong kind for its operator.
        """
        return (
            self._verbs.matches(verb)
            and self._agents.matches(agent)
            and self._resources.matches(resource)
            and all(condition.holds(args) for condition in self.when)
        )

    def diagnose(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> RuleDiagnosis:
        """Why this rule does or does not match the action, part by part (`runtime._diagnosis`).

        Not for the hot path: `matches` answers the same question at once.
        Every condition is tested, even when a glob failed, so that a near
        miss shows what else would have stood in the way; a condition's
        error counts (`RuleDiagnosis.error`) only where the globs matched, as
        in `matches`.

        Args:
            agent, verb, resource, args: as `matches` (``resource`` canonical).
        """
        checks = [
            _glob_check("verbs", self._verbs, verb, "verb", self.verbs == ("*",)),
            _glob_check("agents", self._agents, agent, "agent", self.agents == ("*",)),
            _glob_check("resources", self._resources, resource, "resource",
                        self.resources == ("**",)),
        ]  # fmt: skip
        scoped = all(check.holds for check in checks)
        error = None
        for condition in self.when:
            operators = ", ".join(f"{op} {_operand(value)}" for op, value in condition.operators)
            part = f"when.{condition.dotted}"
            try:
                holds = condition.holds(args)
            except EvaluationError as exc:
                checks.append(PartCheck(part, None, f"cannot be evaluated: {exc}"))
                if scoped and error is None:
                    error = str(exc)
                continue
            detail = f"{operators}: {'holds' if holds else 'does not hold'}"
            checks.append(PartCheck(part, holds, detail))
        matched = error is None and all(check.holds for check in checks)
        return RuleDiagnosis(self.id, self.effect, matched, tuple(checks), error)


def _glob_check(part: str, globs: GlobSet, text: str, what: str, default: bool) -> PartCheck:
    patterns = ", ".join(repr(p) for p in globs.patterns)
    if globs.matches(text):
        return PartCheck(part, holds=True, detail=f"the {what} matches {patterns}", default=default)
    return PartCheck(part, holds=False, detail=f"the {what} matches none of {patterns}",
                     default=default)  # fmt: skip


def _operand(value: object) -> str:
    text = repr(thaw(value))
    return text if len(text) <= 60 else text[:57] + "..."
