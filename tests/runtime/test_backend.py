"""The policy-backend protocol: the gate takes any backend and derives its verdicts alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    Action,
    ApprovalSpec,
    Effect,
    Gate,
    Policy,
    PolicyBackend,
    Rule,
    RuntimeVerdict,
    ScrubSettings,
    sha256_hex,
)
from runtime.testing import ManualClock


class Recording:
    """A backend of its own: every rule matches; it counts the calls it gets."""

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.policy_id = "mine"
        self.policy_sha256 = "0" * 64
        self.default = Effect.DENY
        self.rules = rules
        self.scrub = ScrubSettings()
        self.source = b"mine"
        self.source_name = "mine.txt"
        self.source_media_type = "text/plain"
        self.source_sha256 = sha256_hex(self.source)
        self.calls: list[tuple[str, str, str]] = []

    def matching_rules(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[Rule, ...]:
        self.calls.append((agent, verb, resource))
        return self.rules


def test_policy_is_a_policy_backend() -> None:
    assert isinstance(Policy.from_dict({"policy_id": "p"}), PolicyBackend)


def test_a_backend_of_its_own_gets_the_gates_derivation_and_record() -> None:
    backend = Recording(
        (Rule("a", Effect.ALLOW), Rule("b", Effect.APPROVAL, approval=ApprovalSpec(60.0, None)))
    )
    sink = MemoryAuditSink()
    gate = Gate(backend, sink=sink, clock=ManualClock())
    decision = gate.check(Action("x", "y", "z:1", {"mail": "jane.doe@example.com"}))
    # The verdict comes from derive: an approval rule holds it, the scrubber ran.
    assert decision.verdict is RuntimeVerdict.PENDING
    assert decision.matched_policy == "b"
    assert decision.args == {"mail": "[REDACTED:email]"}
    assert backend.calls == [("x", "y", "z:1")]
    assert gate.policy is backend
    run = sink.run
    assert run is not None
    assert (run.policy_id, run.policy_source, run.policy_source_media_type) == (
        "mine",
        b"mine",
        "text/plain",
    )


def test_a_backend_that_raises_denies_by_type() -> None:
    class Broken(Recording):
        def matching_rules(self, *_: object) -> tuple[Rule, ...]:  # type: ignore[override]
            raise KeyError("secret")

    decision = Gate(Broken(()), sink=MemoryAuditSink(), clock=ManualClock()).check(
        Action("x", "y", "z:1", {})
    )
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.reason == "denied: evaluation failed with KeyError"


def test_an_object_missing_part_of_the_protocol_is_refused() -> None:
    incomplete = Recording(())
    del incomplete.source_sha256
    with pytest.raises(TypeError, match="policy must be a PolicyBackend, not Recording"):
        Gate(incomplete, sink=MemoryAuditSink())  # type: ignore[arg-type]
