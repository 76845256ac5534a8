"""Why a rule does or does not match an action: the side API behind ``ghost policy explain``.

`Rule.diagnose` (TOML rules) and `CedarPolicy.diagnose_rules` (Cedar
statements) answer, part by part, what `matching_rules` answers as a whole.
They are not on the gate's hot path: a check never calls them, and they may
cost several evaluations per rule (a Cedar statement is evaluated once per
scope part and once whole).

A diagnosis never holds an argument value: its details name the rule's own
patterns and operators, the part of the action that was tested (agent, verb,
resource — text the caller chose to print) and the kinds of values, as the
gate's own error messages do (ADR 0033).
"""

from __future__ import annotations

from dataclasses import dataclass

from runtime._verdict import Effect

__all__ = ["PartCheck", "RuleDiagnosis"]


@dataclass(frozen=True, slots=True)
class PartCheck:
    """One part of a rule tested against an action.

    Attributes:
        part: what was tested: ``agents``, ``verbs``, ``resources``,
            ``when.<path>`` (TOML); ``principal``, ``action``, ``resource``,
            ``conditions`` (Cedar).
        holds: True or False; None when testing it raised (the gate denies
            an action whose matching raises).
        detail: a sentence saying why.
        default: the part is the rule's default (everything), so its holding
            says nothing about the rule (it does not make a near miss).
    """

    part: str
    holds: bool | None
    detail: str
    default: bool = False


@dataclass(frozen=True, slots=True)
class RuleDiagnosis:
    """How one rule fares against an action.

    Attributes:
        rule: the rule's id.
        effect: its effect.
        matched: it matches (every part holds).
        checks: each part, in the order matching tests them.
        error: the message of the error matching it raises, or None; a rule
            whose scope matches and whose condition raises denies the action.
    """

    rule: str
    effect: Effect
    matched: bool
    checks: tuple[PartCheck, ...]
    error: str | None = None

    @property
    def near_miss(self) -> bool:
        """Not matched, but all parts hold except one, and some part that holds is not a default.

        So ``verbs = ["delete"]`` with default agents and resources is not a
        near miss of every ``read``: only parts the rule chose count.
        """
        if self.matched:
            return False
        failing = [check for check in self.checks if check.holds is not True]
        chosen = [check for check in self.checks if check.holds is True and not check.default]
        return len(failing) == 1 and bool(chosen)
