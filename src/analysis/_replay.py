"""``ghost policy replay``: a run's recorded decisions, decided again under a policy (ADR 0033).

The "policy ↔ decision coherence" analysis the seed ADR-0022 deferred. For
each decision of a run (joined to its assessment by decision id), from the
recorded agent, verb and resource and — where the run opted in
(``Gate(..., record_args="scrubbed")``) — the stored scrubbed arguments:

1. **Names.** The log keeps agent, verb and resource scrubbed, escaped and
   bounded (SPEC §4). A recorded name that holds a ``[REDACTED:…]`` marker,
   a ``\\uXXXX`` escape or a length placeholder is not the name the gate
   matched on: the decision is *not replayable*, never matched on the altered text.
2. **Exact replay.** When the stored arguments read back to exactly the
   arguments that came in — their RFC 8785 address equals the recorded
   ``args_sha256``, so the scrubber changed nothing — the action is decided
   again by `runtime.Evaluator`, the gate's own derivation: verdict,
   deciding rule and the address of the arguments that would run are compared.
3. **Replay by rules.** Otherwise (no arguments stored, or stored with
   secrets redacted) the decision is re-derived from what does not need the
   arguments: the rules whose scope (globs; Cedar's principal, action,
   resource) matches. Any such rule with conditions on the arguments makes
   the decision not replayable. A matching ``deny`` rule, or no match under a
   ``deny`` default, decides alone. Else narrowing and scrubbing matter: they
   are known from the record only when the new policy's matching rules
   narrow, exempt and scrub exactly as the recorded ones did under the run's
   own policy (the attachment); then the recorded outcome of that pipeline
   (blocked, narrowed, scrubbed or untouched: the decision's verdict, its
   ``narrowings`` and ``findings``, and for a ``pending`` one the approval's
   final verdict) is combined with the new rules by the SPEC §3 order.
   Anything else is not replayable, with the reason; nothing is guessed.

A decision *changes* when its verdict does; it is *re-ruled* when the verdict
stays but the deciding rule, or the address of the arguments that would run,
does not. A ``pending`` decision's recorded verdict is ``pending`` and is
compared as such (the derivation level, not what the human did).

Budgets (a rule's ``limit``, issue 11 item 4) would enter at step 2: the
counter state an assessment records is handed to the evaluator, not
re-counted here. Until then a decision's replay depends on its own record only.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from runtime import (
    CEDAR_BUNDLE_MEDIA_TYPE,
    CEDAR_MEDIA_TYPE,
    CedarPolicy,
    Policy,
    PolicyError,
    loads_strict,
    value_sha256,
)
from runtime._backend import PolicyBackend
from runtime._evaluate import Evaluator, LimitStateUnknown
from runtime._rule import Rule
from runtime._verdict import Effect

if TYPE_CHECKING:
    from audit import LoggedAttachment

__all__ = [
    "ReplayError",
    "ReplayReport",
    "ReplayStatus",
    "ReplayedDecision",
    "attached_policy",
    "replay_run",
]

_SCOPE_PARTS: Final = frozenset({"agents", "verbs", "resources", "principal", "action", "resource"})
_REDACTED: Final = "[REDACTED:"


class ReplayStatus(StrEnum):
    """What became of one decision under the replayed policy."""

    SAME = "same"
    """Same verdict, same deciding rule, same arguments to run."""
    CHANGED = "changed"
    """The verdict would change."""
    RERULED = "reruled"
    """Same verdict, but another deciding rule or other arguments to run."""
    NOT_REPLAYABLE = "not_replayable"
    """The record does not hold what deciding again would need (the reason says what)."""


@dataclass(frozen=True, slots=True)
class ReplayedDecision:
    """One recorded decision and what the replayed policy makes of it.

    Attributes:
        decision_id: the decision.
        agent, verb, resource: as recorded (scrubbed, escaped).
        recorded_verdict, recorded_rule: what the run decided (``matched_policy``).
        status: see `ReplayStatus`.
        verdict, rule: what the replayed policy decides (None when not replayable).
        method: ``exact`` (decided again on the stored arguments), ``rules``
            (from the matching rules and the recorded pipeline), or None.
        note: why it is not replayable, or what changed.
    """

    decision_id: str
    agent: str
    verb: str
    resource: str
    recorded_verdict: str
    recorded_rule: str | None
    status: ReplayStatus
    verdict: str | None
    rule: str | None
    method: str | None
    note: str


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """A run's decisions replayed under one policy.

    Attributes:
        run: the MCAP file.
        policy_id, policy_sha256: the replayed policy.
        own_policy: it is the run's own attached policy (the coherence check).
        decisions: every decision, in file order.
        args_stored: how many assessments held stored arguments.
    """

    run: Path
    policy_id: str
    policy_sha256: str
    own_policy: bool
    decisions: tuple[ReplayedDecision, ...]
    args_stored: int

    def with_status(self, status: ReplayStatus) -> tuple[ReplayedDecision, ...]:
        """The decisions of one status, in file order."""
        return tuple(d for d in self.decisions if d.status is status)

    @property
    def reproduced(self) -> bool:
        """No decision changed or was re-ruled (not-replayable ones aside)."""
        return not any(
            d.status in (ReplayStatus.CHANGED, ReplayStatus.RERULED) for d in self.decisions
        )

    def groups(self) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """Changed and re-ruled decisions by (recorded → new verdict, rule): ids of each group.

        The rule is the new deciding rule, or the recorded one when the new
        verdict has none; groups are sorted by size, largest first.
        """
        found: dict[tuple[str, str, str], list[str]] = {}
        for d in self.decisions:
            if d.status in (ReplayStatus.CHANGED, ReplayStatus.RERULED):
                rule = d.rule or d.recorded_rule or "-"
                found.setdefault((d.recorded_verdict, d.verdict or "-", rule), []).append(
                    d.decision_id
                )
        rows = [(old, new, rule, tuple(ids)) for (old, new, rule), ids in found.items()]
        return sorted(rows, key=lambda row: (-len(row[3]), row[0], row[1], row[2]))


class ReplayError(Exception):
    """The run or its policy cannot be used for a replay; the message says why."""


def attached_policy(
    run_record: Mapping[str, Any], attachments: Iterable[LoggedAttachment]
) -> PolicyBackend:
    """The run's own policy, rebuilt from its attachment and checked against ``policy_sha256``.

    Raises:
        ReplayError: no attachment holds the source ``/run`` names, it does not
            load, or it does not rebuild to the recorded ``policy_sha256`` (a
            Cedar policy built with ``scrub``, a schema or a mapping the
            attachment does not hold: give it with ``--policy``).
    """
    named = run_record.get("policy_source_sha256")
    found = next((a for a in attachments if a.sha256 == named), None)
    if found is None:
        raise ReplayError("no attachment holds the policy source the run names")
    try:
        policy: PolicyBackend
        if found.media_type == CEDAR_BUNDLE_MEDIA_TYPE:
            policy = CedarPolicy.from_bundle(found.data)
        elif found.media_type == CEDAR_MEDIA_TYPE:
            policy = CedarPolicy.from_str(
                found.data.decode("utf-8"), policy_id=str(run_record.get("policy_id"))
            )
        elif found.media_type == "application/json":
            data = loads_strict(found.data)
            if not isinstance(data, Mapping):
                raise ReplayError("the attached JSON policy is not an object")
            policy = Policy.from_dict(data, origin=found.name)
        else:
            import tomllib

            policy = Policy(
                tomllib.loads(found.data.decode("utf-8")),
                source=found.data,
                source_name=found.name,
                source_media_type=found.media_type,
                origin=found.name,
            )
    except (PolicyError, ValueError, RecursionError) as exc:
        raise ReplayError(f"the attached policy {found.name!r} does not load: {exc}") from None
    if policy.policy_sha256 != run_record.get("policy_sha256"):
        raise ReplayError(
            f"the attached policy {found.name!r} does not rebuild to the run's policy_sha256"
            " (a Cedar policy built with a mapping needs that mapping);"
            " give the policy with --policy"
        )
    return policy


def _limit_state(assessment: Mapping[str, Any]) -> dict[str, bool]:
    """Whether each limited rule was over its limit, as the assessment recorded (ADR 0032)."""
    state: dict[str, bool] = {}
    entries = assessment.get("limits")
    if isinstance(entries, list):
        for entry in entries:
            if isinstance(entry, Mapping) and isinstance(entry.get("rule"), str):
                state[entry["rule"]] = entry.get("exceeded") is True
    return state


def _over_limits(matched: list[Rule], state: Mapping[str, bool]) -> list[Rule]:
    """``matched`` with each limited rule kept only when it was over its limit.

    As the gate's limit step: when an unlimited deny rule matched, no counter was
    asked (none is needed); otherwise a limited rule with no recorded state makes
    the decision not replayable.
    """
    if all(rule.limit is None for rule in matched):
        return matched
    unlimited = [rule for rule in matched if rule.limit is None]
    if any(rule.effect is Effect.DENY for rule in unlimited):
        return unlimited
    kept = []
    for rule in matched:
        if rule.limit is None:
            kept.append(rule)
        elif rule.id not in state:
            raise _NotReplayable(
                f"limited rule {rule.id!r} matches it, and the run recorded no counter state"
                " for that rule"
            )
        elif state[rule.id]:
            kept.append(rule)
    return kept


def replay_run(path: Path, policy: PolicyBackend | None = None) -> ReplayReport:
    """Replay every decision of a run under ``policy`` (None: the run's own attached policy).

    Raises:
        audit.LogFormatError: the file is not a readable ghost audit log.
        ReplayError: the run has no ``/run`` record, or (``policy`` None) its
            attached policy cannot be rebuilt.
    """
    from audit import read_run  # here: importing analysis must not import mcap

    log = read_run(path)
    runs = [r.record for r in log.records if r.topic == "/run" and r.record is not None]
    if not runs:
        raise ReplayError("the run has no /run record")
    try:
        recorded_policy: PolicyBackend | None = attached_policy(runs[0], log.attachments)
    except ReplayError:
        if policy is None:
            raise
        recorded_policy = None
    target = policy if policy is not None else recorded_policy
    assert target is not None
    assessments: dict[str, Mapping[str, Any]] = {}
    approved: dict[str, str] = {}
    decisions: list[Mapping[str, Any]] = []
    for item in log.records:
        record = item.record
        if record is None:
            continue
        if item.topic == "/assessments":
            assessments[str(record.get("decision_id"))] = record
        elif item.topic == "/decisions":
            decisions.append(record)
        elif item.topic == "/approvals" and record.get("outcome") == "approved":
            approved[str(record.get("decision_id"))] = str(record.get("final_verdict"))
    replayer = _Replayer(target, recorded_policy, approved)
    out = tuple(
        replayer.replay(decision, assessments.get(str(decision.get("decision_id"))))
        for decision in decisions
    )
    stored = sum(1 for a in assessments.values() if isinstance(a.get("args_scrubbed"), str))
    return ReplayReport(
        run=Path(path),
        policy_id=target.policy_id,
        policy_sha256=target.policy_sha256,
        own_policy=policy is None,
        decisions=out,
        args_stored=stored,
    )


class _NotReplayable(Exception):
    """One decision cannot be decided again; the message says why."""


@dataclass(frozen=True, slots=True)
class _Decided:
    verdict: str
    rule: str | None
    executed_sha256: str | None
    method: str


class _Replayer:
    def __init__(
        self,
        policy: PolicyBackend,
        recorded: PolicyBackend | None,
        approved: Mapping[str, str],
    ) -> None:
        self.policy = policy
        self.recorded = recorded
        self.approved = approved
        self.evaluator = Evaluator(policy)
        self.recorded_rules = {} if recorded is None else {r.id: r for r in recorded.rules}

    def replay(
        self, decision: Mapping[str, Any], assessment: Mapping[str, Any] | None
    ) -> ReplayedDecision:
        decision_id = str(decision.get("decision_id"))
        names = ("", "", "") if assessment is None else tuple(
            str(assessment.get(key, "")) for key in ("agent", "verb", "resource")
        )  # fmt: skip
        verdict = str(decision.get("verdict"))
        rule = decision.get("matched_policy")
        recorded_rule = rule if isinstance(rule, str) else None

        def result(status: ReplayStatus, decided: _Decided | None, note: str) -> ReplayedDecision:
            return ReplayedDecision(
                decision_id, names[0], names[1], names[2], verdict, recorded_rule, status,
                None if decided is None else decided.verdict,
                None if decided is None else decided.rule,
                None if decided is None else decided.method, note,
            )  # fmt: skip

        try:
            if assessment is None:
                raise _NotReplayable("no assessment was recorded for it")
            decided = self.decide(decision, assessment)
        except _NotReplayable as why:
            return result(ReplayStatus.NOT_REPLAYABLE, None, str(why))
        if decided.verdict != verdict:
            return result(ReplayStatus.CHANGED, decided, f"{verdict} -> {decided.verdict}")
        if decided.rule != recorded_rule:
            note = f"decided by {decided.rule or 'no rule'} instead of {recorded_rule or 'no rule'}"
            return result(ReplayStatus.RERULED, decided, note)
        recorded_executed = decision.get("executed_args_sha256")
        if decided.executed_sha256 != recorded_executed:
            return result(ReplayStatus.RERULED, decided, "other arguments would run")
        return result(ReplayStatus.SAME, decided, "")

    def decide(self, decision: Mapping[str, Any], assessment: Mapping[str, Any]) -> _Decided:
        agent, verb, resource = (str(assessment.get(k, "")) for k in ("agent", "verb", "resource"))
        for field, text in (("agent", agent), ("verb", verb), ("resource", resource)):
            problem = _altered(text)
            if problem is not None:
                raise _NotReplayable(f"the recorded {field} {problem}, so it cannot be matched")
        args_sha256 = assessment.get("args_sha256")
        if not isinstance(args_sha256, str):
            raise _NotReplayable("its arguments had no canonical form (they were not plain data)")
        args = _stored_args(assessment.get("args_scrubbed"), args_sha256)
        state = _limit_state(assessment)
        if args is not None:
            try:
                evaluation = self.evaluator.evaluate(agent, verb, resource, args, exceeded=state)
            except LimitStateUnknown as unknown:
                raise _NotReplayable(
                    f"limited rule {unknown.rule!r} matches it, and the run recorded no"
                    " counter state for that rule"
                ) from None
            outcome = evaluation.outcome
            return _Decided(
                outcome.verdict.value,
                outcome.matched_policy,
                evaluation.executed_args_sha256,
                "exact",
            )
        why = (
            "its arguments were stored with secrets redacted"
            if isinstance(assessment.get("args_scrubbed"), str)
            else "its arguments were not stored (Gate record_args)"
        )
        return self.by_rules(decision, assessment, agent, verb, resource, why, state)

    def by_rules(
        self,
        decision: Mapping[str, Any],
        assessment: Mapping[str, Any],
        agent: str,
        verb: str,
        resource: str,
        why: str,
        state: Mapping[str, bool],
    ) -> _Decided:
        matched = _over_limits(self.scope_matches(agent, verb, resource, why), state)
        deny = next((r for r in matched if r.effect is Effect.DENY), None)
        if deny is not None:
            return _Decided("deny", deny.id, None, "rules")
        if not matched and self.policy.default is Effect.DENY:
            return _Decided("deny", None, None, "rules")
        old = self.recorded_matches(assessment, why)
        if assessment.get("errors"):
            raise _NotReplayable(f"the recorded decision failed, and {why}")
        if any(r.effect is Effect.DENY for r in old) or (
            not old and self.recorded is not None and self.recorded.default is Effect.DENY
        ):
            raise _NotReplayable(
                f"it was denied before narrowing and scrubbing ran, which would now run; {why}"
            )
        if not _same_pipeline(matched, old, self.policy, self.recorded):
            raise _NotReplayable(f"the policy narrows, exempts or scrubs it differently; {why}")
        verdict = str(decision.get("verdict"))
        executed = decision.get("executed_args_sha256")
        if verdict == "deny":  # the pipeline blocked it (a secret of a blocking detector)
            return _Decided("deny", None, None, "rules")
        base = self.base_verdict(decision, assessment, why)
        narrowing = [r for r in matched if r.effect is Effect.NARROW]
        rule: str | None
        if base == "narrow":
            first = assessment["narrowings"][0]["rule"]
            old_narrowing = [r.id for r in old if r.effect is Effect.NARROW]
            rule = narrowing[old_narrowing.index(first)].id
        else:
            rule = next((r.id for r in matched if r.effect in (Effect.ALLOW, Effect.NARROW)), None)
        approval = next((r for r in matched if r.effect is Effect.APPROVAL), None)
        executed_text = executed if isinstance(executed, str) else None
        if approval is not None:
            return _Decided("pending", approval.id, executed_text, "rules")
        return _Decided(base, rule, executed_text, "rules")

    def scope_matches(self, agent: str, verb: str, resource: str, why: str) -> list[Rule]:
        diagnose = getattr(self.policy, "diagnose_rules", None)
        if not callable(diagnose):
            raise _NotReplayable(
                f"the policy cannot say which rules match without the arguments; {why}"
            )
        try:
            diagnoses = diagnose(agent, verb, resource, {})
        except Exception as exc:  # noqa: BLE001 - an ambiguous resource denies whatever the arguments
            from runtime import AmbiguousResource

            if isinstance(exc, AmbiguousResource):
                raise _NotReplayable(f"its resource is ambiguous ({exc}); {why}") from None
            raise _NotReplayable(f"its matching raised {type(exc).__name__}; {why}") from None
        by_id = {rule.id: rule for rule in self.policy.rules}
        matched = []
        for diagnosis in diagnoses:
            scope = [c for c in diagnosis.checks if c.part in _SCOPE_PARTS]
            if not all(check.holds for check in scope):
                continue
            if any(c.part not in _SCOPE_PARTS for c in diagnosis.checks):
                raise _NotReplayable(
                    f"rule {diagnosis.rule!r} has conditions on the arguments, and {why}"
                )
            matched.append(by_id[diagnosis.rule])
        return matched

    def recorded_matches(self, assessment: Mapping[str, Any], why: str) -> list[Rule]:
        if self.recorded is None:
            raise _NotReplayable(f"the run's own policy cannot be rebuilt to compare with; {why}")
        rules = []
        for entry in assessment.get("matched_rules", ()):
            rule = self.recorded_rules.get(str(entry.get("id")))
            if rule is None or rule.effect.value != entry.get("effect"):
                raise _NotReplayable("its recorded rules are not the run's policy's")
            rules.append(rule)
        return rules

    def base_verdict(
        self, decision: Mapping[str, Any], assessment: Mapping[str, Any], why: str
    ) -> str:
        """What narrowing and scrubbing made of the action (narrow, scrub, allow): the record's."""
        verdict = str(decision.get("verdict"))
        if verdict in ("narrow", "scrub", "allow"):
            return verdict
        held = self.approved.get(str(decision.get("decision_id")))
        if held is not None:
            return held
        if assessment.get("narrowings"):
            return "narrow"  # read as changed: two narrowings that cancel out are not told apart
        return "scrub" if assessment.get("findings") else "allow"


def _same_pipeline(
    new: list[Rule], old: list[Rule], policy: PolicyBackend, recorded: PolicyBackend | None
) -> bool:
    """Whether narrowing and scrubbing would run exactly as they did when the decision was made."""
    if recorded is None or policy.scrub != recorded.scrub:
        return False
    narrow_new = [r.narrow for r in new if r.effect is Effect.NARROW]
    narrow_old = [r.narrow for r in old if r.effect is Effect.NARROW]
    exempt_new = [p for r in new for p in r.scrub_exempt]
    exempt_old = [p for r in old for p in r.scrub_exempt]
    return narrow_new == narrow_old and exempt_new == exempt_old


def _altered(text: str) -> str | None:
    """Why a recorded name is not the name the gate saw, or None if it is."""
    if _REDACTED in text:
        return "was scrubbed in the log"
    if "\\u" in text:
        return "was escaped in the log"
    if text.startswith("<") and ("not recorded" in text or text.startswith("<not a string")):
        return "was not recorded"
    return None


def _stored_args(stored: object, args_sha256: str) -> dict[str, Any] | None:
    """The stored arguments, if they are exactly the arguments that came in; else None."""
    if not isinstance(stored, str):
        return None
    try:
        value = _untag(loads_strict(stored.encode("utf-8")))
    except (ValueError, RecursionError, binascii.Error):
        return None
    if not isinstance(value, dict):
        return None
    try:
        same = value_sha256(value) == args_sha256
    except Exception:  # noqa: BLE001 - what cannot be addressed is not the original
        return None
    return value if same else None


def _untag(value: Any) -> Any:
    """Undo the `runtime.jcs_bytes` tagged forms a snapshot can hold (bytes; a ``$ghost`` key)."""
    if isinstance(value, list):
        return [_untag(item) for item in value]
    if not isinstance(value, dict):
        return value
    tag = value.get("$ghost")
    if tag == "bytes" and set(value) == {"$ghost", "base64"}:
        return base64.b64decode(value["base64"], validate=True)
    if tag == "map" and set(value) == {"$ghost", "items"} and isinstance(value["items"], list):
        return {str(k): _untag(v) for k, v in value["items"]}
    return {key: _untag(item) for key, item in value.items()}
