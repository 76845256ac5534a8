"""Random rule sets written both in TOML and in Cedar decide random actions identically.

A rule is generated abstractly (effect, agents, verbs, a resource pattern, an
optional condition on the argument ``n``, narrowings, approval terms, scrub
exemptions) and written twice: as a TOML rule table, and as a Cedar statement
under the convention of ADR 0028. Each action then goes through a gate on each
policy; the verdict, the arguments that run, ``matched_policy``, and the
assessment's matched rules, narrowings and findings must agree. Cedar's own
decision on the original statements is checked against the matched rules too:
it allows exactly when some statement matched and none of them is a forbid.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import MemoryAuditSink
from runtime import Action, CedarPolicy, Decision, Gate, Policy, PolicyBackend, RuntimeVerdict
from runtime.testing import ManualClock

cedarpy = pytest.importorskip("cedarpy", reason="the Cedar backend needs cedarpy")

AGENTS = ("a", "b", "ops/x")
VERBS = ("read", "send", "del")
RESOURCES = (
    "file:/d/p/x",
    "file:/d/p",
    "file:/d/p/x/y",
    "file:/d/q",
    "file:/d/p/../q",
    "file:/../x",  # ambiguous: denied by both before any rule
    "db:c",
    "mail:m",
    "mail:m/z",
)
# (TOML glob, Cedar condition) pairs: what each resource pattern means in both languages.
RESOURCE_PATTERNS = (
    ("file:/d/p/**",
     '(resource.kind == "file" && (resource.path == "/d/p" || resource.path like "/d/p/*"))'),
    ("db:c", 'resource == Resource::"db:c"'),
    ("mail:*", '(resource.kind == "mail" && !(resource.path like "*/*"))'),
    ("file:/d/q", 'resource == Resource::"file:/d/q"'),
)  # fmt: skip
OPERATORS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
EMAIL = "jane.doe@example.com"


@dataclass(frozen=True)
class Spec:
    """One abstract rule."""

    effect: str
    agents: tuple[str, ...] | None
    verbs: tuple[str, ...] | None
    resource: int | None  # index into RESOURCE_PATTERNS
    condition: tuple[str, int, bool] | None  # (operator, operand, "if present")
    clamp: int | None
    force_flag: bool
    keep: bool
    approvers: tuple[str, ...] | None
    exempt: bool


def _specs() -> st.SearchStrategy[Spec]:
    names = st.none() | st.lists(st.sampled_from(AGENTS), min_size=1, max_size=2, unique=True)
    verbs = st.none() | st.lists(st.sampled_from(VERBS), min_size=1, max_size=2, unique=True)
    condition = st.none() | st.tuples(
        st.sampled_from(sorted(OPERATORS)), st.integers(-3, 3), st.booleans()
    )

    def build(effect: str, **parts: Any) -> Spec:
        if effect == "narrow" and parts["clamp"] is None and not parts["force_flag"]:
            parts["keep"] = True  # a narrow rule needs a narrowing
        if effect != "narrow":
            parts.update(clamp=None, force_flag=False, keep=False)
        if effect != "approval":
            parts["approvers"] = None
        agents, verbs_ = parts.pop("agents"), parts.pop("verbs")
        return Spec(
            effect=effect,
            agents=None if agents is None else tuple(agents),
            verbs=None if verbs_ is None else tuple(verbs_),
            **parts,
        )

    return st.builds(
        build,
        st.sampled_from(("allow", "narrow", "approval", "deny")),
        agents=names,
        verbs=verbs,
        resource=st.none() | st.integers(0, len(RESOURCE_PATTERNS) - 1),
        condition=condition,
        clamp=st.none() | st.integers(-2, 2),
        force_flag=st.booleans(),
        keep=st.booleans(),
        approvers=st.none() | st.just(("alice",)),
        exempt=st.booleans(),
    )


def toml_rule(index: int, spec: Spec) -> dict[str, Any]:
    rule: dict[str, Any] = {"id": f"r{index}", "effect": spec.effect}
    if spec.agents is not None:
        rule["agents"] = list(spec.agents)
    if spec.verbs is not None:
        rule["verbs"] = list(spec.verbs)
    if spec.resource is not None:
        rule["resources"] = [RESOURCE_PATTERNS[spec.resource][0]]
    if spec.condition is not None:
        op, operand, if_present = spec.condition
        ops: dict[str, Any] = {op: operand}
        if if_present:
            ops["exists"] = True
        rule["when"] = {"n": ops}
    narrow: dict[str, Any] = {}
    if spec.clamp is not None:
        narrow["clamp"] = {"n": spec.clamp}
    if spec.force_flag:
        narrow["set"] = {"flag": True}
    if spec.keep:
        narrow["keep"] = ["n", "x"]
    if narrow:
        rule["narrow"] = narrow
    if spec.effect == "approval":
        approval: dict[str, Any] = {"timeout_s": 60}
        if spec.approvers is not None:
            approval["approvers"] = list(spec.approvers)
        rule["approval"] = approval
    if spec.exempt:
        rule["scrub_exempt"] = ["x"]
    return rule


def cedar_statement(index: int, spec: Spec) -> str:
    lines = [f'@id("r{index}")']
    if spec.effect in ("narrow", "approval"):
        lines.append(f'@ghost_effect("{spec.effect}")')
    if spec.clamp is not None:
        lines.append(f'@ghost_narrow_clamp("{{ n = {spec.clamp} }}")')
    if spec.force_flag:
        lines.append('@ghost_narrow_set("{ flag = true }")')
    if spec.keep:
        lines.append("@ghost_narrow_keep(\"['n', 'x']\")")
    if spec.effect == "approval":
        lines.append('@ghost_approval_timeout_s("60")')
        if spec.approvers is not None:
            lines.append(f'@ghost_approval_approvers("{list(spec.approvers)!r}")')
    if spec.exempt:
        lines.append("@ghost_scrub_exempt(\"['x']\")")
    terms = []
    if spec.verbs is not None:
        terms.append("[" + ", ".join(f"Action::{json.dumps(v)}" for v in spec.verbs) + "]"
                     ".contains(action)")  # fmt: skip
    if spec.agents is not None:
        terms.append("[" + ", ".join(f"Agent::{json.dumps(a)}" for a in spec.agents) + "]"
                     ".contains(principal)")  # fmt: skip
    if spec.resource is not None:
        terms.append(RESOURCE_PATTERNS[spec.resource][1])
    if spec.condition is not None:
        op, operand, if_present = spec.condition
        test = f"context.n {OPERATORS[op]} {operand}"
        terms.append(f"(context has n && {test})" if if_present else test)
    kind = "forbid" if spec.effect == "deny" else "permit"
    body = " && ".join(terms) if terms else "true"
    lines.append(f"{kind} (principal, action, resource) when {{ {body} }};")
    return "\n".join(lines)


values = st.one_of(
    st.integers(-5, 5), st.booleans(), st.sampled_from(["3", "", EMAIL]), st.just([1, 2])
)
argument_sets = st.fixed_dictionaries(
    {},
    optional={
        "n": values,
        "flag": st.booleans() | st.integers(0, 1),
        "x": st.sampled_from(["plain", f"mail {EMAIL}"]),
        "extra": st.integers(0, 3),
    },
)
actions = st.builds(
    Action,
    st.sampled_from(AGENTS),
    st.sampled_from(VERBS),
    st.sampled_from(RESOURCES),
    argument_sets,
)


def _check(policy: PolicyBackend, actions_: list[Action]) -> list[tuple[Decision, dict[str, Any]]]:
    sink = MemoryAuditSink()
    gate = Gate(policy, sink=sink, clock=ManualClock(step_ns=1_000), fingerprint_key=b"k" * 32)
    out = []
    for action in actions_:
        decision = gate.check(action)
        (record,) = [
            e.record
            for e in sink.entries
            if e.topic == "/assessments" and e.record["decision_id"] == decision.decision_id
        ]
        out.append((decision, dict(record)))
    return out


@settings(max_examples=60)
@given(st.lists(_specs(), max_size=6), st.lists(actions, min_size=1, max_size=6))
def test_random_rule_sets_decide_the_same_in_toml_and_in_cedar(
    specs: list[Spec], actions_: list[Action]
) -> None:
    rules = [toml_rule(i, spec) for i, spec in enumerate(specs)]
    toml = Policy.from_dict({"policy_id": "p", "default": "deny", "rules": rules})
    text = "\n\n".join(cedar_statement(i, spec) for i, spec in enumerate(specs))
    cedar = CedarPolicy.from_str(text, policy_id="p")
    effects = {f"r{i}": spec.effect for i, spec in enumerate(specs)}
    original = cedarpy.PolicySet.from_str(text)
    for (t, t_record), (c, c_record) in zip(
        _check(toml, actions_), _check(cedar, actions_), strict=True
    ):
        assert c.verdict is t.verdict, (text, t.reason, c.reason)
        assert c.args == t.args
        assert c.matched_policy == t.matched_policy
        for key in ("matched_rules", "narrowings", "findings", "args_sha256"):
            assert c_record[key] == t_record[key], key
        assert bool(c_record["errors"]) == bool(t_record["errors"])
    # Cedar's own decision on the statements as written agrees with the matched rules.
    for action, (c, record) in zip(actions_, _check(cedar, actions_), strict=True):
        if record["errors"] or not text:
            continue
        matched = [rule["id"] for rule in record["matched_rules"]]
        answer = cedarpy.is_authorized(
            {
                "principal": {"type": "Agent", "id": action.agent},
                "action": {"type": "Action", "id": action.verb},
                "resource": {"type": "Resource", "id": _canonical(action.resource)},
                "context": json.dumps(action.args),
            },
            original,
            json.dumps(_entities(action)),
        )
        expected = bool(matched) and all(effects[m] != "deny" for m in matched)
        assert answer.allowed is expected
        assert (c.verdict is RuntimeVerdict.DENY) or expected


def _canonical(resource: str) -> str:
    from runtime import canonical_resource

    return canonical_resource(resource)


def _entities(action: Action) -> list[dict[str, Any]]:
    canonical = _canonical(action.resource)
    kind, _, path = canonical.partition(":")
    return [
        {"uid": {"type": "Agent", "id": action.agent}, "attrs": {"name": action.agent},
         "parents": []},
        {"uid": {"type": "Resource", "id": canonical}, "attrs": {"kind": kind, "path": path},
         "parents": []},
    ]  # fmt: skip
