"""Deriving a verdict (SPEC §3): which rule each verdict names, and the reason it records.

The reason and the matched rule are recorded in the assessment, so a reviewer
reads them to learn why an action was decided as it was: they must name the
first deciding rule in file order and every kind of change made.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import Action, Decision, Gate, Policy, RuntimeVerdict
from runtime._derivation import derive
from runtime._scrub import Scrubber
from runtime._snapshot import Snapshotter
from runtime.testing import ManualClock

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "jane.doe@example.com"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "-----END RSA PRIVATE KEY-----"
)


def check(rules: list[dict[str, Any]], args: dict[str, Any], **policy: Any) -> Decision:
    document: dict[str, Any] = {"policy_id": "p", "default": "deny", "rules": rules, **policy}
    gate = Gate(
        Policy.from_dict(document),
        sink=MemoryAuditSink(),
        clock=ManualClock(step_ns=1_000),
        fingerprint_key=b"k" * 32,
    )
    return gate.check(Action("bot", "act", "res:x", args))


def test_the_first_deny_rule_in_file_order_is_named() -> None:
    rules = [
        {"id": "ok", "effect": "allow"},
        {"id": "first-deny", "effect": "deny"},
        {"id": "second-deny", "effect": "deny"},
    ]
    decision = check(rules, {})
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy == "first-deny"
    assert decision.reason == "denied by rule 'first-deny'"


def test_the_first_approval_rule_in_file_order_is_named() -> None:
    approval = {"timeout_s": 60, "approvers": ["alice"]}
    rules = [
        {"id": "ok", "effect": "allow"},
        {"id": "first-approval", "effect": "approval", "approval": approval},
        {"id": "second-approval", "effect": "approval", "approval": approval},
    ]
    decision = check(rules, {})
    assert decision.verdict is RuntimeVerdict.PENDING
    assert decision.matched_policy == "first-approval"
    assert decision.reason == "held for approval by rule 'first-approval'"


def test_a_blocked_secret_names_every_blocking_detector_that_fired() -> None:
    rules = [{"id": "ok", "effect": "allow"}]
    decision = check(
        rules,
        {"a": AWS_KEY, "b": PEM},
        scrub={"block": ["aws_access_key_id", "private_key"]},
    )
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy is None
    names = decision.reason.removeprefix(
        "denied: the arguments hold a secret the policy blocks ("
    ).removesuffix(")")
    assert sorted(names.split(", ")) == ["aws_access_key_id", "private_key"]


def test_narrow_names_its_rule_and_every_kind_of_change() -> None:
    rules = [
        {"id": "ok", "effect": "allow"},
        {
            "id": "tighten",
            "effect": "narrow",
            "narrow": {"keep": ["n", "flag"], "clamp": {"n": 10}, "set": {"flag": True}},
        },
    ]
    decision = check(rules, {"n": 50, "flag": False, "extra": 1})
    assert decision.verdict is RuntimeVerdict.NARROW
    assert decision.matched_policy == "tighten"
    assert decision.reason == "narrowed by rule 'tighten' (clamp, keep, set)"


def test_a_narrowing_that_only_changes_a_number_type_is_a_narrowing() -> None:
    # 1 == 1.0 by value, but the arguments that run are not the ones sent.
    rules = [{"id": "as-float", "effect": "narrow", "narrow": {"set": {"n": 1.0}}}]
    decision = check(rules, {"n": 1})
    assert decision.verdict is RuntimeVerdict.NARROW
    assert type(decision.args["n"]) is float


def test_scrub_names_every_detector_that_fired() -> None:
    rules = [{"id": "ok", "effect": "allow"}]
    decision = check(rules, {"a": AWS_KEY, "b": EMAIL})
    assert decision.verdict is RuntimeVerdict.SCRUB
    assert decision.matched_policy == "ok"
    assert decision.reason == "allowed with secrets removed (aws_access_key_id, email)"


def test_allow_by_default_names_no_rule() -> None:
    decision = check([{"id": "other", "verbs": ["other"], "effect": "deny"}], {}, default="allow")
    assert decision.verdict is RuntimeVerdict.ALLOW
    assert decision.matched_policy is None
    assert decision.reason == "no rule matched; the policy default is allow"


def test_allow_names_the_first_permitting_rule() -> None:
    rules = [{"id": "first", "effect": "allow"}, {"id": "second", "effect": "allow"}]
    decision = check(rules, {})
    assert decision.matched_policy == "first"
    assert decision.reason == "allowed by rule 'first'"


def test_an_outcome_cannot_be_changed_after_derivation() -> None:
    policy = Policy.from_dict({"policy_id": "p", "default": "allow", "rules": []})
    snapshot = Snapshotter().take("bot", "act", "res:x", {})
    outcome = derive(policy, Scrubber(fingerprint_key=b"k" * 32), snapshot, lambda: 0, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.verdict = RuntimeVerdict.DENY  # type: ignore[misc]


# --- what a pending decision holds (Outcome.held, ADR 0016) ----------------------------------

_HOLD = {"id": "hold", "effect": "approval", "approval": {"timeout_s": 60}}


def _held(rules: list[dict[str, Any]], args: dict[str, Any], **policy: Any) -> Any:
    document: dict[str, Any] = {"policy_id": "p", "default": "deny", "rules": rules, **policy}
    built = Policy.from_dict(document)
    scrubber = Scrubber(
        detectors=built.scrub.detectors, block=built.scrub.block, fingerprint_key=b"k" * 32
    )
    snapshot = Snapshotter().take("bot", "act", "res:x", args)
    return derive(built, scrubber, snapshot, lambda: 0, {})


@pytest.mark.parametrize(
    ("rules", "args", "policy", "held"),
    [
        ([_HOLD], {"n": 1}, {}, RuntimeVerdict.ALLOW),
        ([_HOLD, {"id": "ok", "effect": "allow"}], {"n": 1}, {}, RuntimeVerdict.ALLOW),
        (
            [_HOLD, {"id": "cap", "effect": "narrow", "narrow": {"clamp": {"n": 5}}}],
            {"n": 9},
            {},
            RuntimeVerdict.NARROW,
        ),
        (  # a narrowing that changes nothing is not a narrowing
            [_HOLD, {"id": "cap", "effect": "narrow", "narrow": {"clamp": {"n": 5}}}],
            {"n": 1},
            {},
            RuntimeVerdict.ALLOW,
        ),
        ([_HOLD], {"to": EMAIL}, {}, RuntimeVerdict.SCRUB),
    ],
)
def test_a_pending_outcome_holds_the_verdict_it_would_have_had(
    rules: list[dict[str, Any]],
    args: dict[str, Any],
    policy: dict[str, Any],
    held: RuntimeVerdict,
) -> None:
    outcome = _held(rules, args, **policy)
    assert outcome.verdict is RuntimeVerdict.PENDING
    assert outcome.matched_policy == "hold"
    assert outcome.reason == "held for approval by rule 'hold'"
    assert outcome.held is held


@pytest.mark.parametrize(
    ("rules", "args", "policy"),
    [
        ([{"id": "ok", "effect": "allow"}], {}, {}),
        ([{"id": "no", "effect": "deny"}, _HOLD], {}, {}),
        ([_HOLD], {"key": PEM}, {"scrub": {"block": ["private_key"]}}),
        ([], {}, {}),
    ],
)
def test_only_a_pending_outcome_holds_a_verdict(
    rules: list[dict[str, Any]], args: dict[str, Any], policy: dict[str, Any]
) -> None:
    outcome = _held(rules, args, **policy)
    assert outcome.verdict is not RuntimeVerdict.PENDING
    assert outcome.held is None
