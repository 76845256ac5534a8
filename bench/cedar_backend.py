"""Issue 11's Cedar row: the Cedar backend's audited decision against bare cedarpy.

The same policy — the bundled demo policy in Cedar (`analysis/demo_policy.cedar`)
— is timed three ways on the same action:

* bare ``cedarpy.is_authorized`` on the statements as written, with a pre-parsed
  `PolicySet` and `Entities` handle (the least a Cedar authorization costs);
* `CedarPolicy.matching_rules` alone: the backend's part of a check (canonical
  resource, request encoding, one ``is_authorized`` on the all-permit set, rules
  in file order);
* `Gate.check` on the `CedarPolicy` with `McapAuditSink` in ``process`` mode: the
  full audited decision (snapshot, matching, narrowing, scrubbing, hashing, the
  span, both records written), beside the same gate on the TOML demo policy.

Two actions: the P1 mail of ~1 KB with two secrets (verdict ``scrub``), and a
small refund (``allow``). Candidates are timed one call at a time, interleaved
round by round; percentiles are over every call.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from analysis._demo import demo_cedar_policy, demo_cedar_policy_path, demo_policy_path
from audit import McapAuditSink
from bench._harness import Row, Section
from bench.decision import sampled, workload
from runtime import Action, CedarPolicy, Gate, Policy, canonical_resource

__all__ = ["run"]

_REFUND = Action("support", "refund", "payments:stripe", {"amount": 20, "currency": "EUR"})
_MAX_MATCHING_RATIO = 2.0


def _percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def _bare(action: Action) -> Callable[[], object]:
    """Bare cedarpy on the demo statements as written, for ``action`` under the convention."""
    import cedarpy  # the cedar extra

    policies = cedarpy.PolicySet.from_str(demo_cedar_policy_path().read_text())
    resource = canonical_resource(action.resource)
    kind, _, path = resource.partition(":")
    agent = {"type": "Agent", "id": action.agent}
    target = {"type": "Resource", "id": resource}
    entities = cedarpy.Entities.from_json_str(
        json.dumps(
            [
                {"uid": agent, "attrs": {"name": action.agent}, "parents": []},
                {"uid": target, "attrs": {"kind": kind, "path": path}, "parents": []},
            ]
        )
    )
    request = {
        "principal": {"type": "Agent", "id": action.agent},
        "action": {"type": "Action", "id": action.verb},
        "resource": {"type": "Resource", "id": resource},
        "context": dict(action.args),
    }
    answer = cedarpy.is_authorized(request, policies, entities)
    if answer.decision != cedarpy.Decision.Allow or answer.diagnostics.errors:
        raise RuntimeError(f"bare Cedar does not allow the bench action: {answer.decision}")
    return lambda: cedarpy.is_authorized(request, policies, entities)


def _matching(policy: CedarPolicy, action: Action) -> Callable[[], object]:
    agent, verb, resource, args = action.agent, action.verb, action.resource, dict(action.args)
    if not policy.matching_rules(agent, verb, resource, args):
        raise RuntimeError("the Cedar backend matches no rule for the bench action")
    return lambda: policy.matching_rules(agent, verb, resource, args)


def run(*, quick: bool = False) -> list[Section]:
    """Time the Cedar backend against bare cedarpy on the demo policy (module docstring).

    Args:
        quick: fewer rounds (a smoke run, for the tests).

    Returns:
        One section per action.
    """
    rounds, calls = (4, 10) if quick else (40, 50)
    cedar = demo_cedar_policy()
    toml = Policy.from_toml(demo_policy_path())
    sections = []
    with tempfile.TemporaryDirectory() as tmp:
        sinks = [McapAuditSink(Path(tmp) / f"{name}.mcap") for name in ("cedar", "toml")]
        cedar_gate = Gate(cedar, sink=sinks[0])
        toml_gate = Gate(toml, sink=sinks[1])
        for label, action in (("~1 KB mail with two secrets", workload()), ("refund", _REFUND)):
            verdict = cedar_gate.check(action).verdict.value
            if toml_gate.check(action).verdict.value != verdict:
                raise RuntimeError("the two demo policies disagree on the bench action")
            samples = sampled(
                {
                    "bare": _bare(action),
                    "matching": _matching(cedar, action),
                    "gate": lambda a=action: cedar_gate.check(a),  # type: ignore[misc]
                    "toml": lambda a=action: toml_gate.check(a),  # type: ignore[misc]
                },
                rounds=rounds,
                calls=calls,
            )
            sections.append(_section(label, verdict, samples))
        for sink in sinks:
            sink.close()
    return sections


def _section(label: str, verdict: str, samples: dict[str, list[int]]) -> Section:
    p50 = {name: _percentile(values, 0.5) for name, values in samples.items()}
    p99 = {name: _percentile(values, 0.99) for name, values in samples.items()}
    matching = p50["matching"] / p50["bare"]
    return Section(
        f"Cedar backend: the audited decision against bare cedarpy ({label})",
        "The bundled demo policy in Cedar, on one action"
        f" (verdict: {verdict}). Peer: `cedarpy.is_authorized` on the statements as written"
        " with a pre-parsed `PolicySet` and `Entities`. `matching_rules` is the backend's"
        " share of a check; `Gate.check` is the whole audited decision (`McapAuditSink`,"
        " `process` mode). Per-call times.",
        (
            Row("peer: cedarpy.is_authorized, p50", p50["bare"] / 1e3, "µs"),
            Row("peer: cedarpy.is_authorized, p99", p99["bare"] / 1e3, "µs"),
            Row(
                "CedarPolicy.matching_rules, p50",
                p50["matching"] / 1e3,
                "µs",
                ratio=matching,
                target=f"≤ {_MAX_MATCHING_RATIO:.1f}× the peer's p50",
                holds=matching <= _MAX_MATCHING_RATIO,
            ),
            Row(
                "gate.check (Cedar), p50", p50["gate"] / 1e3, "µs", ratio=p50["gate"] / p50["bare"]
            ),
            Row(
                "gate.check (Cedar), p99", p99["gate"] / 1e3, "µs", ratio=p99["gate"] / p99["bare"]
            ),
            Row("gate.check (TOML), p50", p50["toml"] / 1e3, "µs", ratio=p50["toml"] / p50["bare"]),
        ),
        notes=(
            (
                "The backend's overhead over the peer is the request's encoding (the strict"
                " value check and orjson, entities sent as JSON text each call, since they hold"
                " the action's own names) and reading Cedar's answer; the gate's is the rest of"
                " an audited decision, the same for both backends."
            ),
        ),
    )
